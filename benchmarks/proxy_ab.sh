#!/bin/bash
# Two builds of binky's proxy against each other, and against nginx, on the same machine in
# one run: each gets its own sandbox (BINKY_HOME, a world whose `web` service is an nginx
# backend serving a 1 KiB file), then `wrk -t2 -c50` runs against A, B and an nginx reverse
# proxy in turn, round after round; each run prints requests/s and the proxy's CPU time per
# request (all threads of the daemon, or nginx's master and workers, from
# /proc/PID/task/*/schedstat).
#
# usage: [CONNS=50] [PROTO=http|h2] benchmarks/proxy_ab.sh BINKY_A BINKY_B [ROUNDS=5] [SECONDS=6]
# (CONNS=1: one connection, one wrk thread, for latency; PROTO=h2: h2 over TLS with
# `h2load -t2 -c10 -m5` as in benchmarks/proxy.rs, against binky's HTTPS port and an nginx
# `listen ... ssl http2` with a throwaway certificate; its latency column is h2load's mean)
# e.g.   git worktree add /tmp/old <commit> && (cd /tmp/old && cargo build --release) &&
#        benchmarks/proxy_ab.sh /tmp/old/target/release/binky target/release/binky
# With PERF=FILE, one more wrk run against B and one against nginx are recorded by
# `perf record -g` into FILE and FILE.nginx (then: perf report -i FILE --no-children --sort sym;
# for binky's symbols, build B with CARGO_PROFILE_RELEASE_STRIP=false).
# Needs nginx and wrk (apt-get install nginx-light wrk); everything it starts is stopped at
# the end, also on Ctrl-C.
set -euo pipefail
A=$(realpath "$1"); B=$(realpath "$2"); ROUNDS=${3:-5}; SECS=${4:-6}; CONNS=${CONNS:-50}; THREADS=$(( CONNS > 1 ? 2 : 1 ))
PROTO=${PROTO:-http}
TOOLS="nginx wrk git curl"; [ "$PROTO" = h2 ] && TOOLS="$TOOLS h2load openssl"
for tool in $TOOLS; do
  command -v $tool >/dev/null || [ -x /usr/sbin/$tool ] || { echo "needs $tool (apt-get install nginx-light wrk git curl)" >&2; exit 1; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
ROOT=$(mktemp -d /tmp/binky-proxy-ab-XXXXXX); chmod 755 "$ROOT" # nginx workers run as nobody
HOST=web.w.bench.localhost
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@binky.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@binky.invalid

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

nginx_common() { # prefix
  cat <<EOF
worker_processes $2; pid $1/nginx.pid; error_log stderr warn;
events { worker_connections 4096; }
http { access_log off; keepalive_timeout 75s; keepalive_requests 1000000;
  client_body_temp_path $1/t1; proxy_temp_path $1/t2; fastcgi_temp_path $1/t3;
  uwsgi_temp_path $1/t4; scgi_temp_path $1/t5;
EOF
}

# A sandbox for one binky build: prints "daemon_pid proxy_port backend_port https_port".
sandbox() { # name binary
  local dir=$ROOT/$1 bin=$2 port
  mkdir -p "$dir/repo" "$dir/home/.binky" "$dir/backend"
  head -c 768 /dev/urandom | base64 -w0 | head -c 1024 >"$dir/backend/index.html"
  { nginx_common "$dir/backend" 1
    echo "  server { listen 127.0.0.1:@PORT@ backlog=4096; location / { root $dir/backend; } } }"
  } >"$dir/backend/nginx.conf.in"
  cat >"$dir/repo/binky.toml" <<EOF
[project]
name = "bench"
port_range = [23100, 23199]
https = $([ "$PROTO" = h2 ] && echo true || echo false)

[services.web]
cmd = 'sed "s/@PORT@/\${self.port}/" $dir/backend/nginx.conf.in > $dir/backend/nginx.conf && exec $NGINX -p $dir/backend -c $dir/backend/nginx.conf -e stderr -g "daemon off;"'
url = "web"
EOF
  (cd "$dir/repo" && git init -q && git add binky.toml && git commit -qm bench)
  port=$(free_port)
  local https=0; [ "$PROTO" = h2 ] && https=$(free_port)
  local env=(env HOME="$dir/home" BINKY_HOME="$dir/home/.binky")
  (cd "$dir/repo" && "${env[@]}" "$bin" port --proxy "$port" --https "$https" >/dev/null &&
    "${env[@]}" "$bin" daemon start >/dev/null && "${env[@]}" "$bin" up w -q >/dev/null)
  local backend pid
  backend=$(cd "$dir/repo" && "${env[@]}" "$bin" env w --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["env"]["WEB_PORT"])')
  pid=$("${env[@]}" "$bin" daemon status 2>&1 | sed -n 's/.*pid \([0-9]*\).*/\1/p' | head -1)
  echo "$pid $port $backend $https"
}

teardown() {
  set +e
  [ -f "$ROOT/nginx/nginx.pid" ] && kill "$(cat "$ROOT/nginx/nginx.pid")" 2>/dev/null
  for pair in "a:$A" "b:$B"; do
    local name=${pair%%:*} bin=${pair#*:}
    [ -d "$ROOT/$name/repo" ] || continue
    (cd "$ROOT/$name/repo" && HOME=$ROOT/$name/home BINKY_HOME=$ROOT/$name/home/.binky \
      "$bin" remove w --force >/dev/null 2>&1
     HOME=$ROOT/$name/home BINKY_HOME=$ROOT/$name/home/.binky "$bin" daemon stop >/dev/null 2>&1)
  done
  sleep 0.5
  rm -rf "$ROOT"
}
trap teardown EXIT INT TERM

read -r PID_A PORT_A BACKEND_A HTTPS_A < <(sandbox a "$A")
read -r PID_B PORT_B BACKEND_B HTTPS_B < <(sandbox b "$B")
# The comparator: nginx as a reverse proxy to B's backend, as in benchmarks/proxy.rs.
NPORT=$(free_port); NTLS=$(free_port); mkdir -p "$ROOT/nginx"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$HOST" \
  -keyout "$ROOT/nginx/key.pem" -out "$ROOT/nginx/cert.pem" 2>/dev/null
LOCATION='location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_set_header Host $host; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme; proxy_set_header X-Forwarded-Host $host; }'
{ nginx_common "$ROOT/nginx" auto
  cat <<EOF
  upstream backend { server 127.0.0.1:$BACKEND_B; keepalive 64; keepalive_requests 1000000; }
  server { listen 127.0.0.1:$NPORT backlog=4096 reuseport; $LOCATION }
  server { listen 127.0.0.1:$NTLS ssl http2 backlog=4096 reuseport;
    ssl_certificate $ROOT/nginx/cert.pem; ssl_certificate_key $ROOT/nginx/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3; $LOCATION } }
EOF
} >"$ROOT/nginx/nginx.conf"
setsid "$NGINX" -p "$ROOT/nginx" -c "$ROOT/nginx/nginx.conf" -e stderr -g 'daemon off;' \
  </dev/null >/dev/null 2>&1 &
for port in "$PORT_A" "$PORT_B" "$NPORT"; do
  for _ in $(seq 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: $HOST" "http://127.0.0.1:$port/")" = 200 ] && break
    sleep 0.1
  done
done
NGINX_PIDS="$(cat "$ROOT/nginx/nginx.pid") $(pgrep -P "$(cat "$ROOT/nginx/nginx.pid")" | tr '\n' ' ')"

cpu_ns() { local t=0 f; for p in "$@"; do for f in /proc/$p/task/*/schedstat; do
  t=$((t + $(cut -d' ' -f1 "$f"))); done; done; echo $t; }
# One load run against a port for SECS seconds (h2: the port is the TLS one).
load() { # port seconds
  if [ "$PROTO" = h2 ]; then
    h2load -t2 -c10 -m5 -D"$2" --connect-to="127.0.0.1:$1" "https://$HOST/"
  else
    wrk -t$THREADS -c$CONNS -d"$2"s --latency -H "Host: $HOST" "http://127.0.0.1:$1/"
  fi
}
run() { # port pids...
  local port=$1; shift
  local before after out requests rps
  before=$(cpu_ns "$@")
  out=$(load "$port" "$SECS")
  after=$(cpu_ns "$@")
  if [ "$PROTO" = h2 ]; then
    echo "$out" | grep -q ' 0 failed, 0 errored' || { echo "h2load saw failures: $out" >&2; exit 1; }
    requests=$(echo "$out" | awk '/^requests:/{print $4}')
    rps=$(echo "$out" | awk '/^finished in/{printf "%.0f", $4}')
    p50=$(echo "$out" | awk '/^time for request:/{print $6}')
  else
    requests=$(echo "$out" | awk '/requests in/{print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/{printf "%.0f", $2}')
    p50=$(echo "$out" | awk '$1=="50%"{print $2}')
  fi
  echo "$rps $(python3 -c "print(round(($after-$before)/1000/$requests,1))") $p50"
}
# The ports the load goes to: the plain ones, or for h2 the TLS ones.
if [ "$PROTO" = h2 ]; then LA=$HTTPS_A LB=$HTTPS_B LN=$NTLS; WHAT="h2load -t2 -c10 -m5 -D$SECS"; LAT=mean
else LA=$PORT_A LB=$PORT_B LN=$NPORT; WHAT="wrk -t$THREADS -c$CONNS -d${SECS}s"; LAT=p50; fi
echo "A: $A"; echo "B: $B"; echo "$WHAT, ${ROUNDS} rounds, 1 KiB file; req/s, proxy CPU µs/request, $LAT"
printf '%-6s %26s %26s %26s %8s\n' round A B nginx "B/A CPU"
for r in $(seq "$ROUNDS"); do
  load "$LA" 1 >/dev/null
  read -r ra ca la < <(run "$LA" "$PID_A")
  load "$LB" 1 >/dev/null
  read -r rb cb lb < <(run "$LB" "$PID_B")
  read -r rn cn ln < <(run "$LN" $NGINX_PIDS)
  printf '%-6s %9s %6s µs %7s %9s %6s µs %7s %9s %6s µs %7s %8s\n' "$r" "$ra" "$ca" "$la" "$rb" "$cb" "$lb" "$rn" "$cn" "$ln" \
    "$(python3 -c "print(round($cb/$ca,2))")"
done
if [ -n "${PERF:-}" ]; then
  perf record -q -g -o "$PERF" -p "$PID_B" -- sleep "$SECS" 2>/dev/null &
  PERF_PID=$!
  load "$LB" "$SECS" >/dev/null
  wait "$PERF_PID"
  perf record -q -g -o "$PERF.nginx" -p "$(echo $NGINX_PIDS | tr " " ",")" -- sleep "$SECS" 2>/dev/null &
  PERF_PID=$!
  load "$LN" "$SECS" >/dev/null
  wait "$PERF_PID"
  echo "perf data under load: $PERF (B), $PERF.nginx (nginx)"
  # System calls per request, by name, for B and nginx.
  for pair in "B:$PID_B:$LB" "nginx:$(echo $NGINX_PIDS | tr ' ' ','):$LN"; do
    IFS=: read -r name pids port <<<"$pair"
    perf stat -e 'syscalls:sys_enter_*' -p "$pids" -o "$PERF.$name.stat" -- sleep "$SECS" 2>/dev/null &
    PERF_PID=$!
    requests=$(load "$port" "$SECS" | awk '/requests in/{print $1} /^requests:/{print $4}')
    wait "$PERF_PID"
    awk -v n="$requests" -v who="$name" '$1 ~ /^[0-9,]+$/ { c=$1; gsub(",","",c); if (c/n >= 0.01) { sub("syscalls:sys_enter_","",$2); printf "%s %s %.2f\n", who, $2, c/n; t+=c } }
      END { printf "%s all %.2f system calls per request\n", who, t/n }' "$PERF.$name.stat"
  done
fi
