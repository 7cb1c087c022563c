//! Slices benchmark: how long binky (this repo) and binky 0.1.2 (the Python reference) take
//! to provision and to tear down a PostgreSQL slice and a Redis slice of one world, on the
//! same servers, in the same run, reporting ratios (binky / 0.1.2).
//!
//! One private PostgreSQL (`initdb` in a temp dir under `/dev/shm`, or `$TMPDIR` with
//! `--pg-on-disk`; scram, `fsync=off`) and one private `redis-server` (`requirepass`, no
//! persistence) serve the whole run; both tools reach them through
//! `admin_url = "${env.PG_ADMIN}"` / `"${env.REDIS_ADMIN}"`.
//!
//! Each tool gets three committed `binky.toml`s (three repos under one `BINKY_HOME`, one
//! daemon): `bare` (no service at all), `pg` (one `postgres` adapter service) and `redis`
//! (one `redis` adapter service). For each of `--worlds` worlds `wNN`, one after the other,
//! and for each config, each tool runs `up wNN` (timed; the slice is provisioned inside it),
//! the slice is checked on the server, `remove wNN --force` (timed), and the slice is checked
//! gone. Order of configs rotates and the tool that goes first alternates per world.
//!
//! Reported, per adapter and tool: median and p90 of the `up` and `remove` wall times, and the
//! slice's own cost: the `up` (`remove`) of the adapter world minus the `up` (`remove`) of the
//! bare world of the same index, median of those paired differences (and, in the JSON, the
//! difference of the medians).
//!
//! Two references are measured after each world, without any CLI or daemon:
//! - the server floor: a fresh admin connection + `CREATE DATABASE` (Redis: `ACL SETUSER`),
//!   and a fresh connection + `DROP DATABASE … WITH (FORCE)` (`ACL DELUSER`);
//! - each tool's adapter alone, in process: binky's `provision` + `resolve` and `teardown`
//!   (this crate's library), 0.1.2's the same verbs in one Python process (drivers imported
//!   before the clock starts).
//!
//! Every slice is checked: after `up` it is on the server (binky: database + role / ACL user,
//! and its URL logs in as the slice's user; 0.1.2: database / entry in its `binky:slices`
//! map), and after `remove` the server is exactly as before the `up`. At the end, the servers
//! are compared with their state before the run.
//!
//! Run: `cargo bench --bench slices [-- --worlds N --pg-on-disk --json PATH]`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use binky_testkit::args::{exit_on_failure, or_exit, Flags};
use binky_testkit::procs::{loadavg, machine_tools};
use binky_testkit::run::{capture, Run};
use binky_testkit::servers::postgres::{pg_bin_dir, psql, Options};
use binky_testkit::servers::redis::connect as redis_connect;
use binky_testkit::stats::{median, ms, p90, ratio, ratio_value, summary_p90};
use binky_testkit::stop::{check_stop, install_signal_handlers};
use binky_testkit::table::{fmt_ms, Table, MEDIAN_P90_COLUMNS};
use binky_testkit::tool::{binky012_imports, binky012_or_exit, binky012_python, Kind};
use binky_testkit::{net::free_port, random_secret, Res};

const INSTALL_HINT: &str = "binky 0.1.2 (the Python reference) with its postgres and redis \
extras is not installed.\nInstall it into a venv and point the benchmark at it:\n\n\
    python3 -m venv .venv-ref && .venv-ref/bin/pip install \"binky[postgres,redis]==0.1.2\"\n\
    BINKY012=$PWD/.venv-ref/bin/binky cargo bench --bench slices\n\n\
(the benchmark also looks for /work/ref/venv/bin/binky and for `binky012` on PATH)";

const SERVERS_HINT: &str = "PostgreSQL (initdb, postgres, psql) and redis-server are needed: \
`apt-get install postgresql redis-server`";

// ---------------------------------------------------------------------------------------------
// Interrupts: a flag, so that Ctrl-C unwinds through the teardown guards.

// ---------------------------------------------------------------------------------------------
// Arguments.

struct Args {
    worlds: usize,
    /// Where PostgreSQL's cluster goes: `/dev/shm` (tmpfs) unless `--pg-on-disk`.
    pg_on_disk: bool,
    json: Option<PathBuf>,
}

const USAGE: &str = "usage: cargo bench --bench slices -- [--worlds N] [--pg-on-disk] \
[--json PATH]\n\
  --worlds N    worlds per adapter and tool, one after the other (default 20)\n\
  --pg-on-disk  put PostgreSQL's data in the temp dir ($TMPDIR or /tmp) instead of /dev/shm\n\
  --json PATH   also write the results as JSON";

fn parse_args() -> Res<Args> {
    let mut a = Args {
        worlds: 20,
        pg_on_disk: false,
        json: None,
    };
    a.json = Flags::from_env(USAGE).each(|f, flag| {
        match flag {
            "--worlds" => {
                a.worlds = f.number_in("--worlds", 1..=99)?;
            }
            "--pg-on-disk" => a.pg_on_disk = true,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(a)
}

// ---------------------------------------------------------------------------------------------
// /proc helpers.

// ---------------------------------------------------------------------------------------------
// Statistics.

fn diffs(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

// ---------------------------------------------------------------------------------------------
// The shared servers.

/// A private PostgreSQL cluster (the kit's, fast and unsafe) under `parent` or the temp dir;
/// stopped and removed on drop.
struct PgServer {
    pg: binky_testkit::servers::postgres::PgServer,
    version: String,
}

binky_testkit::deref_to!(PgServer, pg: binky_testkit::servers::postgres::PgServer);

impl PgServer {
    /// A cluster under `parent` (`None`: the temp dir).
    fn start(parent: Option<&Path>) -> Res<PgServer> {
        let bin_dir = pg_bin_dir().ok_or(SERVERS_HINT)?;
        let version = capture(&bin_dir.join("postgres").to_string_lossy(), &["--version"])
            .unwrap_or_default();
        let pg = binky_testkit::servers::postgres::PgServer::start_with(Options {
            bin_dir: Some(bin_dir),
            parent: parent.map(Path::to_path_buf),
            prefix: "binky-bench-pg-".into(),
            ..Options::default()
        })?;
        Ok(PgServer { pg, version })
    }

    /// What exists on the server: `db:<name>` for every non-template database and
    /// `role:<name>` for every role but the built-in `pg_*` ones.
    fn snapshot(&self) -> Res<BTreeSet<String>> {
        let rows = psql(
            &self.bin_dir,
            &self.admin_url,
            "SELECT 'db:' || datname FROM pg_database WHERE NOT datistemplate \
             UNION ALL SELECT 'role:' || rolname FROM pg_roles WHERE left(rolname, 3) <> 'pg_'",
        )
        .map_err(|e| format!("postgres snapshot: {e}"))?;
        Ok(rows.into_iter().filter_map(|mut r| r.pop()).collect())
    }
}

/// A private `redis-server` (the kit's: `requirepass`, no persistence) on a free loopback
/// port. Stopped and its directory removed on drop.
struct RedisServer {
    redis: binky_testkit::servers::redis::RedisServer,
    version: String,
}

binky_testkit::deref_to!(RedisServer, redis: binky_testkit::servers::redis::RedisServer);

impl RedisServer {
    fn start() -> Res<RedisServer> {
        if binky_testkit::servers::redis::redis_binary().is_none() {
            return Err(SERVERS_HINT.into());
        }
        let redis = binky_testkit::servers::redis::RedisServer::start()?;
        let version = capture(&redis.bin.to_string_lossy(), &["--version"]).unwrap_or_default();
        Ok(RedisServer { redis, version })
    }

    /// What exists on the server: `user:<name>` for every ACL user, `keys:db<N>=<count>` for
    /// every database holding keys, and `map:<field>=<db>` for every entry of binky 0.1.2's
    /// slice map (the hash `binky:slices` in database 0).
    fn snapshot(&self) -> Res<BTreeSet<String>> {
        let e = |e: redis::RedisError| format!("redis snapshot: {e}");
        let mut con = redis_connect(&self.admin_url)?;
        let mut out = BTreeSet::new();
        let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut con).map_err(e)?;
        out.extend(users.into_iter().map(|u| format!("user:{u}")));
        let info: String = redis::cmd("INFO")
            .arg("keyspace")
            .query(&mut con)
            .map_err(e)?;
        for line in info.lines().filter(|l| l.starts_with("db")) {
            // db3:keys=1,expires=0,avg_ttl=0
            if let Some((db, rest)) = line.trim().split_once(':') {
                let keys = rest.split(',').next().unwrap_or(rest);
                out.insert(format!("keys:{db}={}", keys.trim_start_matches("keys=")));
            }
        }
        let map: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg("binky:slices")
            .query(&mut con)
            .map_err(e)?;
        out.extend(map.into_iter().map(|(k, v)| format!("map:{k}={v}")));
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// The configs and the two tools.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cfg {
    /// No service: the fixed cost of `up` / `remove` of a world.
    Bare,
    /// One `postgres` adapter service.
    Pg,
    /// One `redis` adapter service.
    Redis,
}

const CFGS: [Cfg; 3] = [Cfg::Bare, Cfg::Pg, Cfg::Redis];

impl Cfg {
    fn idx(self) -> usize {
        match self {
            Cfg::Bare => 0,
            Cfg::Pg => 1,
            Cfg::Redis => 2,
        }
    }

    /// The project name, which is also the repo's directory name.
    fn project(self) -> &'static str {
        match self {
            Cfg::Bare => "bare",
            Cfg::Pg => "pg",
            Cfg::Redis => "redis",
        }
    }

    fn toml(self) -> String {
        let head = format!("[project]\nname = \"{}\"\n", self.project());
        match self {
            Cfg::Bare => head,
            Cfg::Pg => format!(
                "{head}\n[services.db]\nadapter = \"postgres\"\nadmin_url = \"${{env.PG_ADMIN}}\"\n"
            ),
            Cfg::Redis => format!(
                "{head}\n[services.cache]\nadapter = \"redis\"\nadmin_url = \"${{env.REDIS_ADMIN}}\"\n"
            ),
        }
    }
}

/// Timings of one tool, per config: `up` and `remove` wall times in ms, world by world.
#[derive(Default)]
struct Times {
    up: [Vec<f64>; 3],
    remove: [Vec<f64>; 3],
}

/// A tool with one repo per config, and what the run found.
struct Tool {
    base: binky_testkit::tool::Tool,
    /// Problems found while checking slices (missing after `up`, left after `remove`).
    problems: Vec<String>,
    times: Times,
}

binky_testkit::deref_to!(Tool, base: binky_testkit::tool::Tool);

impl Tool {
    /// `env` (`PG_ADMIN` and `REDIS_ADMIN`) is given to every command.
    fn new(kind: Kind, bin: PathBuf, env: Vec<(String, String)>) -> Res<Tool> {
        let prefix = match kind {
            Kind::Rust => "binky-bench-slices-rs-",
            Kind::Py => "binky-bench-slices-py-",
        };
        let mut base = binky_testkit::tool::Tool::new(kind, bin, prefix, env)?;
        base.daemon_dir = base.root.join(Cfg::Bare.project());
        for cfg in CFGS {
            let repo = base.root.join(cfg.project());
            fs::create_dir_all(&repo).map_err(|e| format!("{}: {e}", repo.display()))?;
            fs::write(repo.join("binky.toml"), cfg.toml())
                .map_err(|e| format!("binky.toml: {e}"))?;
            binky_testkit::git::bench_repo(&repo, "binky.toml", &base.home, &base.root)?;
        }
        Ok(Tool {
            base,
            problems: Vec::new(),
            times: Times::default(),
        })
    }

    fn repo(&self, cfg: Cfg) -> PathBuf {
        self.root.join(cfg.project())
    }

    fn run_ok(&self, cfg: Cfg, args: &[&str], timeout: Duration) -> Res<Run> {
        self.base.run_ok(&self.repo(cfg), args, timeout)
    }

    fn start_daemon(&mut self) -> Res<()> {
        if self.kind == Kind::Rust {
            // Keep binky's proxy off ports 80/443.
            let (p, q) = (free_port().to_string(), free_port().to_string());
            self.run_ok(
                Cfg::Bare,
                &["port", "--proxy", &p, "--https", &q],
                Duration::from_secs(30),
            )?;
        }
        self.run_ok(Cfg::Bare, &["daemon", "start"], Duration::from_secs(60))?;
        Ok(())
    }

    /// `binky up NAME` in `cfg`'s repo, timed; the world (and its slice) is ready when it
    /// returns 0.
    fn up(&mut self, cfg: Cfg, name: &str) -> Res<Duration> {
        check_stop()?;
        // Recorded before running: a failed or killed `up` may still leave the world behind.
        let repo = self.repo(cfg);
        self.base.live.push((repo, name.to_owned()));
        let args: &[&str] = match self.kind {
            Kind::Rust => &["up", name, "-q"],
            Kind::Py => &["up", name],
        };
        Ok(self.run_ok(cfg, args, Duration::from_secs(150))?.elapsed)
    }

    /// `binky remove NAME --force`, timed.
    fn remove(&mut self, cfg: Cfg, name: &str) -> Res<Duration> {
        let args: &[&str] = match self.kind {
            Kind::Rust => &["remove", name, "--force", "-q"],
            Kind::Py => &["remove", name, "--force"],
        };
        let r = self.run_ok(cfg, args, Duration::from_secs(60))?;
        let repo = self.repo(cfg);
        self.base.live.retain(|(r, w)| !(*r == repo && w == name));
        Ok(r.elapsed)
    }

    /// What the slice of world `name` in `cfg` looks like in a server snapshot.
    fn slice_marks(&self, cfg: Cfg, name: &str) -> Vec<String> {
        let project = cfg.project();
        match (self.kind, cfg) {
            (_, Cfg::Bare) => Vec::new(),
            // bk_<project>_<world>_<service>: a database and a role of that name.
            (Kind::Rust, Cfg::Pg) => {
                let n = format!("bk_{project}_{name}_db");
                vec![format!("db:{n}"), format!("role:{n}")]
            }
            // An ACL user; its keys live under `<name>:` (none here).
            (Kind::Rust, Cfg::Redis) => vec![format!("user:bk_{project}_{name}_cache")],
            // <project>_<world>: a database only.
            (Kind::Py, Cfg::Pg) => vec![format!("db:{project}_{name}")],
            // An entry `<project>_<world>` → logical DB index in the hash `binky:slices`.
            (Kind::Py, Cfg::Redis) => vec![format!("map:{project}_{name}=")],
        }
    }

    /// For binky: the slice's own URL (from `binky env --json`) logs in as the slice's user.
    fn check_slice_url(&self, cfg: Cfg, name: &str, pg: &PgServer) -> Res<()> {
        if self.kind != Kind::Rust || cfg == Cfg::Bare {
            return Ok(());
        }
        let r = self.run_ok(cfg, &["env", name, "--json"], Duration::from_secs(30))?;
        let v: Value = serde_json::from_str(&r.stdout).map_err(|e| format!("binky env: {e}"))?;
        let project = cfg.project();
        match cfg {
            Cfg::Pg => {
                let url = v["env"]["DB_URL"].as_str().ok_or("no DB_URL")?;
                let rows = psql(&pg.bin_dir, url, "SELECT current_user, current_database()")
                    .map_err(|e| format!("{name}: the slice URL does not log in: {e}"))?;
                let want = format!("bk_{project}_{name}_db");
                if rows.first().map(|r| r.join(" ")) != Some(format!("{want} {want}")) {
                    return Err(format!("{name}: slice URL reached {rows:?}, not {want}"));
                }
            }
            Cfg::Redis => {
                let url = v["env"]["CACHE_URL"].as_str().ok_or("no CACHE_URL")?;
                let mut con = redis_connect(url)?;
                let who: String = redis::cmd("ACL")
                    .arg("WHOAMI")
                    .query(&mut con)
                    .map_err(|e| format!("{name}: ACL WHOAMI with the slice URL: {e}"))?;
                let want = format!("bk_{project}_{name}_cache");
                if who != want {
                    return Err(format!("{name}: slice URL logs in as {who}, not {want}"));
                }
            }
            Cfg::Bare => {}
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// One measured world.

struct Servers {
    pg: PgServer,
    redis: RedisServer,
}

impl Servers {
    fn snapshot(&self, cfg: Cfg) -> Res<BTreeSet<String>> {
        match cfg {
            Cfg::Bare => Ok(BTreeSet::new()),
            Cfg::Pg => self.pg.snapshot(),
            Cfg::Redis => self.redis.snapshot(),
        }
    }
}

/// The server's own floor for one slice, without any tool: a fresh admin connection, then
/// `CREATE DATABASE` (timed from connect to done); a fresh connection, then `DROP DATABASE …
/// WITH (FORCE)`. Both tools must do at least this. Returns (create, drop) in ms.
fn pg_floor(admin_url: &str, name: &str) -> Res<(f64, f64)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let one = |sql: String| {
        rt.block_on(async {
            let start = Instant::now();
            let (client, conn) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls)
                .await
                .map_err(|e| format!("floor connect: {e}"))?;
            let task = tokio::spawn(conn);
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| format!("floor `{sql}`: {e}"))?;
            let took = ms(start.elapsed());
            drop(client);
            let _ = task.await;
            Ok::<f64, String>(took)
        })
    };
    let create = one(format!("CREATE DATABASE \"{name}\""))?;
    let drop = one(format!("DROP DATABASE \"{name}\" WITH (FORCE)"))?;
    Ok((create, drop))
}

/// The same for Redis: a fresh admin connection (AUTH), then `ACL SETUSER` of a user confined
/// to a prefix; a fresh connection, then `ACL DELUSER`. Returns (create, drop) in ms.
fn redis_floor(admin_url: &str, name: &str) -> Res<(f64, f64)> {
    let e = |e: redis::RedisError| format!("redis floor: {e}");
    let start = Instant::now();
    let mut con = redis_connect(admin_url)?;
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg(name)
        .arg("reset")
        .arg("on")
        .arg(format!(">{}", random_secret()))
        .arg(format!("~{name}:*"))
        .arg(format!("&{name}:*"))
        .arg("+@all")
        .query::<()>(&mut con)
        .map_err(e)?;
    let create = ms(start.elapsed());
    drop(con);
    let start = Instant::now();
    let mut con = redis_connect(admin_url)?;
    redis::cmd("ACL")
        .arg("DELUSER")
        .arg(name)
        .query::<()>(&mut con)
        .map_err(e)?;
    Ok((create, ms(start.elapsed())))
}

/// binky's adapter alone, in this process (no CLI, no daemon, no store): `provision` +
/// `resolve` of a slice (timed together), then `teardown`, each on its own fresh connection as
/// the adapter makes them. Returns (provision, teardown) in ms.
fn binky_adapter_alone(cfg: Cfg, admin_url: &str, name: &str) -> Res<(f64, f64)> {
    use binky::adapters::{Adapter, AdapterConfig, Slice};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let adapter: Box<dyn Adapter> = match cfg {
        Cfg::Pg => Box::new(binky::adapters::postgres::Postgres),
        _ => Box::new(binky::adapters::redis::Redis),
    };
    let config = AdapterConfig {
        admin_url: Some(admin_url.to_owned()),
        ..AdapterConfig::default()
    };
    let slice = Slice {
        name: name.to_owned(),
        secret: random_secret(),
    };
    rt.block_on(async {
        let e = |e: binky::adapters::AdapterError| format!("binky adapter, {name}: {e}");
        let start = Instant::now();
        adapter.provision(&slice, &config).await.map_err(e)?;
        adapter.resolve(&slice, &config).await.map_err(e)?;
        let provision = ms(start.elapsed());
        let start = Instant::now();
        adapter.teardown(&slice, &config).await.map_err(e)?;
        Ok((provision, ms(start.elapsed())))
    })
}

/// binky 0.1.2's adapter alone, in one Python process, the way its daemon calls it
/// (`adapters.get(...)` then the verb, a fresh connection per verb), drivers imported before
/// the clock starts.
const PY_ADAPTER_ALONE: &str = r#"
import json, os, time
import psycopg, redis
from binky import adapters
import binky.builtin_adapters
kind, name = os.environ["BENCH_KIND"], os.environ["BENCH_SLICE"]
cfg = {"admin_url": os.environ["BENCH_ADMIN"], "buckets": []}
t = time.perf_counter()
a = adapters.get(kind, cfg)
a.provision(name)
a.resolve(name)
p = time.perf_counter() - t
t = time.perf_counter()
adapters.get(kind, cfg).teardown(name)
d = time.perf_counter() - t
print(json.dumps({"provision_ms": p * 1000, "teardown_ms": d * 1000}))
"#;

/// Runs [`PY_ADAPTER_ALONE`] with binky 0.1.2's interpreter. Returns (provision, teardown).
fn py_adapter_alone(python: &str, cfg: Cfg, admin_url: &str, name: &str) -> Res<(f64, f64)> {
    let kind = match cfg {
        Cfg::Pg => "postgres",
        _ => "redis",
    };
    let out = Command::new(python)
        .args(["-c", PY_ADAPTER_ALONE])
        .env("BENCH_KIND", kind)
        .env("BENCH_SLICE", name)
        .env("BENCH_ADMIN", admin_url)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{python}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.trim()).map_err(|e| {
        format!(
            "binky 0.1.2 adapter, {name}: {e}: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    match (v["provision_ms"].as_f64(), v["teardown_ms"].as_f64()) {
        (Some(p), Some(d)) => Ok((p, d)),
        _ => Err(format!("binky 0.1.2 adapter, {name}: {text}")),
    }
}

fn has_mark(set: &BTreeSet<String>, mark: &str) -> bool {
    // A mark ending in `=` (0.1.2's map entry) matches any value.
    if mark.ends_with('=') {
        set.iter().any(|s| s.starts_with(mark))
    } else {
        set.contains(mark)
    }
}

/// `up`, check the slice exists, `remove`, check the server is back to where it was.
/// Returns (up, remove) in ms. Problems with the slices are recorded, not fatal.
fn cycle(t: &mut Tool, s: &Servers, cfg: Cfg, name: &str) -> Res<(f64, f64)> {
    let before = s.snapshot(cfg)?;
    let up = ms(t.up(cfg, name)?);
    let during = s.snapshot(cfg)?;
    let marks = t.slice_marks(cfg, name);
    for m in &marks {
        if !has_mark(&during, m) {
            t.problems.push(format!(
                "{} {name} ({}): after `up`, `{m}` is not on the server",
                t.label,
                cfg.project()
            ));
        }
    }
    if let Err(e) = t.check_slice_url(cfg, name, &s.pg) {
        t.problems
            .push(format!("{} ({}): {e}", t.label, cfg.project()));
    }
    let remove = ms(t.remove(cfg, name)?);
    let after = s.snapshot(cfg)?;
    let left: Vec<&String> = after.difference(&before).collect();
    let gone: Vec<&String> = before.difference(&after).collect();
    if !left.is_empty() || !gone.is_empty() {
        t.problems.push(format!(
            "{} {name} ({}): after `remove` the server differs from before `up`: left {left:?}, \
             missing {gone:?}",
            t.label,
            cfg.project()
        ));
    }
    Ok((up, remove))
}

// ---------------------------------------------------------------------------------------------
// Reporting.

fn machine(s: &Servers) -> Value {
    machine_tools(
        "python3",
        json!({
            "postgres": s.pg.version,
            "postgres_data_dir": s.pg.data_dir,
            "redis": s.redis.version,
        }),
    )
}

fn main() {
    install_signal_handlers();
    let args = or_exit(parse_args());
    let ref_bin = binky012_or_exit(INSTALL_HINT, |b| binky012_imports(b, "psycopg, redis"));
    exit_on_failure(
        "slices",
        bench(&args, PathBuf::from(env!("CARGO_BIN_EXE_binky")), ref_bin),
    );
}

fn bench(args: &Args, rs_bin: PathBuf, py_bin: PathBuf) -> Res<()> {
    // CREATE DATABASE copies template1 (about 7.5 MB through the WAL): on this VM's shared
    // disk it took 60-300 ms and drifted with other people's builds, on tmpfs a steady ~11 ms.
    // tmpfs by default, so the tools' own work is what varies; --pg-on-disk for the disk.
    let shm = Path::new("/dev/shm");
    let pg_parent = (!args.pg_on_disk && shm.is_dir()).then(|| shm.to_path_buf());
    // Declared before the tools, so they outlive them: the tools' teardown (remove, which
    // drops slices) still reaches the servers.
    let servers = Servers {
        pg: PgServer::start(pg_parent.as_deref())?,
        redis: RedisServer::start()?,
    };
    let machine = machine(&servers);
    eprintln!("machine: {machine}");
    eprintln!("postgres data: {}", servers.pg.data_dir.display());
    let initial = [servers.pg.snapshot()?, servers.redis.snapshot()?];
    let env = vec![
        ("PG_ADMIN".to_owned(), servers.pg.admin_url.clone()),
        ("REDIS_ADMIN".to_owned(), servers.redis.admin_url.clone()),
    ];

    let mut rs = Tool::new(Kind::Rust, rs_bin, env.clone())?;
    let mut py = Tool::new(Kind::Py, py_bin, env)?;
    let versions = binky_testkit::tool::versions(&rs.base, &py.base);

    // Warm daemons (and 0.1.2's lazily imported drivers): one world per config and tool.
    for t in [&mut rs, &mut py] {
        t.start_daemon()?;
        for cfg in CFGS {
            let (up, rm) = cycle(t, &servers, cfg, "warm")?;
            eprintln!(
                "warm-up {} {}: up {:.0} ms, remove {:.0} ms",
                t.label,
                cfg.project(),
                up,
                rm
            );
        }
    }

    // The measured worlds, interleaved: configs rotate, the tool going first alternates.
    // After each world, the servers' own floor for one slice (see `pg_floor`).
    let mut floor = Times::default();
    // And each tool's adapter alone, in process (see `binky_adapter_alone`).
    let (mut alone_rs, mut alone_py) = (Times::default(), Times::default());
    let py_python = binky012_python(&py.bin);
    for i in 0..args.worlds {
        let name = format!("w{i:02}");
        for k in 0..CFGS.len() {
            let cfg = CFGS[(i + k) % CFGS.len()];
            let order: [&mut Tool; 2] = if (i + k) % 2 == 0 {
                [&mut rs, &mut py]
            } else {
                [&mut py, &mut rs]
            };
            for t in order {
                let (up, rm) = cycle(t, &servers, cfg, &name)?;
                t.times.up[cfg.idx()].push(up);
                t.times.remove[cfg.idx()].push(rm);
            }
        }
        let f = format!("floor_{name}");
        for (cfg, (create, drop)) in [
            (Cfg::Pg, pg_floor(&servers.pg.admin_url, &f)?),
            (Cfg::Redis, redis_floor(&servers.redis.admin_url, &f)?),
        ] {
            floor.up[cfg.idx()].push(create);
            floor.remove[cfg.idx()].push(drop);
        }
        for cfg in [Cfg::Pg, Cfg::Redis] {
            check_stop()?;
            let admin = match cfg {
                Cfg::Pg => &servers.pg.admin_url,
                _ => &servers.redis.admin_url,
            };
            let (p, d) = binky_adapter_alone(cfg, admin, &format!("bk_alone_{name}"))?;
            alone_rs.up[cfg.idx()].push(p);
            alone_rs.remove[cfg.idx()].push(d);
            let (p, d) = py_adapter_alone(&py_python, cfg, admin, &format!("alone_{name}"))?;
            alone_py.up[cfg.idx()].push(p);
            alone_py.remove[cfg.idx()].push(d);
        }
        let last = |t: &Tool, c: Cfg| {
            format!(
                "{:.0}/{:.0}",
                t.times.up[c.idx()].last().copied().unwrap_or(f64::NAN),
                t.times.remove[c.idx()].last().copied().unwrap_or(f64::NAN)
            )
        };
        eprintln!(
            "world {}/{} up/remove ms: binky bare {} pg {} redis {} | 0.1.2 bare {} pg {} redis {}",
            i + 1,
            args.worlds,
            last(&rs, Cfg::Bare),
            last(&rs, Cfg::Pg),
            last(&rs, Cfg::Redis),
            last(&py, Cfg::Bare),
            last(&py, Cfg::Pg),
            last(&py, Cfg::Redis),
        );
    }

    // Teardown before reporting, so leftovers are part of the report.
    rs.base.teardown();
    py.base.teardown();
    let end = [servers.pg.snapshot()?, servers.redis.snapshot()?];
    let mut server_left = Vec::new();
    for (i, kind) in ["postgres", "redis"].iter().enumerate() {
        for x in end[i].difference(&initial[i]) {
            server_left.push(format!("{kind}: {x} left on the server after the run"));
        }
        for x in initial[i].difference(&end[i]) {
            server_left.push(format!("{kind}: {x} was on the server before and is gone"));
        }
    }

    // ------------------------------------------------------------------ report
    let n = args.worlds;
    let mut t = Table::with_columns("metric", &MEDIAN_P90_COLUMNS, &["server floor"]);
    let stat_row = |t: &mut Table, label: String, a: &[f64], b: &[f64], floor: &[f64]| {
        t.row(&[
            &label,
            &fmt_ms(median(a)),
            &fmt_ms(p90(a)),
            &fmt_ms(median(b)),
            &fmt_ms(p90(b)),
            &ratio(median(a), median(b)),
            &if floor.is_empty() {
                String::new()
            } else {
                fmt_ms(median(floor))
            },
        ]);
    };
    let mut json_adapters = serde_json::Map::new();
    for cfg in [Cfg::Pg, Cfg::Redis] {
        let (c, b) = (cfg.idx(), Cfg::Bare.idx());
        let adapter = match cfg {
            Cfg::Pg => "postgres",
            _ => "redis",
        };
        let prov_rs = diffs(&rs.times.up[c], &rs.times.up[b]);
        let prov_py = diffs(&py.times.up[c], &py.times.up[b]);
        let tear_rs = diffs(&rs.times.remove[c], &rs.times.remove[b]);
        let tear_py = diffs(&py.times.remove[c], &py.times.remove[b]);
        stat_row(
            &mut t,
            format!("{adapter}: up with the slice (wall)"),
            &rs.times.up[c],
            &py.times.up[c],
            &[],
        );
        stat_row(
            &mut t,
            format!("{adapter}: remove --force with the slice (wall)"),
            &rs.times.remove[c],
            &py.times.remove[c],
            &[],
        );
        stat_row(
            &mut t,
            format!("{adapter}: provisioning cost (up - bare up, paired)"),
            &prov_rs,
            &prov_py,
            &floor.up[c],
        );
        stat_row(
            &mut t,
            format!("{adapter}: teardown cost (remove - bare remove, paired)"),
            &tear_rs,
            &tear_py,
            &floor.remove[c],
        );
        stat_row(
            &mut t,
            format!("{adapter}: adapter alone, provision + resolve (in process)"),
            &alone_rs.up[c],
            &alone_py.up[c],
            &floor.up[c],
        );
        stat_row(
            &mut t,
            format!("{adapter}: adapter alone, teardown (in process)"),
            &alone_rs.remove[c],
            &alone_py.remove[c],
            &floor.remove[c],
        );
        let med_diff = |a: &[f64], b: &[f64]| median(a) - median(b);
        json_adapters.insert(
            adapter.to_owned(),
            json!({
                "binky": {
                    "up_ms": summary_p90(&rs.times.up[c]),
                    "remove_ms": summary_p90(&rs.times.remove[c]),
                    "provision_cost_paired_ms": summary_p90(&prov_rs),
                    "teardown_cost_paired_ms": summary_p90(&tear_rs),
                    "provision_cost_median_diff_ms": med_diff(&rs.times.up[c], &rs.times.up[b]),
                    "teardown_cost_median_diff_ms": med_diff(&rs.times.remove[c], &rs.times.remove[b]),
                    "adapter_alone_provision_resolve_ms": summary_p90(&alone_rs.up[c]),
                    "adapter_alone_teardown_ms": summary_p90(&alone_rs.remove[c]),
                },
                "binky012": {
                    "up_ms": summary_p90(&py.times.up[c]),
                    "remove_ms": summary_p90(&py.times.remove[c]),
                    "provision_cost_paired_ms": summary_p90(&prov_py),
                    "teardown_cost_paired_ms": summary_p90(&tear_py),
                    "provision_cost_median_diff_ms": med_diff(&py.times.up[c], &py.times.up[b]),
                    "teardown_cost_median_diff_ms": med_diff(&py.times.remove[c], &py.times.remove[b]),
                    "adapter_alone_provision_resolve_ms": summary_p90(&alone_py.up[c]),
                    "adapter_alone_teardown_ms": summary_p90(&alone_py.remove[c]),
                },
                "server_floor": {
                    "create_ms": summary_p90(&floor.up[c]),
                    "drop_ms": summary_p90(&floor.remove[c]),
                },
                "ratios_binky_over_012": {
                    "up": ratio_value(median(&rs.times.up[c]), median(&py.times.up[c])),
                    "remove": ratio_value(median(&rs.times.remove[c]), median(&py.times.remove[c])),
                    "provision_cost_paired": ratio_value(median(&prov_rs), median(&prov_py)),
                    "teardown_cost_paired": ratio_value(median(&tear_rs), median(&tear_py)),
                    "adapter_alone_provision_resolve": ratio_value(median(&alone_rs.up[c]), median(&alone_py.up[c])),
                    "adapter_alone_teardown": ratio_value(median(&alone_rs.remove[c]), median(&alone_py.remove[c])),
                },
            }),
        );
    }
    let b = Cfg::Bare.idx();
    stat_row(
        &mut t,
        "no adapter: up (wall)".into(),
        &rs.times.up[b],
        &py.times.up[b],
        &[],
    );
    stat_row(
        &mut t,
        "no adapter: remove --force (wall)".into(),
        &rs.times.remove[b],
        &py.times.remove[b],
        &[],
    );

    println!();
    println!(
        "{n} worlds per adapter and tool, one at a time; p90 = nearest rank; postgres data in {}",
        servers.pg.data_dir.display()
    );
    println!("{}", t.render());
    println!(
        "cost rows: per world index i, (up or remove of the adapter world i) - (the same of \
         the bare world i), which ran within about a second of it; median and p90 of those"
    );
    println!(
        "server floor: no tool, a fresh admin connection then CREATE DATABASE (ACL SETUSER for \
         redis), and a fresh connection then DROP DATABASE ... WITH (FORCE) (ACL DELUSER); median"
    );
    println!(
        "adapter alone: each tool's adapter code called in process (binky's Rust adapter in this \
         process, 0.1.2's Python adapter in one python process, imports done), no CLI or daemon"
    );
    let mut clean = true;
    for tool in [&rs, &py] {
        let checked = (n + 1) * 2;
        if tool.problems.is_empty() {
            println!(
                "{}: every slice was on the server after `up` and gone after `remove` \
                 ({checked} worlds with a slice, warm-up included)",
                tool.label
            );
        } else {
            clean = false;
            println!(
                "{}: {} problem(s) with slices:",
                tool.label,
                tool.problems.len()
            );
            for p in &tool.problems {
                println!("  {p}");
            }
        }
        if !tool.leftovers.is_empty() {
            clean = false;
            println!(
                "{}: {} process(es) still alive after remove --force + daemon stop (killed)",
                tool.label,
                tool.leftovers.len()
            );
        }
    }
    if server_left.is_empty() {
        println!(
            "servers after the run: the same databases, roles, ACL users and keys as before it"
        );
    } else {
        clean = false;
        for l in &server_left {
            println!("{l}");
        }
    }
    println!("load average at the end: {}", loadavg());

    if let Some(path) = &args.json {
        let report = json!({
            "settings": {
                "worlds": n,
                "configs": CFGS.iter().map(|c| json!({"project": c.project(), "binky_toml": c.toml()})).collect::<Vec<_>>(),
                "postgres_flags": "initdb --auth=scram-sha-256 -E UTF8 --locale=C -N; -c fsync=off -c full_page_writes=off -c synchronous_commit=off",
                "postgres_on_tmpfs": !args.pg_on_disk && servers.pg.data_dir.starts_with("/dev/shm"),
                "redis_flags": "--save '' --appendonly no --requirepass <generated>",
                "binky012_proxy_port": 0,
                "p90": "nearest rank, ceil(0.9 n)-th smallest",
            },
            "binky": {
                "version": versions.0, "binary": rs.bin,
                "bare_up_ms": summary_p90(&rs.times.up[b]),
                "bare_remove_ms": summary_p90(&rs.times.remove[b]),
                "slice_problems": rs.problems,
                "leftover_processes": rs.leftovers,
            },
            "binky012": {
                "version": versions.1, "binary": py.bin,
                "bare_up_ms": summary_p90(&py.times.up[b]),
                "bare_remove_ms": summary_p90(&py.times.remove[b]),
                "slice_problems": py.problems,
                "leftover_processes": py.leftovers,
            },
            "adapters": Value::Object(json_adapters),
            "ratios_bare_binky_over_012": {
                "up": ratio_value(median(&rs.times.up[b]), median(&py.times.up[b])),
                "remove": ratio_value(median(&rs.times.remove[b]), median(&py.times.remove[b])),
            },
            "server_leftovers_after_run": server_left,
            "clean": clean,
        });
        binky_testkit::stats::write_results(path, "slices", &machine, report)?;
    }
    Ok(())
}
