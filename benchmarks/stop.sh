#!/usr/bin/env bash
# `binky remove` of a world with a Celery-like worker, which on SIGTERM finishes its work
# (3 s) before it exits and on SIGQUIT stops at once, in three arms of one run:
#   quit:    the worker has stop_signal = "SIGQUIT";
#   term:    the same world without it (the comparator): SIGTERM, then its 3 s;
#   ordered: as term, with [defaults] stop_after_dependents = true: binky's order before
#            every service was signalled at once (dependents first, level by level).
# The world: api (an HTTP server), worker (depends on api), flower (an HTTP server that
# depends on worker), so the ordered arm stops in three levels.
# Each round brings each arm's world up, waits until the worker has its signal handlers,
# and times the whole `binky remove` command; the arms take turns.
#
#   ./benchmarks/stop.sh [ROUNDS]          BINKY=path/to/binky to skip the release build
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-10}"
if [ -z "${BINKY:-}" ]; then
    cargo build --release -q
    BINKY="${CARGO_TARGET_DIR:-$PWD/target}/release/binky"
fi
bin="$BINKY"
work="$(mktemp -d)"
export BINKY_HOME="$work/home"
arms="quit term ordered"
cleanup() {
    for arm in $arms; do
        [ -d "$work/$arm" ] && (cd "$work/$arm" && "$bin" remove w --force -q >/dev/null 2>&1 || true)
    done
    "$bin" daemon stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
ms() { python3 -c "import time; print(int(time.monotonic() * 1000))"; }

base=47400
for arm in $arms; do
    mkdir "$work/$arm"
    cd "$work/$arm"
    git init -q -b main
    cat > worker.py <<'PY'
import os, signal, time
def quit_(n, f):
    os._exit(0)
def term(n, f):
    # A warm shutdown: the tasks in hand are finished first.
    time.sleep(3)
    os._exit(0)
signal.signal(signal.SIGQUIT, quit_)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
while True:
    time.sleep(3600)
PY
    {
        printf '[project]\nname = "stop%s"\nport_range = [%d, %d]\n\n' "$arm" "$base" $((base + 20))
        [ "$arm" = ordered ] && printf '[defaults]\nstop_after_dependents = true\n\n'
        printf '[services.api]\ncmd = "exec python3 -m http.server ${self.port} --bind 127.0.0.1"\nurl = true\n\n'
        printf '[services.worker]\ncmd = "exec python3 worker.py"\ndepends_on = ["api"]\n'
        [ "$arm" = quit ] && printf 'stop_signal = "SIGQUIT"\n'
        printf '\n[services.flower]\ncmd = "exec python3 -m http.server ${self.port} --bind 127.0.0.1"\nurl = true\ndepends_on = ["worker"]\n'
    } > binky.toml
    git add -A && git -c user.name=b -c user.email=b@b commit -qm init
    base=$((base + 30))
done
cd "$work"
"$bin" port --proxy 0 --https 0 >/dev/null 2>&1 || true

echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round  $(for a in $arms; do printf '%10s' "$a"; done)   (binky remove, ms)"
results="$work/results"
: > "$results"
for r in $(seq 1 "$rounds"); do
    line=$(printf '%5d  ' "$r")
    for arm in $arms; do
        cd "$work/$arm"
        "$bin" up w -q >/dev/null
        for _ in $(seq 200); do
            "$bin" logs w worker -n 5 2>/dev/null | grep -q '^ready' && break
            sleep 0.05
        done
        t0=$(ms)
        "$bin" remove w --force -q >/dev/null
        t1=$(ms)
        echo "$arm $((t1 - t0))" >> "$results"
        line="$line$(printf '%10d' $((t1 - t0)))"
    done
    echo "$line"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    arm, ms = line.split()
    runs.setdefault(arm, []).append(int(ms))
for arm, v in runs.items():
    print(f"{arm:8} median {statistics.median(v) / 1000:.2f} s   min {min(v) / 1000:.2f} s   max {max(v) / 1000:.2f} s   ({len(v)} runs)")
PY
