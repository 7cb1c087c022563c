#!/usr/bin/env bash
# examples/fullstack (Django + PostgreSQL + Redis API, Vite + React front end), world after
# world, three ways in one run, each on a fresh temp git repository holding a copy of the
# example:
#
#   binky        worlds w1..wN with `binky up`; `remove`; disk and RAM per world; `up` of a
#                stopped world against the processes' own start
#   by hand      the same worlds made by hand: git worktree add, npm ci, venv + pip install,
#                CREATE DATABASE, migrate, loaddata, gunicorn and vite, on a PostgreSQL and a
#                Redis this script starts itself
#   binky 0.1.2  the Python predecessor, on the same binky.toml less the keys it refuses,
#                against that same PostgreSQL and Redis (it runs no server itself)
#
# A world is "ready" when its page and its API answer: binky's and 0.1.2's through their
# proxy (Host: web.<world>.fullstack.localhost, `/` and `/api/notes/`), by hand through vite.
#
#   ./benchmarks/fullstack.sh                 # 10 worlds per arm, about 15 minutes
#   WORLDS=3 ARMS="binky" ./benchmarks/fullstack.sh
#
# Environment: BINKY (default target/release/binky; this script does not build it),
# BINKY012 (a binky 0.1.2 entry point; default: installed into ~/.cache/binky-bench/venv012),
# WORLDS (10, binky), OTHER_WORLDS (3, by hand and 0.1.2), ROUNDS (3, for the stopped-world `up`), ARMS ("binky hand binky012"),
# PROXY_PORT/HTTPS_PORT (45290/45291; 0.1.2 gets +2/+3), OUT (benchmarks/fullstack-results.json).
# Ports 45000-45289 are used: binky 45000-45099, 0.1.2 45100-45199, by hand 45200-45280.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/benchmarks/lib.sh"
BINKY="$(bench_binky)"
load_at_start="$(bench_load)"
WORLDS="${WORLDS:-10}"
OTHER_WORLDS="${OTHER_WORLDS:-3}" # by hand and binky 0.1.2: each world costs them ~50 s
ROUNDS="${ROUNDS:-3}"
ARMS="${ARMS:-binky hand binky012}"
PROXY_PORT="${PROXY_PORT:-45290}"
HTTPS_PORT="${HTTPS_PORT:-45291}"
PROXY012="$((PROXY_PORT + 2))"
HTTPS012="$((PROXY_PORT + 3))"
OUT="${OUT:-$root/benchmarks/fullstack-results.json}"

work="$(mktemp -d /tmp/binky-fullstack.XXXXXX)"
B_HOME="$work/binky-home"
R_HOME="$work/binky012-home"
BINKY012="${BINKY012:-${XDG_CACHE_HOME:-$HOME/.cache}/binky-bench/venv012/bin/binky}"
chmod 755 "$work" # the private PostgreSQL runs as the `postgres` user and needs to traverse it
res="$work/results.tsv"
: >"$res"
log() { printf '[%6.1fs] %s\n' "$(bc <<<"$EPOCHREALTIME - $t_start")" "$*" >&2; }
t_start=$EPOCHREALTIME
# record ARM METRIC VALUE [NOTE]
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$res"; }
elapsed() { bc <<<"scale=3; ($EPOCHREALTIME - $1)/1"; }

cleanup() {
    set +e
    if [ -d "$B_HOME" ]; then
        for w in $(seq 1 "$WORLDS"); do BINKY_HOME="$B_HOME" "$BINKY" remove "w$w" --force -q >/dev/null 2>&1; done
        BINKY_HOME="$B_HOME" "$BINKY" servers stop >/dev/null 2>&1
        BINKY_HOME="$B_HOME" "$BINKY" daemon stop >/dev/null 2>&1
    fi
    if [ -d "$R_HOME" ] && [ -x "${BINKY012:-}" ]; then
        for w in $(seq 1 "$WORLDS"); do (cd "$work/repo012" && BINKY_HOME="$R_HOME" "$BINKY012" remove "w$w" --force >/dev/null 2>&1); done
        BINKY_HOME="$R_HOME" "$BINKY012" daemon stop >/dev/null 2>&1
        pkill -F "$R_HOME/daemon.pid" 2>/dev/null
    fi
    # 0.1.2's daemon can outlive `daemon stop` while an `up` is in flight: end what runs in $work, by pid
    for p in $(pids_under "$work"); do kill "$p" 2>/dev/null; done
    for f in "$work"/hand-pids/*; do [ -f "$f" ] && kill -- "-$(cat "$f")" 2>/dev/null; done
    [ -f "$work/redis.pid" ] && kill "$(cat "$work/redis.pid")" 2>/dev/null
    [ -f "$work/pg/postmaster.pid" ] && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$work/pg" -m fast stop >/dev/null 2>&1
    [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# ---------------------------------------------------------------- helpers
# A fresh repository holding examples/fullstack, committed (`git clone`-equivalent).
make_repo() { # DIR [sed script applied to binky.toml]
    mkdir -p "$1"
    (cd "$root/examples/fullstack" && git ls-files -co --exclude-standard -z . 2>/dev/null ||
        find . -path ./web/node_modules -prune -o -path ./backend/.venv -prune -o -type f -print0) |
        (cd "$root/examples/fullstack" && xargs -0 cp --parents -t "$1")
    [ -f "$1/.gitignore" ] || cp "$root/examples/fullstack/.gitignore" "$1/"
    if [ -n "${2:-}" ]; then sed -i -e "$2" "$1/binky.toml"; fi
    (cd "$1" && git init -q -b main && git add -A &&
        git -c user.name=bench -c user.email=bench@localhost commit -qm "fullstack example")
}

# Poll until the world's page and API answer through HOST:PORT (Host header HOSTNAME).
# Prints nothing; returns 1 after TIMEOUT seconds.
answers() { # PORT HOSTNAME
    curl -sf -m 5 -H "Host: $2" "http://127.0.0.1:$1/" 2>/dev/null | grep -q 'id="root"' &&
        curl -sf -m 5 -H "Host: $2" "http://127.0.0.1:$1/api/notes/" 2>/dev/null | grep -q '"Welcome"'
}
wait_answers() { # PORT HOSTNAME TIMEOUT
    local deadline=$((SECONDS + $3))
    until answers "$1" "$2"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.05
    done
}
wait_http() { # URL TIMEOUT
    local deadline=$((SECONDS + $2))
    until curl -sf -m 2 -o /dev/null "$1"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.02
    done
}

# RSS (and PSS) in MiB of the given pids and all their descendants.
mem_of() { # PID...
    python3 - "$@" <<'PY'
import os, sys
want = {int(p) for p in sys.argv[1:] if p.isdigit()}
children = {}
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(ppid, []).append(int(d))
seen, todo = set(), list(want)
while todo:
    p = todo.pop()
    if p in seen:
        continue
    seen.add(p)
    todo.extend(children.get(p, []))
rss = pss = 0
for p in seen:
    try:
        for line in open(f"/proc/{p}/smaps_rollup"):
            if line.startswith("Rss:"):
                rss += int(line.split()[1])
            elif line.startswith("Pss:"):
                pss += int(line.split()[1])
    except OSError:
        pass
print(f"{rss / 1024:.1f} {pss / 1024:.1f} {len(seen)}")
PY
}
# The daemon's own resident memory, now and at its peak, in MiB: "RSS HWM".
daemon_mem() { # BINKY_HOME
    local pid
    pid=$(BINKY_HOME="$1" "$BINKY" daemon status 2>/dev/null | sed -n 's/^binky daemon running: pid \([0-9]*\),.*/\1/p')
    [ -n "$pid" ] || { echo "0 0"; return; }
    awk '/^VmRSS:/ {r=$2} /^VmHWM:/ {h=$2} END {printf "%.1f %.1f\n", r/1024, h/1024}' "/proc/$pid/status"
}
# Pids whose working directory is inside DIR (a world's processes, for 0.1.2, which has no --json).
pids_under() { # DIR
    local d p
    for d in /proc/[0-9]*; do
        p="$(readlink "$d/cwd" 2>/dev/null)" || continue
        case "$p" in "$1" | "$1"/*) echo "${d#/proc/}" ;; esac
    done
}
du_mib() { du -sm "$1" | cut -f1; }
median() { python3 -c 'import statistics,sys; print(f"{statistics.median(map(float, sys.argv[1:])):.3f}")' "$@"; }

PGBIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"

# ---------------------------------------------------------------- the machine
npm_cache="$(du -sm "$(npm config get cache 2>/dev/null || echo ~/.npm)" 2>/dev/null | cut -f1 || true)"
pip_cache="$(du -sm "$(python3 -m pip cache dir 2>/dev/null || echo ~/.cache/pip)" 2>/dev/null | cut -f1 || true)"
record machine nproc "$(nproc)"
record machine ram_gib "$(awk '/MemTotal/ {printf "%.1f", $2/1048576}' /proc/meminfo)"
record machine tmp_fs "$(df -T "$work" | awk 'NR==2 {print $2}')"
record machine npm_cache_mib "${npm_cache:-0}"
record machine pip_cache_mib "${pip_cache:-0}"
record machine binky_version "$("$BINKY" --version 2>&1 | head -1)"
record machine node "$(node --version)"
record machine python "$(python3 --version 2>&1)"
record machine postgres "$("$PGBIN/postgres" --version)"
record machine redis "$(redis-server --version | awk '{print $3}')"
log "work dir $work; npm cache ${npm_cache:-0} MiB, pip cache ${pip_cache:-0} MiB"

# A PostgreSQL and a Redis of the script's own: the servers of the by-hand arm and of 0.1.2.
PG_PORT=45280
REDIS_PORT=45281
start_private_servers() {
    [ -d "$work/pg" ] && return 0
    local t0=$EPOCHREALTIME
    install -d -o postgres -g postgres "$work/pg" "$work/pgsock"
    runuser -u postgres -- "$PGBIN/initdb" -D "$work/pg" -A trust -U postgres >/dev/null
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$work/pg" -l "$work/pgsock/pg.log" -w start \
        -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k $work/pgsock -c fsync=off" >/dev/null
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize yes --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work"
    until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.02; done
    record hand servers_start_s "$(elapsed "$t0")" "initdb + pg_ctl start + redis-server, once"
    log "private PostgreSQL on :$PG_PORT and Redis on :$REDIS_PORT"
}
PG_ADMIN="postgres://postgres@127.0.0.1:$PG_PORT/postgres"

# ================================================================ binky
run_binky() {
    local B="$BINKY" repo="$work/binky/repo" out="$work/out/binky"
    mkdir -p "$out"
    make_repo "$repo"
    cd "$repo"
    bk() { BINKY_HOME="$B_HOME" "$B" "$@"; }
    bk port --proxy "$PROXY_PORT" --https "$HTTPS_PORT" >/dev/null
    bk check >"$out/check.txt" 2>&1 || { cat "$out/check.txt"; return 1; }
    for i in $(seq 1 "$WORLDS"); do
        local w="w$i" t0=$EPOCHREALTIME
        if ! bk up "$w" --timeout 600s >"$out/up-$w.txt" 2>&1; then
            log "binky up $w failed:"; cat "$out/up-$w.txt" >&2; return 1
        fi
        local t_up; t_up=$(elapsed "$t0")
        wait_answers "$PROXY_PORT" "web.$w.fullstack.localhost" 30 || { log "binky $w does not answer"; return 1; }
        local t_ready; t_ready=$(elapsed "$t0")
        curl -sf -H "Host: api.$w.fullstack.localhost" "http://127.0.0.1:$PROXY_PORT/api/notes/" >"$out/api-$w.json"
        read -r drss dhwm < <(daemon_mem "$B_HOME")
        record binky "daemon_rss_mib.$w" "$drss" "the daemon's RSS once $w is ready (peak so far ${dhwm} MiB)"
        record binky "up_s.$w" "$t_up" "wall of binky up"
        record binky "ready_s.$w" "$t_ready" "until / and /api/notes/ answer through the proxy"
        log "binky $w ready in ${t_ready}s (up ${t_up}s)"
        case "$i" in 1 | 2 | "$WORLDS") sed 's/^/    | /' "$out/up-$w.txt" >&2 ;; esac
    done
    # A world of only the data services (`--group data`): its database cloned from the
    # golden template, its Redis; nothing brought into the worktree that it does not use.
    local t0=$EPOCHREALTIME
    bk up data1 --group data --timeout 600s >"$out/up-data1.txt" 2>&1 || { cat "$out/up-data1.txt" >&2; return 1; }
    record binky data_group_up_s "$(elapsed "$t0")" "wall of binky up data1 --group data (db + cache)"
    log "binky data-only world ready in $(elapsed "$t0")s"
    sed 's/^/    | /' "$out/up-data1.txt" >&2
    bk remove data1 -q >/dev/null 2>&1 || true
    bk events w2 2>&1 | sed 's/^/    events w2 | /' >&2 || true
    bk golden ls 2>&1 | sed 's/^/    golden | /' >&2 || true
    # Disk and RAM per world (w2: a linked world; w1 installed from the registries). What a
    # world adds to the disk: du of every worktree up to it, less du of those before it (du
    # counts a hard-linked file once across its arguments).
    for w in $(printf 'w%s\n' 1 2 "$WORLDS" | uniq); do
        local wt="$work/binky/repo.worktrees/$w" n=${w#w} upto=() before=()
        for j in $(seq 1 "$n"); do upto+=("$work/binky/repo.worktrees/w$j"); done
        for j in $(seq 1 $((n - 1))); do before+=("$work/binky/repo.worktrees/w$j"); done
        local added=$(( $(du -smc "${upto[@]}" | tail -1 | cut -f1) - $( ((n > 1)) && du -smc "${before[@]}" | tail -1 | cut -f1 || echo 0) ))
        record binky "disk_mib.$w" "$added" "what the world adds to the disk (du of the worktrees up to it less those before)"
        record binky "disk_mib_deps.$w" "$(($(du_mib "$wt/web/node_modules") + $(du_mib "$wt/backend/.venv")))" "node_modules + .venv, counted as if its own"
        bk status "$w" --json >"$out/status-$w.json"
        # How its paths came, and whether its setup replaced them (a file of its own has
        # one link; a linked one as many as the worlds sharing it).
        record binky "paths.$w" "$(jq -r '[.. | objects | select(has("path") and has("mode") and has("state")) | "\(.path)=\(.how // .state)"] | join(" ")' "$out/status-$w.json")" "how each [project] copy path came (binky status --json)"
        record binky "own_node_modules_files.$w" "$(find "$wt/web/node_modules" -type f -links 1 | wc -l)" "files of web/node_modules with one link: the world's own (copied, or installed by its setup)"
        read -r rss pss nproc < <(mem_of $(jq -r '.. | objects | select(has("pid")) | .pid // empty' "$out/status-$w.json"))
        record binky "rss_mib.$w" "$rss" "sum of RSS of the world's processes and their children ($nproc)"
        record binky "pss_mib.$w" "$pss" "same, PSS"
    done
    # `up` of a stopped world against the processes' own start, same ports, same worktree.
    local w="w$WORLDS" wt="$work/binky/repo.worktrees/w$WORLDS"
    bk exec "$w" -s api -- sh -c 'export -p' >"$out/api.env"
    bk exec "$w" -s web -- sh -c 'export -p' >"$out/web.env"
    local api_port web_port
    api_port=$(sh -c ". $out/api.env; echo \$PORT")
    web_port=$(sh -c ". $out/web.env; echo \$PORT")
    # The world's own redis-server (`${cache.url}`, redis://:SECRET@127.0.0.1:PORT/0) stops
    # with `binky down` and starts with `binky up`: the direct arm starts one too, alike.
    local redis_url redis_port redis_secret
    redis_url=$(sh -c ". $out/api.env; echo \$REDIS_URL")
    redis_port=${redis_url##*:}; redis_port=${redis_port%%/*}
    redis_secret=${redis_url#redis://}; redis_secret=${redis_secret#*:}; redis_secret=${redis_secret%%@*}
    bk down "$w" -q >/dev/null
    local direct=() ups=()
    for r in $(seq 1 "$ROUNDS"); do
        local t0=$EPOCHREALTIME
        redis-server --port "$redis_port" --bind 127.0.0.1 --requirepass "$redis_secret" --save '' \
            --appendonly no --daemonize yes --pidfile "$work/direct-redis.pid" --logfile "$work/direct-redis.log" --dir "$work"
        until redis-cli -p "$redis_port" -a "$redis_secret" --no-auth-warning ping >/dev/null 2>&1; do sleep 0.01; done
        (cd "$wt/backend" && . "$out/api.env" && exec setsid .venv/bin/python -m gunicorn config.wsgi \
            --bind "127.0.0.1:$api_port" --workers 2 >"$out/direct-api.log" 2>&1) &
        local apid=$!
        wait_http "http://127.0.0.1:$api_port/api/health/" 60
        (cd "$wt/web" && . "$out/web.env" && exec setsid ./node_modules/.bin/vite --port "$web_port" \
            --strictPort --host 127.0.0.1 >"$out/direct-web.log" 2>&1) &
        local wpid=$!
        wait_http "http://127.0.0.1:$web_port/" 60
        direct+=("$(elapsed "$t0")")
        kill -- "-$apid" "-$wpid" 2>/dev/null || kill "$apid" "$wpid"
        wait "$apid" "$wpid" 2>/dev/null || true
        redis-cli -p "$redis_port" -a "$redis_secret" --no-auth-warning shutdown nosave >/dev/null 2>&1 || true
        while curl -s -o /dev/null "http://127.0.0.1:$api_port/" || curl -s -o /dev/null "http://127.0.0.1:$web_port/" \
            || redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.05; done
        t0=$EPOCHREALTIME
        bk up "$w" >"$out/reup-$r.txt" 2>&1
        ups+=("$(elapsed "$t0")")
        wait_answers "$PROXY_PORT" "web.$w.fullstack.localhost" 30
        bk down "$w" -q >/dev/null
        log "binky stopped-world round $r: direct ${direct[-1]}s, binky up ${ups[-1]}s"
    done
    record binky reup_direct_s "$(median "${direct[@]}")" "median: the world's redis-server, gunicorn until /api/health/ answers, then vite until / answers"
    record binky reup_up_s "$(median "${ups[@]}")" "median: binky up of the stopped world"
    record binky reup_overhead_s "$(bc <<<"scale=3; $(median "${ups[@]}") - $(median "${direct[@]}")")"
    bk up "$w" -q >/dev/null
    # remove: every world but w1, then w1 (the last one, nothing left to copy from)
    local rms=()
    for i in $(seq "$WORLDS" -1 1); do
        local t0=$EPOCHREALTIME
        bk remove "w$i" >"$out/remove-w$i.txt" 2>&1 || { cat "$out/remove-w$i.txt" >&2; return 1; }
        rms+=("$(elapsed "$t0")")
    done
    read -r drss dhwm < <(daemon_mem "$B_HOME")
    record binky daemon_rss_mib.removed "$drss" "the daemon's RSS once every world is removed"
    record binky daemon_hwm_mib "$dhwm" "the daemon's peak RSS over the whole run"
    record binky remove_s "$(median "${rms[@]}")" "median of $WORLDS; max $(printf '%s\n' "${rms[@]}" | sort -g | tail -1)"
    record binky remove_first_s "${rms[0]}" "w$WORLDS, running"
    bk servers stop >/dev/null 2>&1 || true
    bk daemon stop >/dev/null 2>&1 || true
    cd "$root"
}

# ================================================================ by hand
run_hand() {
    start_private_servers
    local repo="$work/hand/repo" out="$work/out/hand"
    mkdir -p "$out" "$work/hand-pids"
    make_repo "$repo"
    cd "$repo"
    local n="$OTHER_WORLDS"
    for i in $(seq 1 "$n"); do
        local w="h$i" wt="$work/hand/repo.worktrees/h$i" api_port=$((45200 + 2 * i)) web_port=$((45201 + 2 * i))
        local t0=$EPOCHREALTIME t
        git worktree add -q "$wt" -b "$w"
        record hand "step_worktree_s.$w" "$(elapsed "$t0")"
        t=$EPOCHREALTIME
        (cd "$wt/web" && npm ci --no-audit --no-fund >"$out/npm-$w.txt" 2>&1)
        record hand "step_npm_ci_s.$w" "$(elapsed "$t")"
        t=$EPOCHREALTIME
        (cd "$wt/backend" && python3 -m venv .venv && .venv/bin/python -m pip install -q -r requirements.txt >"$out/pip-$w.txt" 2>&1)
        record hand "step_venv_pip_s.$w" "$(elapsed "$t")"
        t=$EPOCHREALTIME
        psql -q "$PG_ADMIN" -c "CREATE DATABASE hand_$i" >/dev/null
        local dburl="postgres://postgres@127.0.0.1:$PG_PORT/hand_$i" redisurl="redis://127.0.0.1:$REDIS_PORT/0"
        (cd "$wt/backend" && DATABASE_URL="$dburl" .venv/bin/python manage.py migrate --noinput >"$out/migrate-$w.txt" 2>&1 &&
            DATABASE_URL="$dburl" .venv/bin/python manage.py loaddata notes >>"$out/migrate-$w.txt" 2>&1)
        record hand "step_db_s.$w" "$(elapsed "$t")" "createdb + migrate + loaddata"
        t=$EPOCHREALTIME
        (cd "$wt/backend" && DATABASE_URL="$dburl" REDIS_URL="$redisurl" CACHE_PREFIX="$w:" exec setsid \
            .venv/bin/python -m gunicorn config.wsgi --bind "127.0.0.1:$api_port" --workers 2 >"$out/api-$w.log" 2>&1) &
        echo $! >"$work/hand-pids/api-$w"
        wait_http "http://127.0.0.1:$api_port/api/health/" 60
        (cd "$wt/web" && API_URL="http://127.0.0.1:$api_port" exec setsid ./node_modules/.bin/vite --port "$web_port" \
            --strictPort --host 127.0.0.1 >"$out/web-$w.log" 2>&1) &
        echo $! >"$work/hand-pids/web-$w"
        wait_answers "$web_port" "127.0.0.1:$web_port" 60 || { log "by hand $w does not answer"; return 1; }
        record hand "step_start_s.$w" "$(elapsed "$t")" "gunicorn until /api/health/, then vite until / and /api/notes/"
        record hand "ready_s.$w" "$(elapsed "$t0")" "sequential, as typed"
        log "by hand $w ready in $(elapsed "$t0")s"
    done
    for w in $(printf 'h%s\n' 1 2 "$n" | uniq); do
        record hand "disk_mib.$w" "$(du_mib "$work/hand/repo.worktrees/$w")"
        read -r rss pss nproc < <(mem_of "$(cat "$work/hand-pids/api-$w")" "$(cat "$work/hand-pids/web-$w")")
        record hand "rss_mib.$w" "$rss" "gunicorn + vite process trees ($nproc)"
        record hand "pss_mib.$w" "$pss"
    done
    local rms=()
    for i in $(seq "$n" -1 1); do
        local t0=$EPOCHREALTIME w="h$i"
        kill -- "-$(cat "$work/hand-pids/api-$w")" "-$(cat "$work/hand-pids/web-$w")" 2>/dev/null || true
        rm -f "$work/hand-pids/api-$w" "$work/hand-pids/web-$w"
        git worktree remove --force "$work/hand/repo.worktrees/$w"
        git branch -q -D "$w"
        psql -q "$PG_ADMIN" -c "DROP DATABASE hand_$i WITH (FORCE)" >/dev/null
        rms+=("$(elapsed "$t0")")
    done
    record hand remove_s "$(median "${rms[@]}")" "kill + git worktree remove --force + branch -D + DROP DATABASE; median of $n"
    cd "$root"
}

# ================================================================ binky 0.1.2
run_binky012() {
    start_private_servers
    local out="$work/out/binky012"
    mkdir -p "$out"
    if [ ! -x "$BINKY012" ]; then
        local venv="${BINKY012%/bin/binky}"
        python3 -m venv "$venv" && "$venv/bin/python" -m pip install -q "binky[postgres,redis]==0.1.2"
    fi
    local repo="$work/repo012"
    # 0.1.2 refuses `copy` (binky only): drop it; its own port range.
    make_repo "$repo" 's/^copy = .*$//; /^stop_signal = /d; s/^port_range = .*$/port_range = [45100, 45199]/'
    cd "$repo"
    rb() { BINKY_HOME="$R_HOME" BINKY_DB_ADMIN_URL="$PG_ADMIN" BINKY_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" "$BINKY012" "$@"; }
    record binky012 version "$(rb --version 2>&1 | tail -1)"
    rb port --proxy "$PROXY012" --https "$HTTPS012" >"$out/port.txt" 2>&1 || true
    rb daemon stop >/dev/null 2>&1 || true # `port` started it; the next `up` starts it on the new port
    if ! rb check >"$out/check.txt" 2>&1; then
        record binky012 check_failed "1" "$(tr '\n' ' ' <"$out/check.txt" | cut -c1-400)"
    fi
    local n="$OTHER_WORLDS"
    for i in $(seq 1 "$n"); do
        local w="w$i" t0=$EPOCHREALTIME
        if ! timeout 600 env BINKY_HOME="$R_HOME" BINKY_DB_ADMIN_URL="$PG_ADMIN" BINKY_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" \
            "$BINKY012" up "$w" >"$out/up-$w.txt" 2>&1; then
            log "binky 0.1.2 up $w failed:"; cat "$out/up-$w.txt" >&2
            rb status 2>&1 | sed 's/^/    0.1.2 status | /' >&2 || true
            tail -5 "$R_HOME/events.log" 2>/dev/null | sed 's/^/    0.1.2 events | /' >&2 || true
            record binky012 "failed.$w" 1 "$(tr '\n' ' ' <"$out/up-$w.txt" | cut -c1-600)"
            n=$((i - 1))
            break
        fi
        local t_up; t_up=$(elapsed "$t0")
        if ! wait_answers "$PROXY012" "web.$w.fullstack.localhost" 60; then
            log "binky 0.1.2 $w does not answer through its proxy"
            record binky012 "failed.$w" 1 "up returned but / or /api/notes/ did not answer through its proxy within 60 s"
            n=$((i - 1))
            break
        fi
        record binky012 "up_s.$w" "$t_up"
        record binky012 "ready_s.$w" "$(elapsed "$t0")"
        log "binky 0.1.2 $w ready in $(elapsed "$t0")s"
    done
    [ "$n" -ge 1 ] || return 0
    for w in $(printf 'w%s\n' 1 2 "$n" | uniq); do
        local wt="$R_HOME/worktrees/fullstack/$w"
        [ -d "$wt" ] || wt="$(find "$R_HOME/worktrees" -maxdepth 2 -name "$w" -type d | head -1)"
        [ -n "$wt" ] || continue
        record binky012 "disk_mib.$w" "$(du_mib "$wt")"
        read -r rss pss nproc < <(mem_of $(pids_under "$wt"))
        record binky012 "rss_mib.$w" "$rss" "processes whose cwd is in the worktree, and their children ($nproc)"
        record binky012 "pss_mib.$w" "$pss"
    done
    local rms=()
    for i in $(seq "$OTHER_WORLDS" -1 1); do
        local t0=$EPOCHREALTIME
        local wt; wt="$(find "$R_HOME/worktrees" -maxdepth 2 -name "w$i" -type d | head -1)"
        rb remove "w$i" --force >"$out/remove-w$i.txt" 2>&1 || true
        # its CLI stops waiting after 30 s while the daemon carries on: time until the worktree is gone
        while [ -n "$wt" ] && [ -d "$wt" ] && [ $(($(printf '%.0f' "$(elapsed "$t0")"))) -lt 180 ]; do sleep 0.1; done
        rms+=("$(elapsed "$t0")")
        sed 's/^/    remove w'"$i"' | /' "$out/remove-w$i.txt" >&2
    done
    record binky012 remove_s "$(median "${rms[@]}")" "median of $n"
    rb daemon stop >/dev/null 2>&1 || true
    cd "$root"
}

for arm in $ARMS; do
    log "=== $arm"
    # A subshell of its own: `set -e` holds inside it (it would not in `run_x || …`).
    set +e
    (set -e; "run_$arm")
    rc=$?
    set -e
    [ $rc -eq 0 ] || { log "$arm failed"; record "$arm" failed 1 "exit $rc; see the log above"; }
done

# ---------------------------------------------------------------- table + JSON
python3 - "$res" "$OUT" "$WORLDS" "$OTHER_WORLDS" "$(bench_run_json "$load_at_start")" <<'PY'
import json, sys, statistics
tsv, out, n, m, run = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
data, notes = {}, {}
for line in open(tsv):
    arm, metric, value, note = line.rstrip("\n").split("\t")
    try:
        value = float(value)
    except ValueError:
        pass
    data.setdefault(arm, {})[metric] = value
    if note:
        notes.setdefault(arm, {})[metric] = note
json.dump({"run": run, "worlds": {"binky": n, "hand": m, "binky012": m}, "results": data, "notes": notes}, open(out, "w"), indent=2, sort_keys=True)

def get(arm, key):
    return data.get(arm, {}).get(key)
def fmt(v, unit="s"):
    if v is None:
        return "—"
    return f"{v:.2f} {unit}" if unit == "s" else f"{v:.0f} {unit}"
rows = [
    ("first world ready", "ready_s.{p}1", "s"),
    ("second world ready", "ready_s.{p}2", "s"),
    (f"last world ready (binky: w{n}, others: {m})", "ready_s.{p}{last}", "s"),
    ("remove (median)", "remove_s", "s"),
    ("disk, first world", "disk_mib.{p}1", "MiB"),
    ("disk, second world", "disk_mib.{p}2", "MiB"),
    ("RAM (RSS), last world", "rss_mib.{p}{last}", "MiB"),
    ("RAM (PSS), last world", "pss_mib.{p}{last}", "MiB"),
]
arms = [("binky", "w", n), ("hand", "h", m), ("binky012", "w", m)]
print()
print("| | binky | by hand | binky 0.1.2 |")
print("| --- | ---: | ---: | ---: |")
for label, key, unit in rows:
    cells = [fmt(get(a, key.format(p=p, last=last)), unit) for a, p, last in arms]
    print(f"| {label} | " + " | ".join(cells) + " |")
b = data.get("binky", {})
if "reup_up_s" in b:
    print(f"| up of a stopped world: binky up / processes' own start / overhead | "
          f"{b['reup_up_s']:.2f} s / {b['reup_direct_s']:.2f} s / {b['reup_overhead_s']:+.2f} s | | |")
for arm in data:
    for k, v in data[arm].items():
        if k.startswith("failed"):
            print(f"\n{arm} {k}: {notes.get(arm, {}).get(k, '')}")
print(f"\nJSON: {out}")
PY
