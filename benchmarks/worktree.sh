#!/usr/bin/env bash
# A world's worktree with a dependency directory of 30,000 files (~400 MB, in ~3,000
# package directories, the shape of a real node_modules), against what a person does by
# hand, in one run:
#   bring:  `binky up` brings node_modules from the main checkout into the new worktree
#           ([project] copy; linked on ext4, cloned where the filesystem clones), timed two
#           ways: the wall time of the whole `binky up` until node_modules is in place in
#           the worktree (what a person waits for: the daemon's work, the checkout, the
#           world's start) and binky's own progress line (the copy alone)  vs  `cp -a` of
#           the same directory into a `git worktree add` checkout;
#   disk:   what the new world adds to the filesystem (df's used blocks before and after)
#           vs what the `cp -a` checkout adds;
#   remove: `binky remove` of the world  vs  `git worktree remove --force` of that checkout.
# Each round makes both afresh (page cache dropped when possible). With BUSY=N, N busy
# loops run on the machine the whole time (the issue's "two busy-looping processes").
# The daemon is started before the first round, so no round pays for its start.
#
#   ./benchmarks/worktree.sh [ROUNDS] [FILES] [MB]
#   BUSY=2 ./benchmarks/worktree.sh
#
# Every round, and the medians, go to OUT (default benchmarks/worktree-results.json; with
# BUSY, /tmp/worktree-results-busy.json: a stress run, not the benchmark's result) with the machine and the commit measured.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
rounds="${1:-5}"
files="${2:-30000}"
mb="${3:-400}"
busy="${BUSY:-0}"
if [ "$busy" -gt 0 ]; then
    OUT="${OUT:-/tmp/worktree-results-busy.json}"
else
    OUT="${OUT:-$root/benchmarks/worktree-results.json}"
fi
. "$root/benchmarks/lib.sh"
commit="$(bench_commit)"
cargo build --release -q
bin="$PWD/target/release/binky"
work="$(mktemp -d)"
res="$work/results.tsv"
export BINKY_HOME="$work/home"
busy_pids=()
cleanup() {
    for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    "$bin" daemon stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
: >"$res"
# record ROUND METRIC VALUE
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$res"; }
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
"$bin" daemon start >/dev/null 2>&1 || true
# The worktree binky makes for world `w`, and the last file of node_modules to look for.
wt="${BINKY_WORKTREE_ROOT:+$BINKY_WORKTREE_ROOT/wtbench/w}"
wt="${wt:-$work/repo.worktrees/w}"
last="node_modules/pkg$(( (files - 1) / 100 ))/lib/m$(( ((files - 1) / 10) % 10 ))/f$((files - 1)).js"
echo "round  up (wall)  bring: binky   cp -a   ratio | disk: binky  cp -a | remove: binky  git worktree remove  ratio"
for r in $(seq 1 "$rounds"); do
    drop
    before=$(used_kb)
    # The wall time of the whole `binky up`, until node_modules is in place in the worktree
    # (`up` returns once every path is brought: the wait after it is a check, ~0 ms).
    t0=$(ms)
    out=$("$bin" up w 2>&1)
    until [ -e "$wt/$last" ] && [ -e "$wt/node_modules/.package-lock.json" ]; do
        [ $(( $(ms) - t0 )) -lt 600000 ] || { echo "node_modules never came into $wt" >&2; exit 1; }
        sleep 0.01
    done
    t1=$(ms)
    up_wall=$((t1 - t0))
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
    python3 -c "print(f'{$r:5}  {$up_wall:6} ms {$copy_binky:8} ms {$copy_hand:6} ms {$copy_hand/max($copy_binky,1):6.1f}x | {$disk_binky:6} MB {$disk_hand:5} MB | {$rm_binky:9} ms {$rm_hand:16} ms {$rm_hand/max($rm_binky,1):6.1f}x  ($how)')"
    record "$r" up_wall_ms "$up_wall"
    record "$r" bring_binky_ms "$copy_binky"
    record "$r" bring_cp_a_ms "$copy_hand"
    record "$r" disk_binky_mb "$disk_binky"
    record "$r" disk_cp_a_mb "$disk_hand"
    record "$r" remove_binky_ms "$rm_binky"
    record "$r" remove_git_ms "$rm_hand"
    record "$r" how "${how:-none}"
    # The background deletion ends before the next round starts.
    while [ -n "$(ls -A "$BINKY_HOME/trash" 2>/dev/null)" ]; do sleep 0.2; done
done

# ---------------------------------------------------------------- JSON
python3 - "$res" "$OUT" "$commit" "$files" "$dirs" "$size" "$fs" "$busy" <<'PY'
import json, os, statistics, sys
tsv, out, commit, files, dirs, size, fs, busy = sys.argv[1:9]
rounds = {}
for line in open(tsv):
    r, metric, value = line.rstrip("\n").split("\t")
    try:
        value = int(value)
    except ValueError:
        pass
    rounds.setdefault(int(r), {"round": int(r)})[metric] = value
rows = [rounds[r] for r in sorted(rounds)]
numeric = sorted({k for row in rows for k, v in row.items() if k != "round" and isinstance(v, int)})
json.dump({
    "commit": commit,
    "machine": {"nproc": os.cpu_count(), "fs": fs, "busy_loops": int(busy)},
    "tree": {"files": int(files), "dirs": int(dirs), "mb": int(size)},
    "rounds": rows,
    "median": {k: statistics.median(row[k] for row in rows if k in row) for k in numeric},
    "notes": {
        "up_wall_ms": "wall time of the whole `binky up w` until node_modules (its last file and .package-lock.json) is in the worktree; the daemon already running",
        "bring_binky_ms": "binky's own progress line for node_modules: the copy alone",
        "bring_cp_a_ms": "cp -a node_modules into a git worktree add checkout",
        "disk_binky_mb": "df used blocks after less before binky up (synced)",
        "disk_cp_a_mb": "df used blocks after less before cp -a (synced)",
        "remove_binky_ms": "wall of binky remove w",
        "remove_git_ms": "wall of git worktree remove --force of the cp -a checkout",
        "how": "how binky's progress line says node_modules came (linked, cloned, copied, brought)",
    },
}, open(out, "w"), indent=2, sort_keys=True)
print(f"results: {out}")
PY