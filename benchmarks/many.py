#!/usr/bin/env python3
"""Many worlds at once: what N worlds cost the daemon, for N in a sweep.

For each binky binary named (the one under test and, as the comparator, an older build run
by the same script) and each N: a fresh home and repository, a project of two
`python3 -m http.server` services, then

1. `binky up wK --no-wait` for K = 1..N, all started at once;
2. `binky status --json` polled until every world is ready ("all ready");
3. the daemon's resident memory (VmRSS), then its CPU over 10 s of idle (utime + stime);
4. `binky status` (every world, as text) timed, median of 5;
5. MCP `list` through `binky mcp` (initialize once, then 10 calls), median;
6. `binky remove wK` for every K, all at once: how many succeeded, how long all took, and
   whether any world is left.

Run alone on the machine:

    cargo build --release
    ./benchmarks/many.py --many 50,100,150,300 [--base PATH_TO_OLDER_BINKY] [--json PATH]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

CONFIG = """[project]
name = "many"
port_range = [20000, 29999]

[services.web]
cmd = "exec python3 -m http.server ${self.port} --bind 127.0.0.1"
url = true

[services.api]
cmd = "exec python3 -m http.server ${self.port} --bind 127.0.0.1"
"""

TICK = os.sysconf("SC_CLK_TCK")


def run(binky, home, args, cwd, check=True):
    env = dict(os.environ, BINKY_HOME=home)
    env.pop("BINKY_WORKTREE_ROOT", None)
    p = subprocess.run([binky, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"binky {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def daemon_pid(home):
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
            if len(cmd) < 2 or b"binky" not in cmd[0] or cmd[1] != b"daemon":
                continue
            envs = open(f"/proc/{d}/environ", "rb").read().split(b"\0")
            if f"BINKY_HOME={home}".encode() in envs:
                return int(d)
        except OSError:
            continue
    return None


def status_field(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def rss_mib(pid):
    return status_field(pid, "VmRSS") / 1024


def cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def worlds(binky, home, repo):
    p = run(binky, home, ["status", "--json"], repo, check=False)
    try:
        v = json.loads(p.stdout)
    except json.JSONDecodeError:
        return None
    return v if isinstance(v, list) else v.get("worlds", [])


def mcp_list(binky, home, repo, calls=10):
    env = dict(os.environ, BINKY_HOME=home)
    p = subprocess.Popen([binky, "mcp"], cwd=repo, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)

    def ask(i, method, params):
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                  "params": params}) + "\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                raise SystemExit("binky mcp ended")
            m = json.loads(line)
            if m.get("id") == i:
                return m

    ask(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "many.py", "version": "1"}})
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    p.stdin.flush()
    times = []
    count = None
    for i in range(1, calls + 1):
        t = time.perf_counter()
        m = ask(i, "tools/call", {"name": "list", "arguments": {}})
        times.append((time.perf_counter() - t) * 1000)
        sc = m.get("result", {}).get("structuredContent") or {}
        count = len(sc.get("worlds", []))
    p.stdin.close()
    p.wait(timeout=10)
    return statistics.median(times), count


def at_once(binky, home, repo, n, words):
    """`binky WORDS` for worlds w1..wN, all started at once: the failures, (k, code, stderr)."""
    procs = [subprocess.Popen([binky, *[x.format(w=f"w{k}") for x in words]], cwd=repo,
                              env=dict(os.environ, BINKY_HOME=home),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for k in range(1, n + 1)]
    failed = []
    for k, p in enumerate(procs, 1):
        _, err = p.communicate()
        if p.returncode != 0:
            failed.append((k, p.returncode, err.strip()[:300]))
    return failed


def one(binky, n, label):
    base = tempfile.mkdtemp(prefix="binky-many-")
    home, repo = os.path.join(base, "home"), os.path.join(base, "repo")
    os.makedirs(repo)
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b.invalid",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b.invalid")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    open(os.path.join(repo, "binky.toml"), "w").write(CONFIG)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=repo, check=True, env=env)
    run(binky, home, ["port", "--proxy", "38080", "--https", "38443"], repo)
    row = {"binky": label, "worlds": n}
    try:
        t0 = time.monotonic()
        up_failed = at_once(binky, home, repo, n, ["up", "{w}", "--no-wait", "-q"])
        row["up_failed"] = len(up_failed)
        if up_failed:
            print(f"  {len(up_failed)} ups failed, e.g. {up_failed[:3]}", file=sys.stderr)
        deadline = t0 + 1800
        while True:
            ws = worlds(binky, home, repo) or []
            ready = sum(1 for w in ws if w.get("state") == "ready")
            if ready == n:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"{label} N={n}: only {ready} of {n} ready after 1800 s")
            time.sleep(0.5)
        row["all_ready_s"] = round(time.monotonic() - t0, 1)
        pid = daemon_pid(home)
        time.sleep(2)  # the last worlds' first health answers settle
        row["rss_mib"] = round(rss_mib(pid), 1)
        row["threads"] = status_field(pid, "Threads")
        if os.environ.get("MANY_PERF"):
            # A profile of the idle daemon (perf must be installed): MANY_PERF=DIR.
            out = os.path.join(os.environ["MANY_PERF"], f"{label}-{n}.data")
            subprocess.run(["perf", "record", "-g", "-o", out, "-p", str(pid), "--", "sleep", "10"],
                           capture_output=True)
        c0, t = cpu_ticks(pid), time.monotonic()
        time.sleep(10)
        row["idle_cpu_pct"] = round(100 * (cpu_ticks(pid) - c0) / TICK / (time.monotonic() - t), 2)
        st = []
        for _ in range(5):
            t = time.perf_counter()
            run(binky, home, ["status"], repo)
            st.append((time.perf_counter() - t) * 1000)
        row["status_ms"] = round(statistics.median(st), 1)
        ms, count = mcp_list(binky, home, repo)
        row["mcp_list_ms"] = round(ms, 1)
        row["mcp_list_worlds"] = count
        t = time.monotonic()
        failed = at_once(binky, home, repo, n, ["remove", "{w}", "-q", "--force"])
        row["remove_s"] = round(time.monotonic() - t, 1)
        row["removed_ok"] = n - len(failed)
        left = worlds(binky, home, repo) or []
        row["left"] = len(left)
        if failed:
            row["remove_errors"] = sorted({e for _, _, e in failed})[:5]
            print(f"  {len(failed)} removes failed, e.g. {failed[:3]}", file=sys.stderr)
    finally:
        for w in worlds(binky, home, repo) or []:
            run(binky, home, ["remove", w["world"] if "world" in w else w.get("name", ""),
                              "--force", "-q"], repo, check=False)
        run(binky, home, ["daemon", "stop"], repo, check=False)
        pid = daemon_pid(home)
        if pid:
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--many", default="50,100,150,300")
    ap.add_argument("--binky", default="target/release/binky")
    ap.add_argument("--base", help="an older binky to run the same sweep with (comparator)")
    ap.add_argument("--json")
    a = ap.parse_args()
    arms = [("this", os.path.abspath(a.binky))]
    if a.base:
        arms.insert(0, ("base", os.path.abspath(a.base)))
    rows = []
    for n in [int(x) for x in a.many.split(",")]:
        for label, binky in arms:
            row = one(binky, n, label)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print()
    print("| binky | worlds | all ready | daemon RSS | idle CPU | `status` | MCP `list` | removes at once |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r['binky']} | {r['worlds']} | {r['all_ready_s']} s | {r['rss_mib']} MiB | "
              f"{r['idle_cpu_pct']} % | {r['status_ms']} ms | {r['mcp_list_ms']} ms | "
              f"{r['remove_s']} s, {r['removed_ok']}/{r['worlds']} ok, {r['left']} left |")
    if a.json:
        json.dump({"rows": rows, "load": os.getloadavg()}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
