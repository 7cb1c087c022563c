#!/usr/bin/env bash
# `binky remove` of a world whose worktree holds a node_modules of 20,000 files (316 MB),
# against what a person does by hand: `git worktree remove --force` of the same tree.
# Each round makes the tree afresh (page cache dropped when possible) and times both.
#
#   ./benchmarks/remove.sh [ROUNDS] [FILES]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
files="${2:-20000}"
cargo build --release -q
bin="$PWD/target/release/binky"
work="$(mktemp -d)"
export BINKY_HOME="$work/home"
trap '"$bin" daemon stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir "$work/repo" && cd "$work/repo"
git init -q -b main
printf 'node_modules/\n' > .gitignore
cat > binky.toml <<'TOML'
[project]
name = "rmbench"
port_range = [47000, 47100]

[services.web]
cmd = "exec python3 -m http.server ${self.port}"
url = true
TOML
git add -A && git -c user.name=b -c user.email=b@b commit -qm init
fill() {
    python3 - "$1" "$files" <<'PY'
import os, sys
root, n = os.path.join(sys.argv[1], "node_modules"), int(sys.argv[2])
data = os.urandom(16000)
for i in range(n):
    d = os.path.join(root, f"pkg{i // 50}", "lib")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.js"), "wb") as f:
        f.write(data)
PY
    sync
    echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
}
ms() { python3 -c "import time; print(int(time.monotonic() * 1000))"; }
echo "round  binky remove  git worktree remove --force  ratio"
for r in $(seq 1 "$rounds"); do
    "$bin" up w -q >/dev/null 2>&1 || "$bin" up w >/dev/null
    fill "$work/repo.worktrees/w"
    t0=$(ms); "$bin" remove w >/dev/null 2>&1; t1=$(ms)
    binky_ms=$((t1 - t0))
    git worktree add -q "$work/hand" -b hand
    fill "$work/hand"
    t0=$(ms); git worktree remove --force "$work/hand"; t1=$(ms)
    git branch -q -D hand
    hand_ms=$((t1 - t0))
    python3 -c "print(f'{$r:5}  {$binky_ms:9} ms  {$hand_ms:24} ms  {$hand_ms/max($binky_ms,1):5.1f}x')"
    # The background deletion ends before the next round starts.
    while [ -n "$(ls -A "$BINKY_HOME/trash" 2>/dev/null)" ]; do sleep 0.2; done
done
