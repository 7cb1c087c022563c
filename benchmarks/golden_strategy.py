#!/usr/bin/env python3
"""CREATE DATABASE ... TEMPLATE ... STRATEGY WAL_LOG against FILE_COPY, by template size.

Two private PostgreSQL servers (Debian's binaries, the newest under /usr/lib/postgresql):
  disk    data on the VM's disk, PostgreSQL's defaults (fsync on): what binky's managed
          server runs with;
  tmpfs   data in /dev/shm with fsync, full_page_writes and synchronous_commit off: what the
          tests' servers run with.
On each, templates of growing size in two shapes (--mode says what precedes each copy):
  many    a Django-like schema: TABLES tables (a bigint key, text and time columns, an index
          on the text) with their rows spread over them;
  one     one table holding all the rows.
Each template is copied ROUNDS times with each strategy, alternating which goes first, each
copy dropped after; the median (min-max) of the CREATE DATABASE alone is reported, with the
WAL it wrote.

  ~/.cache/binky-test/frameworks/bin/python benchmarks/golden_strategy.py \
      [--sizes 16,32,64,128,256] [--rounds 7] [--tables 300] [--servers disk,tmpfs] \
      [--json benchmarks/golden-strategy-results.json]

Needs psycopg2 (the frameworks venv has it) and PostgreSQL 15+. As root, the servers run as
the `postgres` user.
"""

import argparse
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import psycopg2

from common import busy_cores, free_port


def pg_bin():
    roots = sorted(
        (d for d in os.listdir("/usr/lib/postgresql") if d.isdigit()), key=int
    )
    if not roots:
        sys.exit("PostgreSQL is not installed (apt-get install postgresql)")
    return f"/usr/lib/postgresql/{roots[-1]}/bin"


class Server:
    def __init__(self, name, parent, fast):
        self.name = name
        self.bin = pg_bin()
        self.dir = tempfile.mkdtemp(prefix=f"golden-strategy-{name}-", dir=parent)
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.run(["initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"])
        opts = ["-c", "listen_addresses=127.0.0.1", "-p", str(self.port), "-k", self.dir]
        if fast:
            opts += ["-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off"]
        self.proc = subprocess.Popen(
            self.cmd(["postgres", "-D", self.data] + opts),
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, "log"), "w"),
        )
        for _ in range(300):
            try:
                self.connect("postgres").close()
                break
            except psycopg2.OperationalError:
                time.sleep(0.05)
        else:
            sys.exit(f"{name}: the server did not start; see {self.dir}/log")

    def cmd(self, argv):
        argv = [os.path.join(self.bin, argv[0])] + argv[1:]
        return (["runuser", "-u", "postgres", "--"] if self.as_postgres else []) + argv

    def run(self, argv):
        subprocess.run(self.cmd(argv), check=True, stdout=subprocess.DEVNULL)

    def connect(self, db):
        c = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=db)
        c.autocommit = True
        return c

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def fill(srv, name, shape, mib, tables):
    admin = srv.connect("postgres")
    cur = admin.cursor()
    cur.execute(f"DROP DATABASE IF EXISTS {name}")
    cur.execute(f"CREATE DATABASE {name}")
    db = srv.connect(name)
    c = db.cursor()
    n = tables if shape == "many" else 1
    for i in range(n):
        c.execute(
            f"CREATE TABLE t{i} (id bigserial PRIMARY KEY, name text NOT NULL, "
            f"body text, created timestamptz NOT NULL DEFAULT now())"
        )
        c.execute(f"CREATE INDEX t{i}_name ON t{i} (name)")
    c.execute("SELECT pg_database_size(current_database())")
    base = c.fetchone()[0]
    # About 300 bytes a row with its index entries; fill towards the size asked for.
    want = max(0, mib * 1024 * 1024 - base)
    rows = want // 300
    per = rows // n
    for i in range(n):
        if per:
            c.execute(
                f"INSERT INTO t{i} (name, body) SELECT 'name ' || g, repeat('x', 180) "
                f"FROM generate_series(1, {per}) g"
            )
    c.execute("VACUUM (FREEZE, ANALYZE)")
    c.execute("SELECT pg_database_size(current_database()), "
              "(SELECT count(*) FROM pg_class WHERE relkind IN ('r','i','t','S'))")
    size, rels = c.fetchone()
    db.close()
    cur.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
    cur.execute("CHECKPOINT")
    admin.close()
    return size, rels


def prepare(srv, mode):
    """Put the server in the state a copy starts from (see --mode)."""
    admin = srv.connect("postgres")
    cur = admin.cursor()
    if mode == "settled":
        cur.execute("CHECKPOINT")
        time.sleep(1)
    elif mode == "dirty":
        # 16 MiB of fresh writes elsewhere on the server, not checkpointed (a seed just ran).
        cur.execute("SELECT 1 FROM pg_database WHERE datname = 'scratch'")
        if not cur.fetchone():
            cur.execute("CREATE DATABASE scratch")
        db = srv.connect("scratch")
        c = db.cursor()
        c.execute("DROP TABLE IF EXISTS junk")
        c.execute("CREATE TABLE junk AS SELECT g AS id, repeat('y', 200) AS body "
                  "FROM generate_series(1, 65000) g")
        db.close()
    admin.close()


def copy_once(srv, template, strategy):
    admin = srv.connect("postgres")
    cur = admin.cursor()
    cur.execute("SELECT pg_current_wal_lsn()")
    lsn0 = cur.fetchone()[0]
    t0 = time.perf_counter()
    cur.execute(f"CREATE DATABASE copy_{strategy.lower()} TEMPLATE {template} STRATEGY {strategy}")
    ms = (time.perf_counter() - t0) * 1000
    cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn0,))
    wal = float(cur.fetchone()[0])
    cur.execute(f"DROP DATABASE copy_{strategy.lower()}")
    admin.close()
    return ms, wal


def median_range(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def wait_quiet(budget, limit=0.25):
    """Wait (at most `budget` s in all) until the machine is quiet for a second; what it was."""
    start = time.monotonic()
    busy = busy_cores()
    while busy > limit and time.monotonic() - start < budget[0]:
        busy = busy_cores()
    budget[0] = max(0.0, budget[0] - (time.monotonic() - start))
    return busy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16,32,64,128,256")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tables", type=int, default=300)
    ap.add_argument("--shapes", default="many,one")
    ap.add_argument("--servers", default="disk,tmpfs")
    ap.add_argument("--json")
    ap.add_argument("--mode", default="after-drop",
                    help="what precedes each copy: after-drop (the copy before was just dropped), "
                         "settled (CHECKPOINT, then 1 s), dirty (16 MiB written elsewhere, not checkpointed)")
    ap.add_argument("--quiet-wait", type=float, default=600,
                    help="seconds in all to wait for a quiet machine before each size (0: off)")
    args = ap.parse_args()
    budget = [args.quiet_wait]
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {"machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()},
               "mode": args.mode, "runs": []}
    servers = []
    try:
        for name in args.servers.split(","):
            if name == "disk":
                servers.append(Server("disk", os.environ.get("BENCH_DISK_DIR", "/var/tmp"), False))
            else:
                servers.append(Server("tmpfs", "/dev/shm", True))
        print(f"{'server':6} {'shape':5} {'MiB':>6} {'rels':>5}  {'WAL_LOG ms':>22}  {'FILE_COPY ms':>22}  {'WAL MiB':>7}  busy before (max)")
        for srv in servers:
            for shape in args.shapes.split(","):
                # The smallest template of a shape is its empty tables; sizes below are skipped.
                base, _ = fill(srv, "tpl", shape, 0, args.tables)
                base_mib = base / 1048576
                shape_sizes = [0] + [m for m in sizes if m > base_mib * 1.2]
                for mib in shape_sizes:
                    size, rels = fill(srv, "tpl", shape, mib, args.tables)
                    times = {"WAL_LOG": [], "FILE_COPY": []}
                    wal = {"WAL_LOG": [], "FILE_COPY": []}
                    busy = []
                    for r in range(args.rounds):
                        busy.append(wait_quiet(budget) if budget[0] > 0 else busy_cores(0.3))
                        order = ["WAL_LOG", "FILE_COPY"] if r % 2 == 0 else ["FILE_COPY", "WAL_LOG"]
                        for s in order:
                            prepare(srv, args.mode)
                            ms, w = copy_once(srv, "tpl", s)
                            times[s].append(ms)
                            wal[s].append(w)
                    busy = max(busy)
                    row = {
                        "server": srv.name,
                        "shape": shape,
                        "mib": round(size / 1048576, 1),
                        "relations": rels,
                        "wal_log_ms": median_range(times["WAL_LOG"]),
                        "file_copy_ms": median_range(times["FILE_COPY"]),
                        "wal_log_wal_mib": statistics.median(wal["WAL_LOG"]) / 1048576,
                        "other_busy_cores": round(busy, 2),
                        "all_ms": times,
                    }
                    results["runs"].append(row)
                    f = lambda d: f"{d['median']:7.0f} ({d['min']:.0f}-{d['max']:.0f})"
                    print(
                        f"{srv.name:6} {shape:5} {row['mib']:6.1f} {rels:5}  {f(row['wal_log_ms']):>22}  "
                        f"{f(row['file_copy_ms']):>22}  {row['wal_log_wal_mib']:7.1f}  {busy:.2f}",
                        flush=True,
                    )
        results["machine"]["load_after"] = os.getloadavg()
    finally:
        for s in servers:
            s.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
