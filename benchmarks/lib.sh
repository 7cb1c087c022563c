# What the shell benchmarks share: which binky they measure, the commit measured, and the
# machine's state, so every result file records them the same way.
#
# Sourced by the scripts beside it, after they set `root` (the repository):
#   . "$root/benchmarks/lib.sh"

# The binky to measure: $BINKY (a relative path is taken from where the script was started,
# before any `cd`), else target/release/binky. Exits with the fix when there is none.
bench_binky() {
    local bin="${BINKY:-$root/target/release/binky}"
    case "$bin" in /*) ;; *) bin="$bench_started_in/$bin" ;; esac
    [ -x "$bin" ] || { echo "binky not found at $bin (cargo build --release, or set BINKY)" >&2; exit 1; }
    printf '%s\n' "$bin"
}
bench_started_in="$PWD"

# The commit measured, `+changes` when src/ or controllers/ differ from it.
bench_commit() {
    printf '%s%s\n' "$(git -C "$root" rev-parse --short HEAD)" \
        "$(git -C "$root" diff --quiet HEAD -- src controllers proxy || echo '+changes')"
}

# The load average's three figures.
bench_load() { cut -d' ' -f1-3 /proc/loadavg; }

# A JSON object of the run's circumstances, for a result file's "run" key:
# commit, date (UTC), CPUs, the load average at start (LOAD_AT_START) and now.
bench_run_json() { # LOAD_AT_START
    python3 -c 'import json, os, sys, time
print(json.dumps({"commit": sys.argv[1], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  "nproc": os.cpu_count(), "load_at_start": sys.argv[2], "load_at_end": sys.argv[3]}))' \
        "$(bench_commit)" "$1" "$(bench_load)"
}
