#!/usr/bin/env bash
# The long kill storm: 150 operations (up/down/remove --no-wait of 6 worlds with a
# PostgreSQL and a Redis slice), the daemon killed with SIGKILL after three in four of them,
# then every world brought up and removed; and, as the comparator, the same operations with
# no kill. Each run ends with the leak checks of tests/integration/storm.rs (no process,
# worktree, branch, port or slice left) and prints one report line.
#
#   ./benchmarks/storm.sh [OPS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
ops="${1:-150}"
seed="${2:-20261203}"
run() {
    BINKY_STORM_OPS="$ops" BINKY_STORM_SEED="$seed" BINKY_STORM_KILL="$1" \
        cargo test --release --test integration -q storm:: -- --nocapture 2>&1 |
        grep -E 'storm report|panicked|test result' || true
}
echo "kill storm ($ops operations, seed $seed):"
run 1
echo "calm comparator (same operations, no kill):"
run 0
