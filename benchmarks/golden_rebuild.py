#!/usr/bin/env python3
"""A golden template after one new migration: grown from the template before, against built
from an empty database; and a world after every world was removed (the template kept).

For each tool (Django: N CreateModel migrations of an app; yoyo: N SQL files) and round, a
project of its own on binky's managed PostgreSQL (no admin_url, as a user runs it), with a
small seed:
  w0   N migrations: the first template, from an empty database
  w1   one more migration, committed: the new template grows from w0's
  w2   the same N+1 migrations after `golden rm` of both: built from an empty database
  w3   after removing w0, w1 and w2: cloned from the kept template, nothing built
Figures: each template's build time as binky recorded it (`golden ls --json` build_ms:
provision or copy, migrate, seal, copy, seed, seal), the wall time of each `binky up`, and
how binky says each template was built.

  python3 benchmarks/golden_rebuild.py [--migrations 300] [--rounds 3] [--tools django,yoyo]
      [--json benchmarks/golden-rebuild-results.json]

binky: $BINKY, else target/release/binky (built if missing). Django and yoyo: the venv
scripts/test makes ($BINKY_TEST_FRAMEWORKS, default ~/.cache/binky-test/frameworks).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from common import busy_cores

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SETTINGS = """import os
from urllib.parse import unquote, urlparse

u = urlparse(os.environ["DATABASE_URL"])
SECRET_KEY = "bench"
INSTALLED_APPS = ["shop"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": u.path.lstrip("/"),
        "USER": unquote(u.username),
        "PASSWORD": unquote(u.password),
        "HOST": u.hostname,
        "PORT": u.port,
    }
}
"""

MANAGE = """import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "site_conf.settings")
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"""


def django_migration(i):
    deps = f'[("shop", "{i - 1:04}_m{i - 1:04}")]' if i > 1 else "[]"
    return (
        "from django.db import migrations, models\n\n\n"
        "class Migration(migrations.Migration):\n"
        f"    dependencies = {deps}\n"
        "    operations = [\n"
        "        migrations.CreateModel(\n"
        f'            name="M{i:04}",\n'
        '            fields=[("id", models.BigAutoField(primary_key=True)), ("title", models.TextField()),'
        ' ("created", models.DateTimeField(null=True))],\n'
        "        ),\n"
        "    ]\n"
    )


TOOLS = {
    "django": {
        "migrate": "python manage.py migrate --noinput",
        "seed": "psql \\\"$DATABASE_URL\\\" -X -q -v ON_ERROR_STOP=1 -c \\\"insert into shop_m0001 (title) select 'row ' || g from generate_series(1, 1000) g\\\"",
        "files": lambda n: dict(
            [("manage.py", MANAGE), ("site_conf/__init__.py", ""), ("site_conf/settings.py", SETTINGS),
             ("shop/__init__.py", ""), ("shop/models.py", "from django.db import models\n"),
             ("shop/migrations/__init__.py", "")]
            + [(f"shop/migrations/{i:04}_m{i:04}.py", django_migration(i)) for i in range(1, n + 1)]
        ),
        "one_more": lambda n: (f"shop/migrations/{n + 1:04}_m{n + 1:04}.py", django_migration(n + 1)),
    },
    "yoyo": {
        "migrate": "yoyo apply --batch --database \\\"$DATABASE_URL\\\"",
        "seed": "psql \\\"$DATABASE_URL\\\" -X -q -v ON_ERROR_STOP=1 -c \\\"insert into t0001 select g, 'row ' || g from generate_series(1, 1000) g\\\"",
        "files": lambda n: dict(
            [("yoyo.ini", "[DEFAULT]\nsources = db/changes\n")]
            + [(f"db/changes/{i:04}.create-t{i:04}.sql", f"create table t{i:04} (id int primary key, title text);\n")
               for i in range(1, n + 1)]
        ),
        "one_more": lambda n: (f"db/changes/{n + 1:04}.create-t{n + 1:04}.sql",
                               f"create table t{n + 1:04} (id int primary key, title text);\n"),
    },
}


class Bench:
    def __init__(self, binky, venv, work, quiet_budget):
        self.binky = binky
        self.work = work
        self.home = os.path.join(work, "home")
        self.env = dict(os.environ, BINKY_HOME=self.home,
                        PATH=f"{venv}/bin:{os.environ.get('PATH', '')}")
        self.env.pop("BINKY_WORKTREE_ROOT", None)
        self.quiet_budget = quiet_budget

    def run(self, args, cwd, check=True):
        out = subprocess.run([self.binky] + args, cwd=cwd, env=self.env,
                             capture_output=True, text=True)
        if check and out.returncode != 0:
            sys.exit(f"binky {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        return out

    def quiet(self):
        start = time.monotonic()
        busy = busy_cores()
        while busy > 0.3 and time.monotonic() - start < self.quiet_budget:
            busy = busy_cores()
        self.quiet_budget = max(0.0, self.quiet_budget - (time.monotonic() - start))
        return busy

    def up(self, world, cwd):
        busy = self.quiet()
        t0 = time.monotonic()
        self.run(["up", world, "--timeout", "30m"], cwd)
        return time.monotonic() - t0, busy

    def steps(self, world, cwd):
        """migrate's and seed's own times in the world's template build (from its events)."""
        text = self.run(["events", world, "-n", "200"], cwd).stdout
        out = {"migrate_s": 0.0, "seed_s": 0.0}
        for line in text.splitlines():
            for which in ("migrate", "seed"):
                m = re.search(rf"db: {which} finished in ([0-9.]+)s", line)
                if m:
                    out[f"{which}_s"] += float(m.group(1))
        return out

    def goldens(self, cwd):
        return json.loads(self.run(["golden", "ls", "--json"], cwd).stdout)

    def git(self, cwd, *args):
        subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args],
                       cwd=cwd, check=True, capture_output=True)


def write(repo, files):
    for f, text in files.items():
        p = os.path.join(repo, f)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(text)


def one_round(b, tool, n, r, port):
    spec = TOOLS[tool]
    repo = os.path.join(b.work, f"{tool}{r}")
    os.makedirs(repo)
    b.git(repo, "init", "-q", "-b", "main")
    write(repo, {"binky.toml": (
        f'[project]\nname = "{tool}{r}"\nport_range = [{port}, {port + 20}]\n\n'
        f'[services.db]\nadapter = "postgres"\nmigrate = "{spec["migrate"]}"\n'
        f'seed = "{spec["seed"]}"\nclone_from = "golden"\n')})
    write(repo, spec["files"](n))
    b.git(repo, "add", "-A")
    b.git(repo, "commit", "-qm", f"{n} migrations")
    row = {"tool": tool, "round": r, "migrations": n}
    row["up_w0_s"], row["busy_w0"] = b.up("w0", repo)
    first = b.goldens(repo)
    assert len(first) == 1, first
    row["empty_n_ms"], row["how_w0"] = first[0]["build_ms"], first[0]["how"]
    row["steps_w0"] = b.steps("w0", repo)
    f, text = spec["one_more"](n)
    write(repo, {f: text})
    b.git(repo, "add", "-A")
    b.git(repo, "commit", "-qm", "one more migration")
    row["up_w1_s"], row["busy_w1"] = b.up("w1", repo)
    second = [g for g in b.goldens(repo) if g["key"] != first[0]["key"]]
    row["grown_ms"], row["how_w1"] = second[0]["build_ms"], second[0]["how"]
    row["steps_w1"] = b.steps("w1", repo)
    for g in b.goldens(repo):
        b.run(["golden", "rm", g["key"]], repo)
    deadline = time.monotonic() + 120
    while b.goldens(repo) and time.monotonic() < deadline:
        time.sleep(0.2)
    row["up_w2_s"], row["busy_w2"] = b.up("w2", repo)
    third = b.goldens(repo)
    row["empty_n1_ms"], row["how_w2"] = third[0]["build_ms"], third[0]["how"]
    row["steps_w2"] = b.steps("w2", repo)
    for w in ["w0", "w1", "w2"]:
        b.run(["remove", w, "--force"], repo)
    row["up_w3_s"], row["busy_w3"] = b.up("w3", repo)
    row["w3_built"] = len(b.goldens(repo)) != 1 or b.goldens(repo)[0]["key"] != third[0]["key"]
    b.run(["remove", "w3", "--force"], repo)
    # The next round starts with no template.
    for g in b.goldens(repo):
        b.run(["golden", "rm", g["key"]], repo)
    deadline = time.monotonic() + 120
    while b.goldens(repo) and time.monotonic() < deadline:
        time.sleep(0.2)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--migrations", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tools", default="django,yoyo")
    ap.add_argument("--quiet-wait", type=float, default=600)
    ap.add_argument("--json")
    args = ap.parse_args()
    binky = os.environ.get("BINKY") or os.path.join(ROOT, "target/release/binky")
    if not os.path.exists(binky):
        subprocess.run(["cargo", "build", "--release", "-q", "--bin", "binky"], cwd=ROOT, check=True)
    venv = os.environ.get("BINKY_TEST_FRAMEWORKS") or os.path.expanduser("~/.cache/binky-test/frameworks")
    if not os.path.exists(os.path.join(venv, "bin/yoyo")):
        sys.exit(f"no Django/yoyo venv at {venv}: run ./scripts/test once (it makes it)")
    work = tempfile.mkdtemp(prefix="golden-rebuild-")
    b = Bench(binky, venv, work, args.quiet_wait)
    rows = []
    try:
        b.run(["port", "--proxy", "0", "--https", "0"], work)
        # The managed server is started (initdb) by a warm-up world, not by the first template.
        warm = os.path.join(work, "warmup")
        os.makedirs(warm)
        b.git(warm, "init", "-q", "-b", "main")
        write(warm, {"binky.toml": '[project]\nname = "warmup"\nport_range = [45900, 45920]\n\n'
                                    '[services.db]\nadapter = "postgres"\n'})
        b.git(warm, "add", "-A")
        b.git(warm, "commit", "-qm", "warm up")
        b.run(["up", "w"], warm)
        b.run(["remove", "w", "--force"], warm)
        port = 46000
        for tool in args.tools.split(","):
            for r in range(args.rounds):
                row = one_round(b, tool, args.migrations, r, port)
                port += 25
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        subprocess.run([binky, "servers", "stop"], env=b.env, capture_output=True)
        subprocess.run([binky, "daemon", "stop"], env=b.env, capture_output=True)
        data = os.path.join(b.home, "servers/postgres/data")
        if os.path.islink(data):
            shutil.rmtree(os.path.dirname(os.path.realpath(data)), ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"{'tool':7} {'N':>4}  {'from empty, N':>15}  {'grown, N+1':>12}  {'from empty, N+1':>16}  "
          f"{'up: grown':>10}  {'up: empty':>10}  {'up after all removed':>21}")
    for tool in args.tools.split(","):
        rs = [r for r in rows if r["tool"] == tool]
        if not rs:
            continue
        med = lambda k: statistics.median(r[k] for r in rs)
        rng = lambda k: f"{min(r[k] for r in rs):.0f}-{max(r[k] for r in rs):.0f}"
        print(f"{tool:7} {rs[0]['migrations']:4}  {med('empty_n_ms') / 1000:7.1f} s        "
              f"{med('grown_ms') / 1000:7.1f} s    {med('empty_n1_ms') / 1000:7.1f} s         "
              f"{med('up_w1_s'):7.1f} s  {med('up_w2_s'):7.1f} s  {med('up_w3_s'):7.2f} s")
        print(f"        ms ranges: empty N {rng('empty_n_ms')}, grown {rng('grown_ms')}, empty N+1 {rng('empty_n1_ms')}")
        for w, k in (("w0", "empty_n_ms"), ("w1", "grown_ms"), ("w2", "empty_n1_ms")):
            mig = statistics.median(r[f"steps_{w}"]["migrate_s"] for r in rs)
            seed = statistics.median(r[f"steps_{w}"]["seed_s"] for r in rs)
            print(f"        {w}: migrate {mig:.2f} s, seed {seed:.2f} s, the rest of the build "
                  f"(provision or copies, seals) {med(k) / 1000 - mig - seed:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_after": os.getloadavg(), "cpus": os.cpu_count(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
