#!/usr/bin/env bash
# A world's worktree with a dependency directory of 30,000 files (~400 MB, in ~3,000
# package directories, the shape of a real node_modules), against what a person does by
# hand, in one run:
#   bring:  `binky up` brings node_modules from the main checkout into the new worktree
#           ([project] copy; linked on ext4, cloned where the filesystem clones), timed by
#           binky's own progress line  vs  `cp -a` of the same directory into a
#           `git worktree add` checkout;
#   disk:   what the new world adds to the filesystem (df's used blocks before and after)
#           vs what the `cp -a` checkout adds;
#   remove: `binky remove` of the world  vs  `git worktree remove --force` of that checkout.
# Each round makes both afresh (page cache dropped when possible). With BUSY=N, N busy
# loops run on the machine the whole time (the issue's "two busy-looping processes").
#
#   ./benchmarks/worktree.sh [ROUNDS] [FILES] [MB]
#   BUSY=2 ./benchmarks/worktree.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
files="${2:-30000}"
mb="${3:-400}"
busy="${BUSY:-0}"
cargo build --release -q
bin="$PWD/target/release/binky"
work="$(mktemp -d)"
export BINKY_HOME="$work/home"
busy_pids=()
cleanup() {
    for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    "$bin" daemon stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
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
python3 - "$files" "$mb" <<'PY'
import os, sys
n, mb = int(sys.argv[1]), int(sys.argv[2])
size = mb * 1_000_000 // n
data = os.urandom(size)
for i in range(n):
    # ten files a directory, three levels: pkgN/lib/… as packages are laid out
    d = os.path.join("node_modules", f"pkg{i // 100}", "lib", f"m{(i // 10) % 10}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.js"), "wb") as f:
        f.write(data)
open(os.path.join("node_modules", ".package-lock.json"), "w").write("{}\n")
PY
size=$(du -sm node_modules | cut -f1)
dirs=$(find node_modules -type d | wc -l)
fs=$(df -T . | awk 'NR==2 {print $2}')
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
ms() { python3 -c "import time; print(int(time.monotonic() * 1000))"; }
used_kb() { sync; df -k --output=used . | tail -1 | tr -d ' '; }
for _ in $(seq 1 "$busy"); do (while :; do :; done) & busy_pids+=($!); done
echo "node_modules: $files files in $dirs directories, $size MB, on $fs ($(nproc) CPUs, $busy busy loops)"
echo "round  bring: binky   cp -a   ratio | disk: binky  cp -a | remove: binky  git worktree remove  ratio"
for r in $(seq 1 "$rounds"); do
    drop
    before=$(used_kb)
    out=$("$bin" up w 2>&1)
    after=$(used_kb)
    disk_binky=$(( (after - before) / 1024 ))
    copy_binky=$(printf '%s\n' "$out" | python3 -c '
import re, sys
m = re.search(r"(?:linked|cloned|copied|brought) node_modules .* in ([0-9.]+) (ms|s)", sys.stdin.read())
print(int(float(m.group(1)) * (1 if m.group(2) == "ms" else 1000)) if m else -1)')
    how=$(printf '%s\n' "$out" | grep -oE '(linked|cloned|copied|brought) node_modules' | cut -d' ' -f1 || true)
    drop
    git worktree add -q "$work/hand" -b hand
    before=$(used_kb)
    t0=$(ms); cp -a node_modules "$work/hand/"; t1=$(ms)
    after=$(used_kb)
    disk_hand=$(( (after - before) / 1024 ))
    copy_hand=$((t1 - t0))
    drop
    t0=$(ms); "$bin" remove w >/dev/null 2>&1; t1=$(ms)
    rm_binky=$((t1 - t0))
    t0=$(ms); git worktree remove --force "$work/hand"; t1=$(ms)
    git branch -q -D hand
    rm_hand=$((t1 - t0))
    python3 -c "print(f'{$r:5}  {$copy_binky:8} ms {$copy_hand:6} ms {$copy_hand/max($copy_binky,1):6.1f}x | {$disk_binky:6} MB {$disk_hand:5} MB | {$rm_binky:9} ms {$rm_hand:16} ms {$rm_hand/max($rm_binky,1):6.1f}x  ($how)')"
    # The background deletion ends before the next round starts.
    while [ -n "$(ls -A "$BINKY_HOME/trash" 2>/dev/null)" ]; do sleep 0.2; done
done
