#!/usr/bin/env bash
# What a world's bring-in costs — time and disk — on ext4 (files hard-linked) and on XFS
# with reflink (files cloned), for a real dependency tree: a `node_modules` from a real
# `npm install` of common packages (vite, react, typescript, eslint, babel, jest, MUI with
# its icons, lodash: 55,000 files), its
# untracked `package-lock.json` named in `copy`, and a real `.venv` with Django, Django REST
# framework and Celery, against `cp -a` of the same three paths into a `git worktree add`
# checkout (a person doing it by hand). And what the look for linked files written in
# place costs the daemon (its debug log line), and `binky status` with every world up.
#
#   sudo ./benchmarks/bring_in.sh [ROUNDS]      (root: the XFS image is loop-mounted)
#
# Per filesystem and round: `binky up wN` (wall, until it returns: every path brought),
# binky's progress line for each path (how it came, how long), df's used blocks before and
# after (synced), then `binky down wN` (the worktree controller looks at wN's linked files:
# the look's time from the daemon's log); the same three paths `cp -a`'d into a checkout
# (time, disk). The worlds stay up, so the last round's look compares with every other
# world; `binky status` is timed with them all. Page cache dropped before each timing.
#
# The dependency trees are installed once from the registries into BRING_IN_CACHE (default
# ~/.cache/binky-bench/bring-in) and copied from there. Results go to OUT (default
# benchmarks/bring-in-results.json) with the machine, its load and the commit measured.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
rounds="${1:-3}"
OUT="${OUT:-$root/benchmarks/bring-in-results.json}"
cache="${BRING_IN_CACHE:-$HOME/.cache/binky-bench/bring-in}"
. "$root/benchmarks/lib.sh"
commit="$(bench_commit)"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
cargo build --release -q
bin="$PWD/target/release/binky"

# ---------------------------------------------------------------- the dependency trees, once
if [ ! -d "$cache/js/node_modules" ]; then
    echo "installing the JavaScript tree into $cache/js (npm, once)" >&2
    mkdir -p "$cache/js"
    (cd "$cache/js" && printf '{"name": "app", "version": "0.0.0", "private": true}\n' >package.json &&
        npm install --silent --no-audit --no-fund vite@6 react@19 react-dom@19 typescript@5 \
            eslint@9 @babel/core@7 jest@29 &&
        npm install --silent --no-audit --no-fund @mui/material@7 @mui/icons-material@7 \
            @emotion/react@11 @emotion/styled@11 lodash@4)
fi
if [ ! -x "$cache/py/.venv/bin/django-admin" ]; then
    echo "installing the Python tree into $cache/py/.venv (pip, once)" >&2
    rm -rf "$cache/py" && mkdir -p "$cache/py"
    python3 -m venv "$cache/py/.venv"
    "$cache/py/.venv/bin/pip" install -q "Django==5.2.*" djangorestframework celery
fi

work="$(mktemp -d /var/tmp/bring-in.XXXXXX)"
res="$work/results.tsv"
: >"$res"
mounted=""
cleanup() {
    for home in "$work"/*/home; do
        [ -d "$home" ] && BINKY_HOME="$home" "$bin" daemon stop >/dev/null 2>&1 || true
    done
    if [ -n "$mounted" ]; then umount "$mounted" 2>/dev/null || umount -l "$mounted" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
# record FS ROUND METRIC VALUE
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$res"; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
ms() { python3 -c "import time; print(int(time.monotonic() * 1000))"; }

tree_files=$(find "$cache/js/node_modules" "$cache/py/.venv" -type f | wc -l)
tree_mb=$(du -smc "$cache/js/node_modules" "$cache/py/.venv" | tail -1 | cut -f1)
echo "tree: $tree_files files, $tree_mb MB (node_modules + .venv); $(nproc) CPUs; load $load_before"

# bench FS DIR: the rounds on the filesystem DIR is on.
bench() {
    local fs="$1" dir="$2"
    local repo="$dir/repo" home="$dir/home"
    export BINKY_HOME="$home"
    used_kb() { sync; df -k --output=used "$dir" | tail -1 | tr -d ' '; }
    # MB under TOP's three paths that the main checkout's paths do not hold.
    own_mb() {
        local top="$1"
        du -sk "$repo/node_modules" "$repo/package-lock.json" "$repo/backend/.venv" \
            "$top/node_modules" "$top/package-lock.json" "$top/backend/.venv" |
            tail -3 | awk '{s += $1} END {print int(s / 1024)}'
    }
    # The last look at WORLD's linked files (ms, whole), from the daemon's log; -1: none
    # (nothing linked to look at: cloned or copied).
    look_ms() {
        python3 - "$home/daemon.log" "$1" <<'PY'
import re, sys
ms = -1
for line in open(sys.argv[1], errors="replace"):
    if "looked at the linked files" in line and f"world={sys.argv[2]} " in line:
        m = re.search(r" ms=([0-9.]+)", line)
        ms = round(float(m.group(1))) if m else ms
print(ms)
PY
    }
    mkdir -p "$repo" && cd "$repo"
    git init -q -b main
    printf 'node_modules/\n.venv/\n' >.gitignore
    cat >binky.toml <<'TOML'
[project]
name = "bringin"
port_range = [47200, 47300]
copy = ["node_modules", "package-lock.json", "backend/.venv"]

[services.web]
cmd = "exec python3 -m http.server ${self.port}"
url = true
TOML
    git add -A && git -c user.name=b -c user.email=b@b commit -qm init
    cp -a "$cache/js/node_modules" "$cache/js/package-lock.json" .
    mkdir -p backend && cp -a "$cache/py/.venv" backend/
    BINKY_LOG="info,binky_controllers::worktree=debug" "$bin" daemon start >/dev/null 2>&1 || true
    echo "== $fs: round  up (wall)  node_modules  .venv  lockfile | cp -a | disk (df, du): binky  cp -a | look"
    for r in $(seq 1 "$rounds"); do
        drop
        local before after t0 t1
        before=$(used_kb)
        t0=$(ms)
        local out
        out=$("$bin" up "w$r" 2>&1) || { printf '%s\n' "$out" >&2; exit 1; }
        t1=$(ms)
        after=$(used_kb)
        record "$fs" "$r" up_wall_ms $((t1 - t0))
        record "$fs" "$r" disk_binky_mb $(( (after - before) / 1024 ))
        # The blocks of the world's paths the main checkout's do not already hold (du counts
        # an inode once, for the first path it meets it under): what links leave the world,
        # whatever else writes to the filesystem meanwhile. It cannot see clones' shared
        # blocks (df can).
        record "$fs" "$r" du_binky_mb "$(own_mb "$dir/repo.worktrees/w$r")"
        local parsed
        parsed=$(printf '%s\n' "$out" | python3 -c '
import re, sys
text = sys.stdin.read()
for path in ["node_modules", ".venv", "package-lock.json"]:
    m = re.search(r"(cloned|linked|copied|brought) (\S*" + re.escape(path) + r") \((\d+) files?, [^)]*\) from .* in ([0-9.]+) (ms|s)", text)
    if m:
        took = float(m.group(4)) * (1 if m.group(5) == "ms" else 1000)
        print(path, m.group(1), int(took))
    else:
        print(path, "none", -1)')
        local summary=""
        while read -r path how took; do
            record "$fs" "$r" "bring_${path#.}_ms" "$took"
            record "$fs" "$r" "how_${path#.}" "$how"
            summary="$summary $how ${took}ms"
        done <<<"$parsed"
        # The look at the world's linked files, at its `down`, the page cache dropped (the
        # look's worst case: every inode read from disk).
        drop
        "$bin" down "w$r" >/dev/null 2>&1
        local look
        look=$(look_ms "w$r")
        record "$fs" "$r" look_ms "${look:--1}"
        # By hand: the same paths into a checkout of its own.
        drop
        git worktree add -q "$dir/hand" -b hand
        before=$(used_kb)
        t0=$(ms)
        cp -a node_modules package-lock.json "$dir/hand/"
        mkdir -p "$dir/hand/backend" && cp -a backend/.venv "$dir/hand/backend/"
        t1=$(ms)
        after=$(used_kb)
        record "$fs" "$r" cp_a_ms $((t1 - t0))
        record "$fs" "$r" disk_cp_a_mb $(( (after - before) / 1024 ))
        record "$fs" "$r" du_cp_a_mb "$(own_mb "$dir/hand")"
        git worktree remove --force "$dir/hand" && git branch -q -D hand
        python3 - "$res" "$fs" "$r" "$summary" <<'PY'
import sys
tsv, fs, r, summary = sys.argv[1:5]
row = {}
for line in open(tsv):
    f, rr, k, v = line.rstrip("\n").split("\t")
    if f == fs and rr == r:
        row[k] = v
print(f"   {r:>5}  {row['up_wall_ms']:>6} ms {summary} | {row['cp_a_ms']:>6} ms | df {row['disk_binky_mb']:>5} MB {row['disk_cp_a_mb']:>5} MB  du {row['du_binky_mb']:>5} MB {row['du_cp_a_mb']:>5} MB | {row['look_ms']} ms")
PY
    done
    # Every world up again (each has the whole tree, linked or cloned), then status.
    for r in $(seq 1 "$rounds"); do "$bin" up "w$r" >/dev/null 2>&1; done
    local t0 t1
    drop
    t0=$(ms); "$bin" status >/dev/null; t1=$(ms)
    record "$fs" 0 status_ms $((t1 - t0))
    # The last world's look, with every other world a checkout to compare with (a `down`),
    # the inodes in the page cache (what a resync finds on a machine in use).
    "$bin" down "w$rounds" >/dev/null 2>&1
    local look
    look=$(look_ms "w$rounds")
    record "$fs" 0 look_all_up_ms "${look:--1}"
    echo "   status with $rounds worlds up: $((t1 - t0)) ms; a look with them all: ${look:-?} ms"
    for r in $(seq 1 "$rounds"); do "$bin" remove --force "w$r" >/dev/null 2>&1; done
    "$bin" daemon stop >/dev/null 2>&1 || true
    cd "$root"
}

# ext4: a directory of the machine's own filesystem.
mkdir -p "$work/ext4"
ext4_fs=$(df -T "$work/ext4" | awk 'NR==2 {print $2}')
bench "$ext4_fs" "$work/ext4"

# XFS with reflink: a sparse image, loop-mounted (root only).
if [ "$(id -u)" -eq 0 ] && command -v mkfs.xfs >/dev/null 2>&1; then
    # Sparse, and large enough that its free space stays above binky's disk reserve (5 GiB).
    truncate -s 16G "$work/xfs.img"
    mkfs.xfs -q -m reflink=1 "$work/xfs.img"
    mkdir -p "$work/xfs"
    mount -o loop "$work/xfs.img" "$work/xfs"
    mounted="$work/xfs"
    bench xfs-reflink "$work/xfs"
else
    echo "XFS skipped: needs root and xfsprogs" >&2
fi

load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
# ---------------------------------------------------------------- JSON
python3 - "$res" "$OUT" "$commit" "$tree_files" "$tree_mb" "$load_before" "$load_after" <<'PY'
import json, os, statistics, sys
tsv, out, commit, files, mb, load_before, load_after = sys.argv[1:8]
by_fs = {}
for line in open(tsv):
    fs, r, metric, value = line.rstrip("\n").split("\t")
    try:
        value = float(value) if "." in value else int(value)
    except ValueError:
        pass
    by_fs.setdefault(fs, {}).setdefault(int(r), {"round": int(r)})[metric] = value
result = {}
for fs, rounds in by_fs.items():
    rows = [rounds[r] for r in sorted(rounds) if r > 0]
    numeric = sorted({k for row in rows for k, v in row.items() if k != "round" and isinstance(v, (int, float))})
    result[fs] = {
        "rounds": rows,
        "median": {k: statistics.median(row[k] for row in rows if k in row) for k in numeric},
        "all_up": rounds.get(0, {}),
    }
json.dump({
    "commit": commit,
    "machine": {"nproc": os.cpu_count(), "load_before": load_before, "load_after": load_after},
    "tree": {"files": int(files), "mb": int(mb), "what": "node_modules of vite, react, react-dom, typescript, eslint, @babel/core, jest, @mui/material, @mui/icons-material, @emotion, lodash (npm install), package-lock.json, and a .venv with Django 5.2, djangorestframework, celery (pip)"},
    "filesystems": result,
    "notes": {
        "up_wall_ms": "wall of `binky up wN` (returns once every path is brought); the daemon already running",
        "bring_*_ms": "binky's progress line for the path: the bring-in alone",
        "how_*": "how the path came: cloned, linked, copied, or brought (mixed)",
        "disk_binky_mb": "df used blocks after less before `binky up` (synced)",
        "cp_a_ms": "cp -a of the same three paths into a `git worktree add` checkout",
        "disk_cp_a_mb": "df used blocks after less before the cp -a (synced)",
        "du_binky_mb": "du of the world's three paths, counted after the main checkout's (an inode once): the blocks links leave the world's own; counts cloned blocks whole",
        "du_cp_a_mb": "the same for the cp -a checkout",
        "look_ms": "the worktree controller's look at the world's linked files for writes in place, at its `down`, page cache dropped first (daemon debug log); -1: nothing linked to look at",
        "look_all_up_ms": "the same for the last world with every world up, inodes cached",
        "status_ms": "wall of `binky status` with every world up",
    },
}, open(out, "w"), indent=2, sort_keys=True)
print(f"results: {out}")
PY
