#!/usr/bin/env bash
# `binky remove` of a world with a PostgreSQL slice and a service that takes 1 s to exit,
# against the same removal done by hand, in one run on one private PostgreSQL:
#   binky:   `binky remove W` (the command's wall time; the world's events say each step's)
#   by hand: what a person types for the same world: SIGTERM to the service's process group
#            and wait for it, DROP DATABASE and DROP ROLE in psql, `git worktree remove`,
#            `git branch -D`.
# The service (`app`) ignores nothing: on SIGTERM it sleeps 1 s, then exits. binky's own
# part of a removal is its wall time less that second; by hand the same.
#
#   ./benchmarks/remove.sh [ROUNDS]      (10; BINKY=path/to/binky, else target/release/binky)
#
# Results: printed, and in benchmarks/remove-results.json (OUT=… to write elsewhere).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-10}"
. "$root/benchmarks/lib.sh"
BINKY="$(bench_binky)"
OUT="${OUT:-$root/benchmarks/remove-results.json}"
load_at_start="$(bench_load)"
PGBIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
PG_PORT="${PG_PORT:-45380}"
work="$(mktemp -d /tmp/binky-remove.XXXXXX)"
chmod 755 "$work" # the private PostgreSQL runs as `postgres` and needs to traverse it
export BINKY_HOME="$work/home"
res="$work/results.tsv"
: >"$res"
ms() { python3 -c "import time; print(int(time.monotonic() * 1000))"; }
cleanup() {
    set +e
    for r in $(seq 1 "$rounds"); do
        (cd "$work/binky" 2>/dev/null && "$BINKY" remove "w$r" --force -q >/dev/null 2>&1)
        [ -f "$work/hand-pid-$r" ] && kill -KILL -- "-$(cat "$work/hand-pid-$r")" 2>/dev/null
    done
    "$BINKY" daemon stop >/dev/null 2>&1
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# One PostgreSQL for both arms, with passwords (SCRAM) as a team's server or binky's managed
# one has them: a connection costs its key derivation.
install -d -o postgres -g postgres "$work/pg" "$work/pgsock"
echo "bench-admin-pw" >"$work/pgsock/pw" && chown postgres "$work/pgsock/pw"
runuser -u postgres -- "$PGBIN/initdb" -D "$work/pg" -A scram-sha-256 --pwfile="$work/pgsock/pw" -U postgres >/dev/null
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$work/pg" -l "$work/pgsock/pg.log" -w start \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k $work/pgsock -c fsync=off" >/dev/null
export PG_ADMIN="postgres://postgres:bench-admin-pw@127.0.0.1:$PG_PORT/postgres"
psql_() { psql -q -v ON_ERROR_STOP=1 "$PG_ADMIN" "$@"; }

# The service: up until SIGTERM, then a second of work before it exits.
app='import signal, sys, time
def term(n, f):
    time.sleep(1)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
while True:
    time.sleep(3600)'

make_repo() { # DIR
    mkdir -p "$1" && cd "$1"
    git init -q -b main
    printf '%s\n' "$app" >app.py
    cat >binky.toml <<'TOML'
[project]
name = "rmbench"

[services.db]
adapter = "postgres"
admin_url = "${env.PG_ADMIN}"

[services.app]
cmd = "exec python3 app.py"
depends_on = ["db"]
env = { DATABASE_URL = "${db.url}" }
TOML
    git add -A && git -c user.name=b -c user.email=b@b commit -qm init
}
make_repo "$work/binky"
make_repo "$work/hand"

echo "machine: $(nproc) CPUs, load $load_at_start; $BINKY"
printf '%5s %10s %10s   (remove, ms)\n' round binky "by hand"
for r in $(seq 1 "$rounds"); do
    # binky: the world up, its service ready, then removed.
    cd "$work/binky"
    "$BINKY" up "w$r" -q >/dev/null
    until "$BINKY" logs "w$r" app -n 5 2>/dev/null | grep -q '^ready'; do sleep 0.02; done
    t0=$(ms)
    "$BINKY" remove "w$r" -q >/dev/null
    t_binky=$(($(ms) - t0))
    "$BINKY" events "w$r" -n 20 >"$work/events-w$r.txt" 2>/dev/null || true

    # By hand: the same world made the way a person would, then removed the same way.
    cd "$work/hand"
    wt="$work/hand.worktrees/h$r" role="h$r"
    git worktree add -q "$wt" -b "h$r"
    psql_ -c "CREATE ROLE $role LOGIN PASSWORD 'pw'" -c "CREATE DATABASE $role OWNER $role"
    (cd "$wt" && DATABASE_URL="postgres://$role:pw@127.0.0.1:$PG_PORT/$role" exec setsid python3 app.py >"$work/hand-$r.log" 2>&1) &
    echo $! >"$work/hand-pid-$r"
    until grep -q '^ready' "$work/hand-$r.log" 2>/dev/null; do sleep 0.02; done
    pid=$(cat "$work/hand-pid-$r")
    t0=$(ms)
    kill -TERM -- "-$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
    psql_ -c "DROP DATABASE $role WITH (FORCE)" -c "DROP ROLE $role"
    git worktree remove "$wt"
    git branch -q -D "h$r"
    t_hand=$(($(ms) - t0))
    rm -f "$work/hand-pid-$r"

    printf '%5d %10d %10d\n' "$r" "$t_binky" "$t_hand"
    printf 'binky\t%s\nhand\t%s\n' "$t_binky" "$t_hand" >>"$res"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
sed -n 's/^/    w1 events | /p' "$work/events-w1.txt" | tail -8

python3 - "$res" "$OUT" "$(bench_run_json "$load_at_start")" "$("$BINKY" --version)" <<'PY'
import json, statistics, sys
res, out, run, version = sys.argv[1:]
runs = {}
for line in open(res):
    arm, v = line.split()
    runs.setdefault(arm, []).append(int(v))
summary = {}
for arm, v in runs.items():
    med = statistics.median(v)
    summary[arm] = {"median_ms": med, "min_ms": min(v), "max_ms": max(v), "runs": v,
                    "own_part_median_ms": med - 1000}
    print(f"{arm:8} median {med / 1000:.2f} s (own part {(med - 1000) / 1000:.2f} s)  min {min(v) / 1000:.2f}  max {max(v) / 1000:.2f}  ({len(v)} runs)")
ratio = summary["binky"]["median_ms"] / summary["hand"]["median_ms"]
print(f"binky / by hand: {ratio:.2f}")
json.dump({"what": "remove of a world with a PostgreSQL slice and a service that takes 1 s to exit",
           "run": json.loads(run), "binky": version,
           "arms": summary, "ratio_binky_to_hand": round(ratio, 3)},
          open(out, "w"), indent=2)
print(f"JSON: {out}")
PY
