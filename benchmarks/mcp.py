#!/usr/bin/env python3
"""Latency of binky's MCP tools `list`, `status` and `wait` with N real worlds, and of the
CLI commands they run, as the comparator.

Each world runs one tiny TCP server (python3, one listening socket, a URL through the
proxy). The MCP side is a plain JSON-RPC client over the `binky mcp` process's stdio (no SDK,
so nothing of a client library is measured): each call's time is from writing the request
to reading its answer. The CLI side times the whole `binky ...` process, as an agent with a
shell would run it.

    python3 benchmarks/mcp.py [--binky PATH] [--worlds 40] [--runs 30] [--json OUT]

Everything it makes lives in a temp directory (repository, BINKY_HOME) and is removed at
the end, the daemon stopped and every world's processes with it.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from common import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def git(cwd, *args):
    env = dict(os.environ)
    env.update(
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@binky.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@binky.invalid",
    )
    subprocess.run(["git", *args], cwd=cwd, check=True, env=env, capture_output=True)


class Mcp:
    """A minimal MCP client: newline-delimited JSON-RPC over the server's stdio."""

    def __init__(self, binky, cwd, env):
        self.p = subprocess.Popen(
            [binky, "mcp"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.id = 0
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def request(self, method, params):
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("binky mcp closed its stdout")
            msg = json.loads(line)
            if msg.get("id") == self.id:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def call(self, tool, args):
        t = time.perf_counter()
        r = self.request("tools/call", {"name": tool, "arguments": args})
        ms = (time.perf_counter() - t) * 1000
        if r.get("isError"):
            raise RuntimeError(f"{tool}: {r}")
        return ms, len(json.dumps(r["structuredContent"]))

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def cli(binky, cwd, env, *args):
    t = time.perf_counter()
    out = subprocess.run([binky, *args], cwd=cwd, env=env, capture_output=True)
    ms = (time.perf_counter() - t) * 1000
    if out.returncode != 0:
        raise RuntimeError(f"binky {' '.join(args)}: {out.stderr.decode()}")
    return ms, len(out.stdout)


def stats(xs):
    xs = sorted(xs)
    return {
        "median_ms": round(statistics.median(xs), 2),
        "p90_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.9))], 2),
        "min_ms": round(xs[0], 2),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binky", default=None)
    ap.add_argument("--worlds", type=int, default=40)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    binky = a.binky
    if binky is None:
        for b in ("target/release/binky", "target/debug/binky"):
            if os.path.exists(os.path.join(ROOT, b)):
                binky = os.path.join(ROOT, b)
                break
    if binky is None:
        sys.exit("no binky binary: run `cargo build` (or pass --binky PATH)")
    binky = os.path.abspath(binky)

    tmp = tempfile.mkdtemp(prefix="binky-mcp-bench-")
    repo = os.path.join(tmp, "repo")
    env = dict(os.environ)
    env["BINKY_HOME"] = os.path.join(tmp, "home")
    env.pop("BINKY_WORKTREE_ROOT", None)
    low = 23000
    server = (
        f"{sys.executable} -c \\\"import socket as S;s=S.socket();"
        "s.setsockopt(S.SOL_SOCKET,S.SO_REUSEADDR,1);s.bind(('127.0.0.1',${self.port}));"
        "s.listen(64);[c.close() for c,_ in iter(s.accept,None)]\\\""
    )
    os.makedirs(repo)
    git(repo, "init", "-q", "-b", "main")
    with open(os.path.join(repo, "binky.toml"), "w") as f:
        f.write(
            f'[project]\nname = "bench"\nport_range = [{low}, {low + 999}]\n\n'
            f'[services.web]\ncmd = "{server}"\nurl = true\n'
        )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    results = {}
    try:
        cli(binky, repo, env, "port", "--proxy", str(free_port()), "--https", str(free_port()))
        t = time.perf_counter()
        names = [f"w{i:02}" for i in range(a.worlds)]
        for n in names:
            cli(binky, repo, env, "up", n, "-q", "--no-wait")
        for n in names:
            cli(binky, repo, env, "wait", "-q", "--timeout", "300s", "--", n)
        print(f"{a.worlds} worlds up in {time.perf_counter() - t:.1f}s", file=sys.stderr)

        mcp = Mcp(binky, repo, env)
        one = names[len(names) // 2]
        cases = {
            "list": (
                lambda: mcp.call("list", {}),
                lambda: cli(binky, repo, env, "status", "--json"),
            ),
            "status (every world)": (
                lambda: mcp.call("status", {}),
                lambda: cli(binky, repo, env, "status", "--json"),
            ),
            "status (every world, detail)": (
                lambda: mcp.call("status", {"compact": False}),
                lambda: cli(binky, repo, env, "status", "--json"),
            ),
            "status (one world)": (
                lambda: mcp.call("status", {"world": one}),
                lambda: cli(binky, repo, env, "status", "--json", "--", one),
            ),
            "wait (a ready world)": (
                lambda: mcp.call("wait", {"world": one}),
                lambda: cli(binky, repo, env, "wait", "--json", "-q", "--", one),
            ),
        }
        # One warm-up of each, then the runs interleaved so that both see the same machine.
        for m, c in cases.values():
            m()
            c()
        samples = {k: ([], [], 0, 0) for k in cases}
        for _ in range(a.runs):
            for k, (m, c) in cases.items():
                mm, mb = m()
                cm, cb = c()
                ms, cs, _, _ = samples[k]
                ms.append(mm)
                cs.append(cm)
                samples[k] = (ms, cs, mb, cb)
        mcp.close()
        for k, (ms, cs, mb, cb) in samples.items():
            results[k] = {
                "mcp": stats(ms),
                "cli": stats(cs),
                "mcp_bytes": mb,
                "cli_bytes": cb,
                "mcp_minus_cli_median_ms": round(statistics.median(ms) - statistics.median(cs), 2),
            }
        print(f"{'':30} {'MCP median':>11} {'p90':>8} {'CLI median':>11} {'p90':>8} {'MCP bytes':>10} {'CLI bytes':>10}")
        for k, r in results.items():
            print(
                f"{k:30} {r['mcp']['median_ms']:>9.1f}ms {r['mcp']['p90_ms']:>6.1f}ms "
                f"{r['cli']['median_ms']:>9.1f}ms {r['cli']['p90_ms']:>6.1f}ms "
                f"{r['mcp_bytes']:>10} {r['cli_bytes']:>10}"
            )
        if a.json:
            with open(a.json, "w") as f:
                json.dump(
                    {
                        "binky": binky,
                        "worlds": a.worlds,
                        "runs": a.runs,
                        "results": results,
                    },
                    f,
                    indent=2,
                )
                f.write("\n")
    finally:
        # Every world goes, then the daemon; nothing is left behind.
        out = subprocess.run(
            [binky, "status", "--json"], cwd=repo, env=env, capture_output=True, text=True
        )
        try:
            worlds = [w["name"] for w in json.loads(out.stdout)["worlds"]]
        except (ValueError, KeyError):
            worlds = []
        for n in worlds:
            subprocess.run(
                [binky, "remove", n, "--force", "-q", "--no-wait"], cwd=repo, env=env, capture_output=True
            )
        deadline = time.time() + 120
        while time.time() < deadline:
            out = subprocess.run(
                [binky, "status", "--json"], cwd=repo, env=env, capture_output=True, text=True
            )
            try:
                if not json.loads(out.stdout)["worlds"]:
                    break
            except (ValueError, KeyError):
                break
            time.sleep(0.5)
        subprocess.run([binky, "daemon", "stop"], cwd=repo, env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
