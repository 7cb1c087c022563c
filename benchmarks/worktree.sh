#!/usr/bin/env bash
# A world's worktree with a node_modules of 20,000 files (~320 MB), against what a person
# does by hand, in one run:
#   bootstrap: `binky up` copies node_modules from the main checkout into the new worktree
#              ([project] copy), timed by binky's own progress line  vs  `cp -a` of the same
#              directory into a `git worktree add` checkout;
#   remove:    `binky remove` of the world  vs  `git worktree remove --force` of that checkout.
# Each round makes both afresh (page cache dropped when possible).
#
#   ./benchmarks/worktree.sh [ROUNDS] [FILES]
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
name = "wtbench"
port_range = [47000, 47100]
copy = ["node_modules"]

[services.web]
cmd = "exec python3 -m http.server ${self.port}"
url = true
TOML
git add -A && git -c user.name=b -c user.email=b@b commit -qm init
python3 - "$files" <<'PY'
import os, sys
n = int(sys.argv[1])
data = os.urandom(16000)
for i in range(n):
    d = os.path.join("node_modules", f"pkg{i // 50}", "lib")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.js"), "wb") as f:
        f.write(data)
PY
size=$(du -sm node_modules | cut -f1)
fs=$(df -T . | awk 'NR==2 {print $2}')
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
ms() { python3 -c "import time; print(int(time.monotonic() * 1000))"; }
echo "node_modules: $files files, $size MB, on $fs ($(nproc) CPUs)"
echo "round  copy: binky  cp -a   ratio | remove: binky  git worktree remove  ratio"
for r in $(seq 1 "$rounds"); do
    drop
    out=$("$bin" up w 2>&1)
    copy_binky=$(printf '%s\n' "$out" | python3 -c '
import re, sys
m = re.search(r"copied node_modules .* in ([0-9.]+) (ms|s)", sys.stdin.read())
print(int(float(m.group(1)) * (1 if m.group(2) == "ms" else 1000)) if m else -1)')
    drop
    git worktree add -q "$work/hand" -b hand
    t0=$(ms); cp -a node_modules "$work/hand/"; t1=$(ms)
    copy_hand=$((t1 - t0))
    drop
    t0=$(ms); "$bin" remove w >/dev/null 2>&1; t1=$(ms)
    rm_binky=$((t1 - t0))
    t0=$(ms); git worktree remove --force "$work/hand"; t1=$(ms)
    git branch -q -D hand
    rm_hand=$((t1 - t0))
    python3 -c "print(f'{$r:5}  {$copy_binky:8} ms {$copy_hand:6} ms {$copy_hand/max($copy_binky,1):5.2f}x | {$rm_binky:9} ms {$rm_hand:16} ms {$rm_hand/max($rm_binky,1):6.1f}x')"
    # The background deletion ends before the next round starts.
    while [ -n "$(ls -A "$BINKY_HOME/trash" 2>/dev/null)" ]; do sleep 0.2; done
done
