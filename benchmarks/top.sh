#!/usr/bin/env bash
# `binky top` with WORLDS worlds up, in a tmux pane of 160x50 with TERM=xterm-256color (what
# an ssh session gives it), in one run:
#   idle: the CPU binky top uses and the bytes it writes to the terminal, nothing pressed;
#   log:  the same with its log pane following a service that prints 100 lines a second;
#   for reference, one `binky status` run (what a `watch -n1 binky status` pays a second).
#
#   ./benchmarks/top.sh [WORLDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
worlds="${1:-40}"
secs="${2:-60}"
command -v tmux >/dev/null || { echo "needs tmux (apt-get install tmux)" >&2; exit 1; }
cargo build --release -q
bin="$PWD/target/release/binky"
work="$(mktemp -d)"
sock="binky-top-bench-$$"
export BINKY_HOME="$work/home"
cleanup() {
    tmux -L "$sock" kill-server 2>/dev/null || true
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$sock"
    # The worlds go before the daemon: a stopped daemon leaves services running.
    if [ -d "$work/repo" ]; then
        (cd "$work/repo" && for w in $(seq -f 'w%02g' 1 "$worlds"); do
            "$bin" remove "$w" --force --no-wait >/dev/null 2>&1 || true
        done)
        for _ in $(seq 600); do
            "$bin" status --json 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if not json.load(sys.stdin)["worlds"] else 1)' && break
            sleep 0.2
        done
    fi
    "$bin" daemon stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/repo" && cd "$work/repo"
git init -q -b main
# Every world: a sleeping job, and `chatty`, which prints 100 lines a second in w01 only.
cat > binky.toml <<'TOML'
[project]
name = "topbench"
port_range = [47200, 47299]

[services.job]
cmd = "exec sleep 100000"

[services.chatty]
cmd = "exec python3 -u -c 'import os, time\nfast = os.environ[\"BINKY_WORKTREE\"] == \"w01\"\ni = 0\nwhile True:\n    i += 1\n    print(\"line\", i, flush=True)\n    time.sleep(0.01 if fast else 3600)'"
TOML
git add -A && git -c user.name=b -c user.email=b@b commit -qm init
"$bin" port --proxy 47290 --https 0 >/dev/null
names="$(seq -f 'w%02g' 1 "$worlds")"
for w in $names; do "$bin" up "$w" -q --no-wait >/dev/null; done
echo "waiting for $worlds worlds to be ready" >&2
for _ in $(seq 600); do
    if "$bin" status --json | python3 -c '
import json, sys
w = json.load(sys.stdin)["worlds"]
sys.exit(0 if w and all(x["state"] == "ready" for x in w) else 1)'; then break; fi
    sleep 0.5
done
"$bin" status --json | python3 -c '
import collections, json, sys
print("worlds:", dict(collections.Counter(x["state"] for x in json.load(sys.stdin)["worlds"])))' >&2

tmux -L "$sock" -f /dev/null new-session -d -x 160 -y 50 -e BINKY_HOME="$BINKY_HOME" \
    "exec env TERM=xterm-256color LANG=C.UTF-8 $bin top"
tmux -L "$sock" pipe-pane -o "cat >> $work/terminal"
pid="$(tmux -L "$sock" display -p '#{pane_pid}')"
until tmux -L "$sock" capture-pane -p | grep -q "$worlds worlds"; do sleep 0.2; done
hz="$(getconf CLK_TCK)"
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
bytes() { stat -c %s "$work/terminal" 2>/dev/null || echo 0; }
measure() { # label
    sleep 5 # settle after the keys
    local t0 b0 t1 b1
    t0="$(ticks)"; b0="$(bytes)"
    sleep "$secs"
    t1="$(ticks)"; b1="$(bytes)"
    python3 -c "
t, b, s, hz = $((t1 - t0)), $((b1 - b0)), $secs, $hz
print(f'| $1 | {100 * t / hz / s:.2f} % of a core | {b / s:,.0f} B/s |')"
}
echo "| binky top, $worlds worlds, ${secs} s | CPU | written to the terminal |"
echo "| --- | ---: | ---: |"
measure "idle"
tmux -L "$sock" send-keys g j Enter
for i in $(seq 150); do
    tmux -L "$sock" capture-pane -p | grep -q "chatty of topbench/w01" && break
    [ "$i" = 150 ] && { echo "the log pane did not open; the screen:" >&2; tmux -L "$sock" capture-pane -p >&2; exit 1; }
    sleep 0.2
done
measure "log pane on a service printing 100 lines/s"
rss="$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")"
echo "binky top's resident memory: $((rss / 1024)) MiB"
start="$(date +%s%N)"
for _ in 1 2 3 4 5 6 7 8 9 10; do "$bin" status >/dev/null; done
echo "one \`binky status\` ($worlds worlds), mean of 10: $(( ($(date +%s%N) - start) / 10000000 )) ms"
