//! Worlds benchmark: what N worlds of a PostgreSQL app cost in RAM, time and disk, with a
//! PostgreSQL server per world, with binky's golden templates on one shared server, and with
//! binky 0.1.2 (the Python reference) on the same `binky.toml`, in one run. It reproduces the
//! table binky 0.1.2's README publishes ("What it costs to run N worlds": N worlds of a
//! PostgreSQL app with 200,000 rows each, RAM and time), without Docker.
//!
//! The app: one `postgres` adapter service `db` with `migrate` (`schema.sql` through psql: a
//! table of ~400-byte rows with a primary key and a secondary index), `seed` (one server-side
//! `INSERT … SELECT … FROM generate_series(1, :rows)`, then `ANALYZE`) and
//! `clone_from = "golden"`, and one tiny TCP service `app` that depends on `db` and gets
//! `DATABASE_URL = "${db.url}"`.
//!
//! The arms, one after another, each torn down before the next:
//! 1. **a server per world**: for each world `initdb` + a `postgres` of its own + `CREATE
//!    DATABASE app` + the same migrate and seed commands + the same app process, all N
//!    servers kept running: the no-Docker equivalent of a container each.
//! 2. **binky** (`target/release/binky`) with `clone_from = "golden"` against one shared
//!    server (a private `postgres` started by the bench, `admin_url = "${env.PG_ADMIN}"`):
//!    the first world builds the golden template, every world is a server-side copy.
//! 3. **binky 0.1.2** with the same `binky.toml` on a shared server of its own, made the same
//!    way; it builds its own golden database once and clones it with `CREATE DATABASE …
//!    TEMPLATE` (its admission control admits 2 running worlds on this machine: world k-2 is
//!    brought `down`, untimed, before world k so its database stays).
//! 4. **strategy**: binky's `STRATEGY FILE_COPY` (the default) against `WAL_LOG`
//!    (`options = { clone_strategy = "wal_log" }`): `binky up` of worlds cloned from one
//!    template, alternating, plus the bare `CREATE DATABASE … TEMPLATE … STRATEGY` on the
//!    server with the WAL each writes.
//!
//! Worlds come up one after another; after every world the bench records its time (from
//! `binky up` or `initdb` until a query on the world's own `DATABASE_URL` returns the row
//! count), the memory of the processes the arm adds (see [`Mem`]: PSS without shared memory
//! plus each server's resident SysV shared memory; summed RSS and PSS as well), and the bytes
//! it adds on disk. The sweep points (`--sweep`) are read off that one cumulative run; the
//! marginal cost of world N is its state minus the state at N-1. Before each world the bench
//! waits (within `--quiet-wait`) for processes outside it to go quiet, and records how much
//! CPU they used while the world came up: the machine is shared.
//!
//! Run: `cargo bench --bench worlds [-- --sweep 1,2,4,8,16 --rows 200000 --json PATH]`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use binky_testkit::args::{exit_on_failure, or_exit, Flags};
use binky_testkit::procs::{alive, cmdline, loadavg, machine_tools, tree};
use binky_testkit::run::{capture, run_cmd, Run};
use binky_testkit::servers::postgres::{pg_bin_dir, Options};
use binky_testkit::stats::{median, ms, summary};
use binky_testkit::stop::{check_stop, install_signal_handlers};
use binky_testkit::tool::{binky012_imports, binky012_or_exit, Kind};
use binky_testkit::{net::free_port, table::Table, Res};

const INSTALL_HINT: &str = "binky 0.1.2 (the Python reference) with its postgres extra is not \
installed.\nInstall it into a venv and point the benchmark at it:\n\n\
    python3 -m venv .venv-ref && .venv-ref/bin/pip install \"binky[postgres]==0.1.2\"\n\
    BINKY012=$PWD/.venv-ref/bin/binky cargo bench --bench worlds\n\n\
(the benchmark also looks for /work/ref/venv/bin/binky and for `binky012` on PATH; \
`--arms server,binky,strategy` runs without it)";

const SERVERS_HINT: &str =
    "PostgreSQL (initdb, postgres, psql) is needed: `apt-get install postgresql`";

/// The app's process: binds its port, accepts and closes forever (the foundation bench's).
const SERVICE_PY: &str = "import socket as S;s=S.socket();\
s.setsockopt(S.SOL_SOCKET,S.SO_REUSEADDR,1);s.bind(('127.0.0.1',PORT));s.listen(64);\
[c.close() for c,_ in iter(s.accept,None)]";

/// The app's schema: rows of about 400 bytes, a primary key and a secondary index.
const SCHEMA_SQL: &str = "CREATE TABLE items (
    id         bigint PRIMARY KEY,
    account_id bigint NOT NULL,
    name       text NOT NULL,
    email      text NOT NULL,
    body       text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX items_account_created ON items (account_id, created_at);
";

/// The app's seed, server-side: `:rows` rows of about 400 bytes (a 320-character body).
const SEED_SQL: &str = "INSERT INTO items (id, account_id, name, email, body, created_at)
SELECT g, g % 1000, 'name ' || g, 'user' || g || '@example.com',
       repeat(md5(g::text), 10), timestamptz '2024-01-01' + g * interval '1 second'
FROM generate_series(1, :rows) AS g;
ANALYZE items;
";

const MIB: f64 = 1048576.0;

// ---------------------------------------------------------------------------------------------
// Interrupts: a flag, so that Ctrl-C unwinds through the teardown guards.

// ---------------------------------------------------------------------------------------------
// Arguments.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arm {
    /// A PostgreSQL server per world.
    Server,
    /// binky with golden templates on one shared server.
    Binky,
    /// binky 0.1.2 on one shared server.
    Binky012,
    /// FILE_COPY against WAL_LOG.
    Strategy,
}

impl Arm {
    fn key(self) -> &'static str {
        match self {
            Arm::Server => "server",
            Arm::Binky => "binky",
            Arm::Binky012 => "binky012",
            Arm::Strategy => "strategy",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Arm::Server => "a server each",
            Arm::Binky => "binky",
            Arm::Binky012 => "binky 0.1.2",
            Arm::Strategy => "strategy",
        }
    }
}

const ALL_ARMS: [Arm; 4] = [Arm::Server, Arm::Binky, Arm::Binky012, Arm::Strategy];

struct Args {
    sweep: Vec<usize>,
    rows: u64,
    arms: Vec<Arm>,
    strategy_worlds: usize,
    pg_on_disk: bool,
    fsync: bool,
    /// Seconds the whole run may spend waiting for a quiet machine before worlds.
    quiet_wait: u64,
    json: Option<PathBuf>,
}

impl Args {
    fn max_worlds(&self) -> usize {
        self.sweep.iter().copied().max().unwrap_or(1)
    }
}

const USAGE: &str = "usage: cargo bench --bench worlds -- [--sweep 1,2,4,8,16] [--rows N] \
[--arms server,binky,binky012,strategy] [--strategy-worlds K] [--pg-on-disk] [--fsync] \
[--quiet-wait SECS] [--json PATH]\n\
  --sweep LIST         world counts to report (default 1,2,4,8,16); each arm brings up\n\
                       max(LIST) worlds one after another and is read at every count\n\
  --rows N             rows per world (default 200000, about 400 bytes each)\n\
  --arms LIST          which arms to run (default all four)\n\
  --strategy-worlds K  worlds per strategy in the strategy arm (default 6)\n\
  --pg-on-disk         PostgreSQL data in the temp dir ($TMPDIR or /tmp) instead of /dev/shm\n\
  --fsync              run the servers with fsync on (default: fsync, full_page_writes and\n\
                       synchronous_commit off, as the other benches)\n\
  --quiet-wait SECS    before each world, wait until processes outside the bench use under\n\
                       0.2 cores for 1 s, spending at most SECS in all (default 300, 0: off)\n\
  --json PATH          also write the results as JSON";

fn parse_args() -> Res<Args> {
    let mut a = Args {
        sweep: vec![1, 2, 4, 8, 16],
        rows: 200_000,
        arms: ALL_ARMS.to_vec(),
        strategy_worlds: 6,
        pg_on_disk: false,
        fsync: false,
        quiet_wait: 300,
        json: None,
    };
    a.json = Flags::from_env(USAGE).each(|f, flag| {
        match flag {
            "--sweep" => {
                let mut s = Vec::new();
                for part in f.list("--sweep")? {
                    let n = part
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=64).contains(n))
                        .ok_or_else(|| format!("--sweep: `{part}` is not a number from 1 to 64"))?;
                    s.push(n);
                }
                s.sort_unstable();
                s.dedup();
                if s.is_empty() {
                    return Err(format!("--sweep needs at least one number\n{USAGE}"));
                }
                a.sweep = s;
            }
            "--rows" => {
                let v = f.value("--rows")?;
                a.rows = v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=100_000_000).contains(n))
                    .ok_or_else(|| format!("--rows: `{v}` is not a number from 1 to 10^8"))?;
            }
            "--arms" => {
                let mut arms = Vec::new();
                for part in f.list("--arms")? {
                    let arm = ALL_ARMS
                        .iter()
                        .copied()
                        .find(|a| a.key() == part)
                        .ok_or_else(|| {
                            format!(
                                "--arms: unknown arm `{part}` (server, binky, binky012, strategy)"
                            )
                        })?;
                    if !arms.contains(&arm) {
                        arms.push(arm);
                    }
                }
                // Always in the same order.
                arms.sort_by_key(|a| ALL_ARMS.iter().position(|b| b == a));
                a.arms = arms;
            }
            "--strategy-worlds" => {
                a.strategy_worlds = f.number_in("--strategy-worlds", 1..=50)?;
            }
            "--quiet-wait" => {
                let v = f.value("--quiet-wait")?;
                a.quiet_wait = v
                    .parse::<u64>()
                    .map_err(|_| format!("--quiet-wait: `{v}` is not a number of seconds"))?;
            }
            "--pg-on-disk" => a.pg_on_disk = true,
            "--fsync" => a.fsync = true,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(a)
}

// ---------------------------------------------------------------------------------------------
// /proc: processes, their memory, and disk usage.

/// The value in kB of the line `key:` of a /proc status-like file.
fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
}

/// Memory of a set of processes.
///
/// Summed RSS counts every shared page once per process that touched it; summed PSS splits
/// shared pages among the processes mapping them, but a PostgreSQL shared-buffer page touched
/// only by a backend that has exited is in nobody's RSS or PSS (it is still resident), and
/// one the checkpointer wrote is in the checkpointer's. So the servers run with
/// `shared_memory_type = sysv`, and `ram` is the processes' PSS without their shared-memory
/// part (`Pss_Shmem`) plus the resident size of the server's SysV segments
/// (`/proc/sysvipc/shm`, `rss`): every resident page of the server, counted once.
#[derive(Clone, Copy, Default, Debug)]
struct Mem {
    /// Summed `VmRSS`.
    rss: u64,
    /// Summed `Pss` (`smaps_rollup`).
    pss: u64,
    /// Summed `Pss_Shmem`: the shared-memory part of `pss`.
    pss_shmem: u64,
    /// Resident bytes of the server's SysV shared memory (PostgreSQL's shared buffers and
    /// the rest of its main segment).
    shm: u64,
    /// Every process's PSS could be read.
    pss_ok: bool,
    procs: usize,
}

impl Mem {
    fn of(pids: &[u32]) -> Mem {
        let mut m = Mem {
            pss_ok: true,
            ..Mem::default()
        };
        for &pid in pids {
            let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
                continue; // Gone meanwhile.
            };
            m.procs += 1;
            m.rss += kb_field(&status, "VmRSS:").unwrap_or(0) * 1024;
            let rollup = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok();
            match rollup.as_deref().and_then(|t| kb_field(t, "Pss:")) {
                Some(p) => {
                    m.pss += p * 1024;
                    m.pss_shmem += rollup
                        .as_deref()
                        .and_then(|t| kb_field(t, "Pss_Shmem:"))
                        .unwrap_or(0)
                        * 1024;
                }
                None => m.pss_ok = false,
            }
        }
        m
    }

    fn add(self, o: Mem) -> Mem {
        Mem {
            rss: self.rss + o.rss,
            pss: self.pss + o.pss,
            pss_shmem: self.pss_shmem + o.pss_shmem,
            shm: self.shm + o.shm,
            pss_ok: self.pss_ok && o.pss_ok,
            procs: self.procs + o.procs,
        }
    }

    /// The RAM figure: PSS without shared memory, plus the resident shared segments; summed
    /// RSS when PSS cannot be read.
    fn main(self) -> u64 {
        if self.pss_ok {
            self.pss - self.pss_shmem + self.shm
        } else {
            self.rss
        }
    }

    fn json(self) -> Value {
        json!({
            "ram_bytes": self.main(),
            "rss_bytes": self.rss,
            "pss_bytes": self.pss,
            "pss_shmem_bytes": self.pss_shmem,
            "sysv_shm_resident_bytes": self.shm,
            "pss_complete": self.pss_ok,
            "processes": self.procs,
        })
    }
}

/// SysV shared memory segments made by `creator`: `(shmid, resident bytes)`.
fn sysv_segments(creator: u32) -> Vec<(String, u64)> {
    let text = fs::read_to_string("/proc/sysvipc/shm").unwrap_or_default();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    let col = |name: &str| head.iter().position(|h| *h == name);
    let (Some(id), Some(cpid), Some(rss)) = (col("shmid"), col("cpid"), col("rss")) else {
        return Vec::new();
    };
    lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(cpid)?.parse::<u32>().ok()? == creator)
                .then(|| Some((f.get(id)?.to_string(), f.get(rss)?.parse().ok()?)))?
        })
        .collect()
}

/// Bytes allocated under `path` (like `du -s --block-size=1`).
fn du(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        for e in fs::read_dir(path).into_iter().flatten().flatten() {
            total += du(&e.path());
        }
    }
    total
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL: a private server, and queries.

/// Rows of `sql` (simple query protocol, fields as text) on a fresh connection to `url`,
/// which is closed before returning.
fn pg_query(url: &str, sql: &str) -> Res<Vec<Vec<Option<String>>>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    rt.block_on(async {
        let (client, conn) = tokio::time::timeout(
            Duration::from_secs(10),
            tokio_postgres::connect(url, tokio_postgres::NoTls),
        )
        .await
        .map_err(|_| "connect: timed out".to_owned())?
        .map_err(|e| format!("connect: {}", pg_err(&e)))?;
        let task = tokio::spawn(conn);
        let res = client.simple_query(sql).await;
        drop(client);
        let _ = task.await;
        let msgs = res.map_err(|e| format!("`{sql}`: {}", pg_err(&e)))?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
                }
                _ => None,
            })
            .collect())
    })
}

fn pg_err(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => {
            let mut t = e.to_string();
            if let Some(s) = std::error::Error::source(e) {
                let _ = write!(t, ": {s}");
            }
            t
        }
    }
}

/// The first field of the first row of `sql`.
fn pg_one(url: &str, sql: &str) -> Res<String> {
    pg_query(url, sql)?
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten())
        .ok_or_else(|| format!("`{sql}` returned no value"))
}

fn pg_u64(url: &str, sql: &str) -> Res<u64> {
    let v = pg_one(url, sql)?;
    v.parse()
        .map_err(|_| format!("`{sql}` returned `{v}`, not a number"))
}

/// A world is ready when its own database answers: `count(*)` of the app's table is `rows`.
fn ready_query(url: &str, rows: u64) -> Res<()> {
    let n = pg_u64(url, "SELECT count(*) FROM items")?;
    if n != rows {
        return Err(format!("items holds {n} rows, not {rows}"));
    }
    Ok(())
}

/// A private PostgreSQL cluster (the kit's, with its shared memory as SysV segments the bench
/// can see whole), made the way `benchmarks/slices.rs` makes one. Stopped and removed on
/// drop.
struct PgServer {
    pg: binky_testkit::servers::postgres::PgServer,
    initdb_ms: f64,
    start_ms: f64,
}

binky_testkit::deref_to!(PgServer, pg: binky_testkit::servers::postgres::PgServer);

impl PgServer {
    /// A cluster under `parent` (`None`: the temp dir).
    fn start(bin_dir: &Path, parent: Option<&Path>, fsync: bool) -> Res<PgServer> {
        let pg = binky_testkit::servers::postgres::PgServer::start_with(Options {
            bin_dir: Some(bin_dir.to_path_buf()),
            parent: parent.map(Path::to_path_buf),
            prefix: "binky-bench-worlds-pg-".into(),
            fsync,
            // Shared memory the bench can see whole (see `Mem`).
            settings: vec!["shared_memory_type=sysv".into()],
            ready: Some(|url| pg_query(url, "SELECT 1").is_ok()),
            poll: Duration::from_millis(10),
        })?;
        Ok(PgServer {
            initdb_ms: ms(pg.initdb_time),
            start_ms: ms(pg.start_time),
            pg,
        })
    }

    /// The postmaster and every process below it.
    fn pids(&self) -> Vec<u32> {
        tree(self.pg.pid)
    }

    /// The memory of the server: its processes and its resident shared memory.
    fn mem(&self) -> Mem {
        let mut m = Mem::of(&self.pids());
        m.shm = sysv_segments(self.pg.pid).iter().map(|s| s.1).sum();
        m
    }

    /// The same URL for another database.
    fn url(&self, db: &str) -> String {
        match self.admin_url.rsplit_once('/') {
            Some((base, _)) => format!("{base}/{db}"),
            None => self.admin_url.clone(),
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.pg.stop();
        // A killed postmaster leaves its SysV segment behind.
        for (id, _) in sysv_segments(self.pg.pid) {
            let _ = Command::new("ipcrm")
                .args(["-m", &id])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Where the servers' clusters go: `/dev/shm` (tmpfs) unless `--pg-on-disk`.
fn pg_parent(args: &Args) -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    (!args.pg_on_disk && shm.is_dir()).then(|| shm.to_path_buf())
}

// ---------------------------------------------------------------------------------------------
// The app.

struct App {
    python: String,
    rows: u64,
}

impl App {
    fn migrate_cmd(&self) -> String {
        "psql \"$DATABASE_URL\" -X -q -v ON_ERROR_STOP=1 -f schema.sql".to_owned()
    }

    fn seed_cmd(&self) -> String {
        format!(
            "psql \"$DATABASE_URL\" -X -q -v ON_ERROR_STOP=1 -v rows={} -f seed.sql",
            self.rows
        )
    }

    fn service_cmd(&self, port: &str) -> String {
        format!(
            "{} -c \"{}\"",
            self.python,
            SERVICE_PY.replace("PORT", port)
        )
    }

    /// The committed `binky.toml`. `db` is `None` for the warm-up project (a slice with no
    /// migrate, seed or template); `options` goes on the `db` service.
    fn toml(&self, project: &str, with_data: bool, options: Option<&str>) -> String {
        let q = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut db = String::from(
            "[services.db]\nadapter = \"postgres\"\nadmin_url = \"${env.PG_ADMIN}\"\n",
        );
        if with_data {
            let _ = write!(
                db,
                "migrate = \"{}\"\nseed = \"{}\"\nclone_from = \"golden\"\n",
                q(&self.migrate_cmd()),
                q(&self.seed_cmd())
            );
        }
        if let Some(o) = options {
            let _ = writeln!(db, "options = {{ {o} }}");
        }
        format!(
            "[project]\nname = \"{project}\"\nport_range = [24000, 24999]\n\n{db}\n\
             [services.app]\ncmd = \"{}\"\nports = [\"http\"]\ndepends_on = [\"db\"]\n\
             env = {{ DATABASE_URL = \"${{db.url}}\" }}\n\n[agents]\nexpose = [\"db\"]\n",
            q(&self.service_cmd("${self.port}"))
        )
    }

    /// Write the app's files into `dir`.
    fn write(&self, dir: &Path, toml: &str) -> Res<()> {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (name, text) in [
            ("binky.toml", toml),
            ("schema.sql", SCHEMA_SQL),
            ("seed.sql", SEED_SQL),
        ] {
            fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(())
    }
}

/// A process group, killed on drop.
struct Group(Vec<Child>);

impl Group {
    fn pids(&self) -> Vec<u32> {
        self.0.iter().flat_map(|c| tree(c.id())).collect()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = killpg(Pid::from_raw(c.id() as i32), Signal::SIGKILL);
            let _ = c.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What the bench records per world.

#[derive(Clone, Debug)]
struct WorldRec {
    /// 1-based: the Nth world of the arm.
    n: usize,
    /// From `binky up` (or `initdb`) until the ready query answered.
    time_ms: f64,
    /// The parts of `time_ms`.
    steps: Vec<(&'static str, f64)>,
    /// Everything the arm counts: the servers (and the daemon).
    ram: Mem,
    server: Mem,
    daemon: Mem,
    /// The app processes: the same in every arm, not counted.
    app: Mem,
    /// This world's own database (`pg_database_size`).
    db_bytes: u64,
    /// Every world database plus the template, once.
    disk_bytes: u64,
    /// `du` of the data directory (or directories).
    datadir_bytes: u64,
    /// Whether the world's database was copied from a template (None: not applicable).
    cloned: Option<bool>,
    /// Worlds of the arm running when measured.
    running: usize,
    /// Cores used by processes outside the bench while the world came up.
    others_cores: f64,
    /// Seconds waited for a quiet machine before the world.
    quiet_wait_s: f64,
    note: String,
}

impl WorldRec {
    fn json(&self) -> Value {
        let steps: serde_json::Map<String, Value> = self
            .steps
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        json!({
            "n": self.n,
            "time_ms": self.time_ms,
            "steps_ms": steps,
            "ram": self.ram.json(),
            "server": self.server.json(),
            "daemon": self.daemon.json(),
            "app_processes": self.app.json(),
            "world_db_bytes": self.db_bytes,
            "disk_bytes": self.disk_bytes,
            "datadir_bytes": self.datadir_bytes,
            "cloned": self.cloned,
            "running_worlds": self.running,
            "others_cpu_cores": self.others_cores,
            "quiet_wait_s": self.quiet_wait_s,
            "note": self.note,
        })
    }
}

/// One arm's run.
struct ArmResult {
    arm: Arm,
    /// The state before the first world (the shared server and daemon, for the tools).
    base: WorldRec,
    worlds: Vec<WorldRec>,
    /// Problems found by the checks.
    problems: Vec<String>,
    extra: Value,
}

impl ArmResult {
    /// The state after `n` worlds (`0`: before the first).
    fn at(&self, n: usize) -> Option<&WorldRec> {
        if n == 0 {
            Some(&self.base)
        } else {
            self.worlds.get(n - 1)
        }
    }

    fn total_ms(&self, n: usize) -> Option<f64> {
        (n <= self.worlds.len()).then(|| self.worlds[..n].iter().map(|w| w.time_ms).sum())
    }

    fn json(&self) -> Value {
        json!({
            "arm": self.arm.key(),
            "label": self.arm.label(),
            "before_first_world": self.base.json(),
            "worlds": self.worlds.iter().map(WorldRec::json).collect::<Vec<_>>(),
            "problems": self.problems,
            "extra": self.extra,
        })
    }
}

fn empty_rec() -> WorldRec {
    let none = Mem {
        pss_ok: true,
        ..Mem::default()
    };
    WorldRec {
        n: 0,
        time_ms: 0.0,
        steps: Vec::new(),
        ram: none,
        server: none,
        daemon: none,
        app: none,
        db_bytes: 0,
        disk_bytes: 0,
        datadir_bytes: 0,
        cloned: None,
        running: 0,
        others_cores: 0.0,
        quiet_wait_s: 0.0,
        note: String::new(),
    }
}

/// Let connections the bench or a tool just closed end, so their backends are not counted.
/// CPU ticks: the whole machine's busy time, and the part used by the bench's own process
/// trees (`roots` and everything below them, with the time of children they reaped).
#[derive(Clone, Copy)]
struct Cpu {
    at: Instant,
    busy: u64,
    own: u64,
}

impl Cpu {
    fn now(roots: &[u32]) -> Cpu {
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        // cpu user nice system idle iowait irq softirq steal …
        let f: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let busy = [0usize, 1, 2, 5, 6, 7]
            .iter()
            .filter_map(|&i| f.get(i))
            .sum();
        let mut own = 0;
        let mut seen = std::collections::BTreeSet::new();
        for &root in roots {
            for pid in tree(root) {
                if seen.insert(pid) {
                    own += proc_ticks(pid);
                }
            }
        }
        Cpu {
            at: Instant::now(),
            busy,
            own,
        }
    }

    /// Cores used by processes outside the bench between `self` and `later`.
    fn others(self, later: Cpu) -> f64 {
        let tick = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as f64;
        let secs = later.at.duration_since(self.at).as_secs_f64().max(1e-3);
        let busy = later.busy.saturating_sub(self.busy) as f64;
        let own = later.own.saturating_sub(self.own) as f64;
        ((busy - own) / tick / secs).max(0.0)
    }
}

/// The quiet-machine budget left (shared by every arm).
static QUIET_LEFT_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Wait until processes outside the bench (all but `roots`' trees) use under 0.2 cores over
/// one second, within what is left of `--quiet-wait`. Returns the seconds waited.
fn wait_quiet(roots: &[u32]) -> Res<f64> {
    let started = Instant::now();
    while QUIET_LEFT_MS.load(Ordering::SeqCst) > 0 {
        check_stop()?;
        let c0 = Cpu::now(roots);
        thread::sleep(Duration::from_millis(1000));
        let others = c0.others(Cpu::now(roots));
        if others < 0.2 {
            break;
        }
        let _ = QUIET_LEFT_MS.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
            Some(v.saturating_sub(1000))
        });
    }
    Ok(started.elapsed().as_secs_f64())
}

/// utime + stime + cutime + cstime of a process, in ticks.
fn proc_ticks(pid: u32) -> u64 {
    let Ok(s) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let Some(i) = s.rfind(')') else { return 0 };
    s[i + 2..]
        .split_whitespace()
        .skip(11)
        .take(4)
        .filter_map(|x| x.parse::<i64>().ok())
        .map(|x| x.max(0) as u64)
        .sum()
}

fn settle() {
    thread::sleep(Duration::from_millis(300));
}

// ---------------------------------------------------------------------------------------------
// Arm 1: a PostgreSQL server per world.

struct ServerWorld {
    pg: PgServer,
    app: Group,
}

fn run_sh(cmd: &str, dir: &Path, env: &[(&str, &str)], path: &str) -> Res<()> {
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(cmd).current_dir(dir).env("PATH", path);
    for (k, v) in env {
        c.env(k, v);
    }
    let r = run_cmd(c, dir, Duration::from_secs(600))?;
    if !r.ok() {
        return Err(format!(
            "`{cmd}` exited {}: {}{}",
            r.status, r.stdout, r.stderr
        ));
    }
    Ok(())
}

fn wait_port(port: u16, child: &mut Child) -> Res<()> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("the app exited before listening: {st}"));
        }
        if Instant::now() > deadline {
            return Err(format!("the app did not listen on {port} within 20 s"));
        }
        check_stop()?;
        thread::sleep(Duration::from_millis(1));
    }
}

fn arm_server(args: &Args, bin_dir: &Path, app: &App, path: &str) -> Res<ArmResult> {
    let dir = tempfile::Builder::new()
        .prefix("binky-bench-worlds-server-")
        .tempdir()
        .map_err(|e| format!("tempdir: {e}"))?;
    let appdir = dir.path().join("app");
    app.write(&appdir, &app.toml("app", true, None))?;
    let parent = pg_parent(args);
    let mut worlds: Vec<ServerWorld> = Vec::new();
    let mut recs = Vec::new();
    let mut problems = Vec::new();
    for n in 1..=args.max_worlds() {
        check_stop()?;
        let roots =
            |extra: Option<u32>| -> Vec<u32> {
                std::iter::once(std::process::id())
                    .chain(worlds.iter().flat_map(|w| {
                        std::iter::once(w.pg.pid).chain(w.app.0.iter().map(Child::id))
                    }))
                    .chain(extra)
                    .collect()
            };
        let quiet = wait_quiet(&roots(None))?;
        let cpu0 = Cpu::now(&roots(None));
        let started = Instant::now();
        let pg = PgServer::start(bin_dir, parent.as_deref(), args.fsync)?;
        let t = Instant::now();
        pg_query(&pg.admin_url, "CREATE DATABASE app")?;
        let createdb_ms = ms(t.elapsed());
        let url = pg.url("app");
        let env = [("DATABASE_URL", url.as_str())];
        let t = Instant::now();
        run_sh(&app.migrate_cmd(), &appdir, &env, path)?;
        let migrate_ms = ms(t.elapsed());
        let t = Instant::now();
        run_sh(&app.seed_cmd(), &appdir, &env, path)?;
        let seed_ms = ms(t.elapsed());
        let t = Instant::now();
        let port = free_port();
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(app.service_cmd(&port.to_string()))
            .current_dir(&appdir)
            .env("DATABASE_URL", &url)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("spawn app: {e}"))?;
        let waited = wait_port(port, &mut child);
        let group = Group(vec![child]);
        waited?;
        let app_ms = ms(t.elapsed());
        let t = Instant::now();
        ready_query(&url, args.rows)?;
        let ready_ms = ms(t.elapsed());
        let time_ms = ms(started.elapsed());
        let others = cpu0.others(Cpu::now(&roots(Some(pg.pid))));
        let steps = vec![
            ("initdb", pg.initdb_ms),
            ("start", pg.start_ms),
            ("createdb", createdb_ms),
            ("migrate", migrate_ms),
            ("seed", seed_ms),
            ("app", app_ms),
            ("ready_query", ready_ms),
        ];
        worlds.push(ServerWorld { pg, app: group });

        settle();
        let server = worlds.iter().fold(Mem::of(&[]), |m, w| m.add(w.pg.mem()));
        let app_mem = worlds
            .iter()
            .fold(Mem::of(&[]), |m, w| m.add(Mem::of(&w.app.pids())));
        let mut db_bytes = 0;
        let mut disk = 0;
        for (i, w) in worlds.iter().enumerate() {
            let s = pg_u64(&w.pg.admin_url, "SELECT pg_database_size('app')")?;
            disk += s;
            if i + 1 == n {
                db_bytes = s;
            }
        }
        let datadir: u64 = worlds.iter().map(|w| du(&w.pg.data_dir)).sum();
        let alive_servers = worlds.iter().filter(|w| alive(w.pg.pid)).count();
        if alive_servers != n {
            problems.push(format!(
                "after world {n}: only {alive_servers} of {n} servers alive"
            ));
        }
        let rec = WorldRec {
            n,
            time_ms,
            steps,
            ram: server,
            server,
            daemon: Mem::of(&[]),
            app: app_mem,
            db_bytes,
            disk_bytes: disk,
            datadir_bytes: datadir,
            cloned: None,
            running: alive_servers,
            others_cores: others,
            quiet_wait_s: quiet,
            note: format!("port {}", worlds[n - 1].pg.port),
        };
        eprintln!(
            "a server each: world {n}: {:.2} s (initdb {:.0} ms, start {:.0} ms, seed {:.0} ms), \
             RAM {:.1} MiB (shared memory {:.1}; summed PSS {:.1}, RSS {:.1}), data dirs {:.0} MiB, \
             others {:.2} cores",
            time_ms / 1000.0,
            rec.steps[0].1,
            rec.steps[1].1,
            seed_ms,
            server.main() as f64 / MIB,
            server.shm as f64 / MIB,
            server.pss as f64 / MIB,
            server.rss as f64 / MIB,
            datadir as f64 / MIB,
            others
        );
        recs.push(rec);
    }
    // Every world still answers before the servers go.
    for (i, w) in worlds.iter().enumerate() {
        if let Err(e) = ready_query(&w.pg.url("app"), args.rows) {
            problems.push(format!("world {}: {e}", i + 1));
        }
    }
    drop(worlds);
    Ok(ArmResult {
        arm: Arm::Server,
        base: empty_rec(),
        worlds: recs,
        problems,
        extra: json!({}),
    })
}

// ---------------------------------------------------------------------------------------------
// Arms 2-4: the tools.

/// A tool with one committed repo per `(name, binky.toml)`, each a directory of its root.
struct Tool {
    base: binky_testkit::tool::Tool,
}

binky_testkit::deref_to!(Tool, base: binky_testkit::tool::Tool);

impl Tool {
    /// `env` (`PG_ADMIN` and `PATH`) is given to every command.
    fn new(
        kind: Kind,
        bin: PathBuf,
        env: Vec<(String, String)>,
        app: &App,
        repos: &[(&str, String)],
    ) -> Res<Tool> {
        let prefix = match kind {
            Kind::Rust => "binky-bench-worlds-rs-",
            Kind::Py => "binky-bench-worlds-py-",
        };
        let mut base = binky_testkit::tool::Tool::new(kind, bin, prefix, env)?;
        base.daemon_dir = base.root.join("app");
        base.quiet_remove = true;
        base.remove_timeout = Duration::from_secs(120);
        for (name, toml) in repos {
            let repo = base.root.join(name);
            app.write(&repo, toml)?;
            binky_testkit::git::bench_repo(&repo, ".", &base.home, &base.root)?;
        }
        Ok(Tool { base })
    }

    fn run_ok(&self, repo: &str, args: &[&str], timeout: Duration) -> Res<Run> {
        self.base.run_ok(&self.root.join(repo), args, timeout)
    }

    fn start_daemon(&mut self) -> Res<()> {
        if self.kind == Kind::Rust {
            // Keep binky's proxy off ports 80/443.
            let (p, q) = (free_port().to_string(), free_port().to_string());
            self.run_ok(
                "app",
                &["port", "--proxy", &p, "--https", &q],
                Duration::from_secs(30),
            )?;
        }
        self.run_ok("app", &["daemon", "start"], Duration::from_secs(60))?;
        Ok(())
    }

    /// The daemon's pid, from `binky daemon status` (`… pid N …` in both tools).
    fn daemon_pid(&self) -> Res<u32> {
        let r = self.run_ok("app", &["daemon", "status"], Duration::from_secs(30))?;
        let text = r.stdout;
        binky_testkit::tool::daemon_pid_in(&text)
            .ok_or_else(|| format!("{}: no pid in `daemon status`: {text}", self.label))
    }

    /// `binky up NAME` in `repo`, timed; the world is up when it returns 0.
    fn up(&mut self, repo: &str, name: &str) -> Res<Duration> {
        check_stop()?;
        // Recorded before running: a failed or killed `up` may still leave the world behind.
        let dir = self.root.join(repo);
        self.base.live.push((dir, name.to_owned()));
        let args: &[&str] = match self.kind {
            Kind::Rust => &["up", name, "-q", "--timeout", "600s"],
            Kind::Py => &["up", name],
        };
        Ok(self.run_ok(repo, args, Duration::from_secs(660))?.elapsed)
    }

    /// The world's `DATABASE_URL` as the tool hands it out, and how long asking took.
    fn db_url(&self, repo: &str, name: &str) -> Res<(String, f64)> {
        let args: &[&str] = match self.kind {
            Kind::Rust => &["env", name, "--json"],
            Kind::Py => &["env", name],
        };
        let r = self.run_ok(repo, args, Duration::from_secs(60))?;
        let v: Value = serde_json::from_str(&r.stdout)
            .map_err(|e| format!("{}: `binky env {name}`: {e}: {}", self.label, r.stdout))?;
        let url = match self.kind {
            Kind::Rust => v["env"]["DB_URL"].as_str(),
            Kind::Py => v["db"].as_str(),
        };
        let url = url.ok_or_else(|| format!("{}: no db URL in `binky env {name}`", self.label))?;
        Ok((url.to_owned(), ms(r.elapsed)))
    }

    fn down(&self, repo: &str, name: &str) -> Res<()> {
        self.run_ok(repo, &["down", name], Duration::from_secs(120))
            .map(|_| ())
    }
}

/// A world's database name on the server.
fn world_db(kind: Kind, project: &str, world: &str) -> String {
    match kind {
        // bk_<project>_<world>_<service>
        Kind::Rust => format!("bk_{project}_{world}_db"),
        // <project>_<world>
        Kind::Py => format!("{project}_{world}"),
    }
}

/// The template databases on the server: binky's `bk_golden_…`, 0.1.2's `<project>_golden_…`.
fn templates(admin_url: &str, kind: Kind) -> Res<Vec<String>> {
    let pattern = match kind {
        Kind::Rust => "bk\\_golden\\_%",
        Kind::Py => "%\\_golden\\_%",
    };
    Ok(pg_query(
        admin_url,
        &format!("SELECT datname FROM pg_database WHERE datname LIKE '{pattern}' ORDER BY 1"),
    )?
    .into_iter()
    .filter_map(|r| r.into_iter().next().flatten())
    .collect())
}

/// Sizes of the given databases on the server, by name.
fn db_sizes(admin_url: &str) -> Res<BTreeMap<String, u64>> {
    Ok(pg_query(
        admin_url,
        "SELECT datname, pg_database_size(oid) FROM pg_database WHERE NOT datistemplate",
    )?
    .into_iter()
    .filter_map(|r| {
        let name = r.first()?.clone()?;
        let size = r.get(1)?.as_deref()?.parse().ok()?;
        Some((name, size))
    })
    .collect())
}

/// Count of lines of 0.1.2's event log with `clone_fallback`.
fn py_fallbacks(binky_home: &Path) -> usize {
    fs::read_to_string(binky_home.join("events.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("clone_fallback"))
        .count()
}

/// binky's own account of the world's slice: `(cloned, clone ms)` from `binky events`.
fn rs_clone_event(t: &Tool, name: &str) -> (Option<bool>, Option<f64>) {
    let Ok(r) = t.run_ok(
        "app",
        &["events", name, "--json", "-n", "200"],
        Duration::from_secs(30),
    ) else {
        return (None, None);
    };
    if r.stdout.contains("clone_fallback") {
        return (Some(false), None);
    }
    let clone_ms = r
        .stdout
        .split("from golden template ")
        .nth(1)
        .and_then(|s| {
            let after = s.split(" in ").nth(1)?;
            after.split(" ms").next()?.trim().parse::<f64>().ok()
        });
    (Some(clone_ms.is_some()), clone_ms)
}

fn tool_env(pg: &PgServer, path: &str) -> Vec<(String, String)> {
    vec![
        ("PG_ADMIN".to_owned(), pg.admin_url.clone()),
        ("PATH".to_owned(), path.to_owned()),
    ]
}

/// binky's or 0.1.2's measured sweep on a shared server of its own.
fn arm_tool(
    args: &Args,
    kind: Kind,
    bin: PathBuf,
    bin_dir: &Path,
    app: &App,
    path: &str,
) -> Res<(ArmResult, String)> {
    let arm = match kind {
        Kind::Rust => Arm::Binky,
        Kind::Py => Arm::Binky012,
    };
    let server_started = Instant::now();
    let pg = PgServer::start(bin_dir, pg_parent(args).as_deref(), args.fsync)?;
    let server_start_ms = ms(server_started.elapsed());
    let repos = [
        ("app", app.toml("app", true, None)),
        ("warm", app.toml("warm", false, None)),
    ];
    let mut t = Tool::new(kind, bin, tool_env(&pg, path), app, &repos)?;
    let version = t.version();
    eprintln!("{}: {version} ({})", t.label, t.bin.display());
    t.start_daemon()?;
    // Warm-up: a world with an empty slice and the app (0.1.2 imports psycopg here), no
    // template: the measured first world still builds it.
    let w = t.up("warm", "warm")?;
    let args_rm: &[&str] = match kind {
        Kind::Rust => &["remove", "warm", "--force", "-q"],
        Kind::Py => &["remove", "warm", "--force"],
    };
    t.run_ok("warm", args_rm, Duration::from_secs(120))?;
    let warm = t.root.join("warm");
    t.base.live.retain(|(r, _)| *r != warm);
    eprintln!("{}: warm-up world up in {:.0} ms", t.label, ms(w));
    let capacity = match kind {
        Kind::Rust => None,
        Kind::Py => {
            let r = t.run_ok("app", &["metrics"], Duration::from_secs(30))?;
            let v: Value =
                serde_json::from_str(&r.stdout).map_err(|e| format!("binky metrics: {e}"))?;
            v["admission"]["capacity"].as_u64().map(|c| c as usize)
        }
    };
    let daemon_pid = t.daemon_pid()?;

    let measure = |n: usize, running: usize| -> Res<WorldRec> {
        settle();
        let server = pg.mem();
        let daemon = Mem::of(&[daemon_pid]);
        let below: Vec<u32> = tree(daemon_pid).into_iter().skip(1).collect();
        let app_mem = Mem::of(&below);
        let sizes = db_sizes(&pg.admin_url)?;
        let tpl = templates(&pg.admin_url, kind)?;
        let worlds: u64 = (1..=n)
            .map(|i| {
                sizes
                    .get(&world_db(kind, "app", &format!("w{i:02}")))
                    .copied()
                    .unwrap_or(0)
            })
            .sum();
        let tpl_bytes: u64 = tpl.iter().filter_map(|d| sizes.get(d)).sum();
        let db_bytes = if n == 0 {
            0
        } else {
            sizes
                .get(&world_db(kind, "app", &format!("w{n:02}")))
                .copied()
                .unwrap_or(0)
        };
        Ok(WorldRec {
            n,
            time_ms: 0.0,
            steps: Vec::new(),
            ram: server.add(daemon),
            server,
            daemon,
            app: app_mem,
            db_bytes,
            disk_bytes: worlds + tpl_bytes,
            datadir_bytes: du(&pg.data_dir),
            cloned: None,
            running,
            others_cores: 0.0,
            quiet_wait_s: 0.0,
            note: String::new(),
        })
    };
    let base = measure(0, 0)?;
    let mut recs = Vec::new();
    let mut problems = Vec::new();
    let mut downed: Vec<String> = Vec::new();
    let mut fallbacks_before = py_fallbacks(&t.binky_home);
    for n in 1..=args.max_worlds() {
        check_stop()?;
        let name = format!("w{n:02}");
        // 0.1.2 admits `capacity` running worlds: the oldest running one goes down first
        // (untimed); its worktree and database stay.
        if let Some(cap) = capacity {
            if n > cap {
                let old = format!("w{:02}", n - cap);
                t.down("app", &old)?;
                downed.push(old);
            }
        }
        let roots = [std::process::id(), pg.pid, daemon_pid];
        let waited = wait_quiet(&roots)?;
        let cpu0 = Cpu::now(&roots);
        let started = Instant::now();
        let up = ms(t.up("app", &name)?);
        let (url, env_ms) = t.db_url("app", &name)?;
        let q = Instant::now();
        ready_query(&url, args.rows).map_err(|e| format!("{} {name}: {e}", t.label))?;
        let ready_ms = ms(q.elapsed());
        let time_ms = ms(started.elapsed());
        let others = cpu0.others(Cpu::now(&roots));
        // Untimed checks.
        let (cloned, clone_ms) = match kind {
            Kind::Rust => {
                // The world's role owns its copy (REASSIGN OWNED) and logs in to it.
                let who = pg_query(
                    &url,
                    "SELECT current_user, current_database(), \
                     (SELECT tableowner FROM pg_tables WHERE tablename = 'items')",
                )?;
                let want = world_db(kind, "app", &name);
                let got: Vec<String> = who
                    .first()
                    .map(|r| r.iter().map(|c| c.clone().unwrap_or_default()).collect())
                    .unwrap_or_default();
                if got != [want.clone(), want.clone(), want.clone()] {
                    problems.push(format!(
                        "{name}: user, database, owner of items = {got:?}, want {want}"
                    ));
                }
                rs_clone_event(&t, &name)
            }
            Kind::Py => {
                let f = py_fallbacks(&t.binky_home);
                let fell_back = f > fallbacks_before;
                fallbacks_before = f;
                if fell_back {
                    problems.push(format!(
                        "{name}: binky 0.1.2 logged clone_fallback (migrate and seed ran for the world)"
                    ));
                }
                (Some(!fell_back), None)
            }
        };
        if cloned == Some(false) && kind == Kind::Rust {
            problems.push(format!("{name}: binky did not clone (clone_fallback)"));
        }
        let running = n - downed.len();
        let mut rec = measure(n, running)?;
        rec.time_ms = time_ms;
        rec.steps = vec![("up", up), ("env", env_ms), ("ready_query", ready_ms)];
        if let Some(c) = clone_ms {
            rec.steps.push(("clone_in_daemon", c));
        }
        rec.cloned = cloned;
        rec.others_cores = others;
        rec.quiet_wait_s = waited;
        if !downed.is_empty() {
            rec.note = format!("down (admission cap): {}", downed.join(" "));
        }
        eprintln!(
            "{}: world {n}: {:.2} s (up {:.0} ms, env {:.0} ms{}), RAM {:.1} MiB (server {:.1}, of which \
             shared memory {:.1}, {} procs; daemon {:.1}; summed PSS {:.1}, RSS {:.1}), worlds+template {:.0} MiB, \
             others {:.2} cores",
            t.label,
            time_ms / 1000.0,
            up,
            env_ms,
            clone_ms
                .map(|c| format!(", clone {c:.0} ms"))
                .unwrap_or_default(),
            rec.ram.main() as f64 / MIB,
            rec.server.main() as f64 / MIB,
            rec.server.shm as f64 / MIB,
            rec.server.procs,
            rec.daemon.main() as f64 / MIB,
            rec.ram.pss as f64 / MIB,
            rec.ram.rss as f64 / MIB,
            rec.disk_bytes as f64 / MIB,
            others
        );
        recs.push(rec);
    }
    // Every world still answers, and the server's processes at the end.
    for n in 1..=args.max_worlds() {
        let name = format!("w{n:02}");
        match t.db_url("app", &name) {
            Ok((url, _)) => {
                if let Err(e) = ready_query(&url, args.rows) {
                    problems.push(format!("{name} at the end: {e}"));
                }
            }
            Err(e) => problems.push(format!("{name} at the end: {e}")),
        }
    }
    settle();
    let procs: Vec<Value> = pg
        .pids()
        .into_iter()
        .chain(std::iter::once(daemon_pid))
        .map(|p| {
            let m = Mem::of(&[p]);
            json!({ "pid": p, "cmdline": cmdline(p), "rss_bytes": m.rss, "pss_bytes": m.pss })
        })
        .collect();
    let goldens = match kind {
        Kind::Rust => t
            .run_ok("app", &["golden", "ls", "--json"], Duration::from_secs(30))
            .ok()
            .and_then(|r| serde_json::from_str::<Value>(&r.stdout).ok())
            .map(|v| {
                // No secrets in the results.
                let mut v = v;
                if let Some(a) = v.as_array_mut() {
                    for g in a {
                        if let Some(o) = g.as_object_mut() {
                            o.remove("secret");
                            o.remove("admin_url");
                        }
                    }
                }
                v
            })
            .unwrap_or(Value::Null),
        Kind::Py => Value::Null,
    };
    let tpl = templates(&pg.admin_url, kind)?;
    t.base.teardown();
    // What the tool left on its server after removing every world.
    let left: Vec<String> = pg_query(
        &pg.admin_url,
        "SELECT 'db:' || datname FROM pg_database WHERE datname NOT IN ('postgres', 'template0', 'template1') \
         UNION ALL SELECT 'role:' || rolname FROM pg_roles WHERE left(rolname, 3) <> 'pg_' AND rolname <> 'postgres' \
         ORDER BY 1",
    )?
    .into_iter()
    .filter_map(|r| r.into_iter().next().flatten())
    .collect();
    if !t.leftovers.is_empty() {
        problems.push(format!(
            "{} process(es) left after teardown (killed): {:?}",
            t.leftovers.len(),
            t.leftovers
        ));
    }
    let extra = json!({
        "version": version,
        "binary": t.bin,
        "shared_server_start_ms": server_start_ms,
        "shared_server_data_dir": pg.data_dir,
        "admission_capacity": capacity,
        "templates": tpl,
        "goldens": goldens,
        "processes_at_the_end": procs,
        "left_on_server_after_remove": left,
    });
    Ok((
        ArmResult {
            arm,
            base,
            worlds: recs,
            problems,
            extra,
        },
        version,
    ))
}

// ---------------------------------------------------------------------------------------------
// Arm 4: FILE_COPY against WAL_LOG.

/// `CREATE DATABASE name TEMPLATE tpl STRATEGY s` on one admin connection: (ms, WAL bytes).
fn floor_clone(admin_url: &str, tpl: &str, strategy: &str, name: &str) -> Res<(f64, f64)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls)
            .await
            .map_err(|e| format!("connect: {}", pg_err(&e)))?;
        let task = tokio::spawn(conn);
        let e = |e: tokio_postgres::Error| pg_err(&e);
        let before: String = client
            .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
            .await
            .map_err(e)?
            .get(0);
        let start = Instant::now();
        client
            .batch_execute(&format!(
                "CREATE DATABASE \"{name}\" TEMPLATE \"{tpl}\" STRATEGY = {strategy}"
            ))
            .await
            .map_err(e)?;
        let took = ms(start.elapsed());
        let wal: f64 = client
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::text::pg_lsn)::float8",
                &[&before],
            )
            .await
            .map_err(e)?
            .get(0);
        client
            .batch_execute(&format!("DROP DATABASE \"{name}\""))
            .await
            .map_err(e)?;
        drop(client);
        let _ = task.await;
        Ok((took, wal))
    })
}

/// One strategy's samples.
#[derive(Default)]
struct StratSamples {
    /// `binky up` of a world cloned with it.
    up_ms: Vec<f64>,
    /// The copy inside the daemon (binky's `cloned … in N ms` event).
    clone_ms: Vec<f64>,
    /// WAL written during that `binky up`.
    up_wal: Vec<f64>,
    /// The bare `CREATE DATABASE … TEMPLATE … STRATEGY` on an open admin connection.
    floor_ms: Vec<f64>,
    floor_wal: Vec<f64>,
}

impl StratSamples {
    fn json(&self) -> Value {
        json!({
            "binky_up_ms": summary(&self.up_ms),
            "clone_in_daemon_ms": summary(&self.clone_ms),
            "wal_bytes_during_up": summary(&self.up_wal),
            "create_database_ms": summary(&self.floor_ms),
            "create_database_wal_bytes": summary(&self.floor_wal),
        })
    }
}

fn wal_lsn(admin_url: &str) -> Res<String> {
    pg_one(admin_url, "SELECT pg_current_wal_insert_lsn()::text")
}

fn wal_since(admin_url: &str, lsn: &str) -> Res<f64> {
    let v = pg_one(
        admin_url,
        &format!("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '{lsn}')::float8"),
    )?;
    v.parse().map_err(|_| format!("WAL diff `{v}`"))
}

/// FILE_COPY (binky's default) against WAL_LOG (`options = { clone_strategy = "wal_log" }`):
/// two projects with the same app and key, so both clone the one template.
fn arm_strategy(args: &Args, bin: PathBuf, bin_dir: &Path, app: &App, path: &str) -> Res<Value> {
    let pg = PgServer::start(bin_dir, pg_parent(args).as_deref(), args.fsync)?;
    let repos = [
        ("app", app.toml("app", true, None)),
        (
            "appwal",
            app.toml("appwal", true, Some("clone_strategy = \"wal_log\"")),
        ),
    ];
    let mut t = Tool::new(Kind::Rust, bin, tool_env(&pg, path), app, &repos)?;
    t.start_daemon()?;
    // The template, built by a first world (not measured).
    let build = ms(t.up("app", "s00")?);
    let tpls = templates(&pg.admin_url, Kind::Rust)?;
    let [tpl] = tpls.as_slice() else {
        return Err(format!("strategy: expected one template, found {tpls:?}"));
    };
    let tpl_bytes = pg_u64(&pg.admin_url, &format!("SELECT pg_database_size('{tpl}')"))?;
    eprintln!(
        "strategy: template {tpl} ({:.0} MiB) built by the first world in {:.2} s",
        tpl_bytes as f64 / MIB,
        build / 1000.0
    );
    let mut problems = Vec::new();
    let roots = [std::process::id(), pg.pid, t.daemon_pid()?];
    let (mut fc, mut wl) = (StratSamples::default(), StratSamples::default());
    for i in 1..=args.strategy_worlds {
        let both = [("app", "fc", true), ("appwal", "wl", false)];
        let order = if i % 2 == 1 { both } else { [both[1], both[0]] };
        for (repo, prefix, file_copy) in order {
            check_stop()?;
            let name = format!("{prefix}{i:02}");
            settle();
            wait_quiet(&roots)?;
            let lsn = wal_lsn(&pg.admin_url)?;
            let up = ms(t.up(repo, &name)?);
            let wal = wal_since(&pg.admin_url, &lsn)?;
            let (url, _) = t.db_url(repo, &name)?;
            ready_query(&url, args.rows).map_err(|e| format!("strategy {name}: {e}"))?;
            let ev = t
                .run_ok(repo, &["events", &name, "--json"], Duration::from_secs(30))
                .map(|r| r.stdout)
                .unwrap_or_default();
            let clone_ms = ev.split("from golden template ").nth(1).and_then(|s| {
                s.split(" in ")
                    .nth(1)?
                    .split(" ms")
                    .next()?
                    .trim()
                    .parse::<f64>()
                    .ok()
            });
            if ev.contains("clone_fallback") || clone_ms.is_none() {
                problems.push(format!("strategy {name}: not cloned"));
            }
            let s = if file_copy { &mut fc } else { &mut wl };
            s.up_ms.push(up);
            s.up_wal.push(wal);
            if let Some(c) = clone_ms {
                s.clone_ms.push(c);
            }
            eprintln!(
                "strategy: {name} ({}) up {:.0} ms, clone {} ms, WAL {:.1} MiB",
                if file_copy { "FILE_COPY" } else { "WAL_LOG" },
                up,
                clone_ms.map(|c| format!("{c:.0}")).unwrap_or("?".into()),
                wal / MIB
            );
        }
    }
    // The bare copy on the server, alternating.
    for i in 1..=args.strategy_worlds {
        let both = [("FILE_COPY", true), ("WAL_LOG", false)];
        let order = if i % 2 == 1 { both } else { [both[1], both[0]] };
        for (strategy, file_copy) in order {
            check_stop()?;
            settle();
            wait_quiet(&roots)?;
            let (took, wal) = floor_clone(
                &pg.admin_url,
                tpl,
                strategy,
                &format!("floor_{}_{i}", strategy.to_ascii_lowercase()),
            )?;
            let s = if file_copy { &mut fc } else { &mut wl };
            s.floor_ms.push(took);
            s.floor_wal.push(wal);
        }
    }
    // If the option had been ignored, the two would write the same WAL.
    if median(&wl.up_wal) < 0.5 * tpl_bytes as f64 {
        problems.push(format!(
            "strategy: WAL_LOG worlds wrote only {:.1} MiB of WAL for a {:.1} MiB template: \
             was clone_strategy ignored?",
            median(&wl.up_wal) / MIB,
            tpl_bytes as f64 / MIB
        ));
    }
    t.base.teardown();
    if !t.leftovers.is_empty() {
        problems.push(format!("strategy: leftovers {:?}", t.leftovers));
    }
    Ok(json!({
        "template": tpl,
        "template_bytes": tpl_bytes,
        "template_build_up_ms": build,
        "worlds_per_strategy": args.strategy_worlds,
        "file_copy": fc.json(),
        "wal_log": wl.json(),
        "problems": problems,
    }))
}

// ---------------------------------------------------------------------------------------------
// Reporting.

/// The state of an arm after `n` worlds.
fn at_n(r: Option<&ArmResult>, n: usize) -> Option<&WorldRec> {
    r.and_then(|r| r.at(n))
}

/// The states after `n` and `n - 1` worlds.
fn pair_n(r: Option<&ArmResult>, n: usize) -> Option<(&WorldRec, &WorldRec)> {
    r.and_then(|r| Some((r.at(n)?, r.at(n.checked_sub(1)?)?)))
}

fn fmt_mib(bytes: f64) -> String {
    let m = bytes / MIB;
    if m.abs() >= 100.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.1} MiB")
    }
}

fn fmt_dmib(bytes: f64) -> String {
    let m = bytes / MIB;
    let sign = if m < 0.0 { "-" } else { "+" };
    if m.abs() >= 100.0 {
        format!("{sign}{:.0} MiB", m.abs())
    } else {
        format!("{sign}{:.1} MiB", m.abs())
    }
}

fn fmt_s(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{:.0} ms", ms)
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

fn machine(bin_dir: &Path, args: &Args) -> Value {
    machine_tools(
        "python3",
        json!({
            "postgres": capture(&bin_dir.join("postgres").to_string_lossy(), &["--version"]).unwrap_or_default(),
            "postgres_on_tmpfs": pg_parent(args).is_some(),
        }),
    )
}

fn main() {
    install_signal_handlers();
    let args = or_exit(parse_args());
    let ref_bin = args
        .arms
        .contains(&Arm::Binky012)
        .then(|| binky012_or_exit(INSTALL_HINT, |b| binky012_imports(b, "psycopg")));
    exit_on_failure(
        "worlds",
        bench(&args, PathBuf::from(env!("CARGO_BIN_EXE_binky")), ref_bin),
    );
}

fn bench(args: &Args, rs_bin: PathBuf, py_bin: Option<PathBuf>) -> Res<()> {
    let bin_dir = pg_bin_dir().ok_or(SERVERS_HINT)?;
    let python = capture("python3", &["-c", "import sys; print(sys.executable)"])
        .ok_or("python3 is needed on PATH")?;
    let app = App {
        python,
        rows: args.rows,
    };
    // psql for migrate and seed: the same PostgreSQL's, first on PATH for every command.
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let machine = machine(&bin_dir, args);
    eprintln!("machine: {machine}");
    QUIET_LEFT_MS.store(args.quiet_wait * 1000, Ordering::SeqCst);

    let mut results: Vec<ArmResult> = Vec::new();
    let mut versions = (String::new(), String::new());
    let mut strategy = Value::Null;
    let mut arm_load = serde_json::Map::new();
    for &arm in &args.arms {
        check_stop()?;
        let load_start = loadavg();
        let started = Instant::now();
        eprintln!("--- arm: {} ---", arm.label());
        match arm {
            Arm::Server => results.push(arm_server(args, &bin_dir, &app, &path)?),
            Arm::Binky => {
                let (r, v) = arm_tool(args, Kind::Rust, rs_bin.clone(), &bin_dir, &app, &path)?;
                versions.0 = v;
                results.push(r);
            }
            Arm::Binky012 => {
                let bin = py_bin.clone().ok_or("binky 0.1.2 not found")?;
                let (r, v) = arm_tool(args, Kind::Py, bin, &bin_dir, &app, &path)?;
                versions.1 = v;
                results.push(r);
            }
            Arm::Strategy => {
                strategy = arm_strategy(args, rs_bin.clone(), &bin_dir, &app, &path)?;
            }
        }
        arm_load.insert(
            arm.key().to_owned(),
            json!({ "loadavg_at_start": load_start, "loadavg_at_end": loadavg(), "wall_s": started.elapsed().as_secs_f64() }),
        );
    }

    // ------------------------------------------------------------------ report
    let get = |a: Arm| results.iter().find(|r| r.arm == a);
    let (srv, rs, py) = (get(Arm::Server), get(Arm::Binky), get(Arm::Binky012));
    let cols = [srv, rs, py];
    let ram = |r: Option<&ArmResult>, n: usize| {
        r.and_then(|r| r.at(n))
            .map(|w| fmt_mib(w.ram.main() as f64))
            .unwrap_or("-".into())
    };
    let time = |r: Option<&ArmResult>, n: usize| {
        r.and_then(|r| r.total_ms(n))
            .map(fmt_s)
            .unwrap_or("-".into())
    };
    let dram = |r: Option<&ArmResult>, n: usize| {
        r.and_then(|r| Some((r.at(n)?, r.at(n - 1)?)))
            .map(|(a, b)| fmt_dmib(a.ram.main() as f64 - b.ram.main() as f64))
            .unwrap_or("-".into())
    };
    let dtime = |r: Option<&ArmResult>, n: usize| {
        r.and_then(|r| r.at(n).filter(|_| n > 0))
            .map(|w| format!("+{}", fmt_s(w.time_ms)))
            .unwrap_or("-".into())
    };
    type Cell<'a> = &'a dyn Fn(Option<&ArmResult>, usize) -> String;
    // A row a point of the sweep: its label, then the RAM and the time of each arm.
    let sweep_table = |first: &str, label: &dyn Fn(usize) -> String, ram: Cell, time: Cell| {
        let mut t = Table::with_columns(
            first,
            &[
                "RAM: a server each",
                "RAM: binky",
                "RAM: binky 0.1.2",
                "time: a server each",
                "time: binky",
                "time: binky 0.1.2",
            ],
            &[],
        );
        for &n in &args.sweep {
            let mut cells = vec![label(n)];
            cells.extend(cols.iter().map(|r| ram(*r, n)));
            cells.extend(cols.iter().map(|r| time(*r, n)));
            t.row(&cells.iter().map(String::as_str).collect::<Vec<_>>());
        }
        t
    };
    let t = sweep_table("worlds", &|n| n.to_string(), &ram, &time);
    let m = sweep_table(
        "the Nth world adds",
        &|n| format!("world {n}"),
        &dram,
        &dtime,
    );
    const DISK_COLUMNS: [&str; 6] = [
        "summed RSS / PSS: a server each",
        "binky",
        "binky 0.1.2",
        "disk, DBs / du: a server each",
        "binky",
        "binky 0.1.2",
    ];
    // Disk: the databases (every world's, plus the template once) and `du` of the data
    // directories (WAL, system databases and all).
    let mut d = Table::with_columns("worlds", &DISK_COLUMNS, &[]);
    for &n in &args.sweep {
        let at = |r: Option<&ArmResult>| at_n(r, n).cloned();
        let rss = |r: Option<&ArmResult>| {
            at(r)
                .map(|w| {
                    format!(
                        "{} / {}",
                        fmt_mib(w.ram.rss as f64),
                        fmt_mib(w.ram.pss as f64)
                    )
                })
                .unwrap_or("-".into())
        };
        let disk = |r: Option<&ArmResult>| {
            at(r)
                .map(|w| {
                    format!(
                        "{} / {}",
                        fmt_mib(w.disk_bytes as f64),
                        fmt_mib(w.datadir_bytes as f64)
                    )
                })
                .unwrap_or("-".into())
        };
        d.row(&[
            &n.to_string(),
            &rss(srv),
            &rss(rs),
            &rss(py),
            &disk(srv),
            &disk(rs),
            &disk(py),
        ]);
    }
    let mut dm = Table::with_columns("the Nth world adds", &DISK_COLUMNS, &[]);
    for &n in &args.sweep {
        let pair = |r: Option<&ArmResult>| pair_n(r, n).map(|(a, b)| (a.clone(), b.clone()));
        let drss = |r: Option<&ArmResult>| {
            pair(r)
                .map(|(a, b)| {
                    format!(
                        "{} / {}",
                        fmt_dmib(a.ram.rss as f64 - b.ram.rss as f64),
                        fmt_dmib(a.ram.pss as f64 - b.ram.pss as f64)
                    )
                })
                .unwrap_or("-".into())
        };
        let ddisk = |r: Option<&ArmResult>| {
            pair(r)
                .map(|(a, b)| {
                    format!(
                        "{} / {}",
                        fmt_dmib(a.disk_bytes as f64 - b.disk_bytes as f64),
                        fmt_dmib(a.datadir_bytes as f64 - b.datadir_bytes as f64)
                    )
                })
                .unwrap_or("-".into())
        };
        dm.row(&[
            &format!("world {n}"),
            &drss(srv),
            &drss(rs),
            &drss(py),
            &ddisk(srv),
            &ddisk(rs),
            &ddisk(py),
        ]);
    }

    println!();
    println!(
        "{} rows per world (about 400 bytes each); worlds brought up one after another; \
         RAM = the processes each arm adds (servers' PSS without shared memory + their resident \
         SysV shared memory; daemon PSS; app processes not counted); time = total from the \
         first `up`/initdb until the Nth world answered a query",
        args.rows
    );
    println!("{}", t.render());
    println!("{}", m.render());
    println!("{}", d.render());
    println!("{}", dm.render());

    // Targets.
    let mut targets = Vec::new();
    let mut target = |name: &str, pass: Option<bool>, detail: String| {
        let verdict = match pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "n/a",
        };
        println!("target {verdict}: {name}: {detail}");
        targets.push(json!({ "target": name, "pass": pass, "detail": detail }));
    };
    let eighth = rs.and_then(|r| Some((r.at(8)?, r.at(7)?)));
    match eighth {
        Some((a, b)) => {
            let dram = a.ram.main() as f64 - b.ram.main() as f64;
            let dpss = a.ram.pss as f64 - b.ram.pss as f64;
            let drss = a.ram.rss as f64 - b.ram.rss as f64;
            target(
                "the 8th binky world costs <= 5 MiB",
                Some(dram <= 5.0 * MIB),
                format!(
                    "{} (server + daemon; summed PSS {}, summed RSS {})",
                    fmt_dmib(dram),
                    fmt_dmib(dpss),
                    fmt_dmib(drss)
                ),
            );
            target(
                "the 8th binky world takes <= 0.5 s",
                Some(a.time_ms <= 500.0),
                fmt_s(a.time_ms),
            );
        }
        None => {
            target(
                "the 8th binky world costs <= 5 MiB",
                None,
                "binky did not reach 8 worlds".into(),
            );
            target(
                "the 8th binky world takes <= 0.5 s",
                None,
                "binky did not reach 8 worlds".into(),
            );
        }
    }
    match (rs.and_then(|r| r.at(8)), srv.and_then(|r| r.at(8))) {
        (Some(a), Some(b)) => {
            let ratio = a.ram.main() as f64 / b.ram.main() as f64;
            let ratio_rss = a.ram.rss as f64 / b.ram.rss as f64;
            target(
                "binky's RAM at 8 worlds <= 0.25x a server each",
                Some(ratio <= 0.25),
                format!(
                    "{} vs {}: {ratio:.3}x PSS ({ratio_rss:.3}x RSS)",
                    fmt_mib(a.ram.main() as f64),
                    fmt_mib(b.ram.main() as f64)
                ),
            );
        }
        _ => target(
            "binky's RAM at 8 worlds <= 0.25x a server each",
            None,
            "needs both arms at 8 worlds".into(),
        ),
    }
    match (rs, py) {
        (Some(a), Some(b)) => {
            let mut all = true;
            let mut parts = Vec::new();
            for &n in &args.sweep {
                if let (Some(x), Some(y)) = (a.total_ms(n), b.total_ms(n)) {
                    all &= x < y;
                    parts.push(format!("{n}: {} vs {} ({:.2}x)", fmt_s(x), fmt_s(y), x / y));
                }
            }
            target(
                "binky faster than binky 0.1.2 at every N (total time to N ready worlds)",
                Some(all),
                parts.join("; "),
            );
        }
        _ => target(
            "binky faster than binky 0.1.2 at every N (total time to N ready worlds)",
            None,
            "needs both arms".into(),
        ),
    }

    if !strategy.is_null() {
        let mut st = Table::new(&[
            "clone strategy (median)",
            "binky up",
            "copy in the daemon",
            "WAL during up",
            "bare CREATE DATABASE",
            "its WAL",
        ]);
        for (key, label) in [
            ("file_copy", "FILE_COPY (default)"),
            ("wal_log", "WAL_LOG (options)"),
        ] {
            let s = &strategy[key];
            let med = |k: &str| s[k]["median"].as_f64().unwrap_or(f64::NAN);
            st.row(&[
                label,
                &fmt_s(med("binky_up_ms")),
                &fmt_s(med("clone_in_daemon_ms")),
                &fmt_mib(med("wal_bytes_during_up")),
                &fmt_s(med("create_database_ms")),
                &fmt_mib(med("create_database_wal_bytes")),
            ]);
        }
        println!();
        println!(
            "clone strategy: {} worlds each, alternating, cloned from one template of {}",
            args.strategy_worlds,
            fmt_mib(strategy["template_bytes"].as_f64().unwrap_or(0.0))
        );
        println!("{}", st.render());
        if let Some(p) = strategy["problems"].as_array().filter(|p| !p.is_empty()) {
            for x in p {
                println!("strategy problem: {x}");
            }
        }
    }

    let mut clean = true;
    for r in &results {
        if r.problems.is_empty() {
            println!(
                "{}: every world answered with {} rows on its own URL, when up and at the end",
                r.arm.label(),
                args.rows
            );
        } else {
            clean = false;
            println!("{}: {} problem(s):", r.arm.label(), r.problems.len());
            for p in &r.problems {
                println!("  {p}");
            }
        }
        let others: Vec<f64> = r.worlds.iter().map(|w| w.others_cores).collect();
        if !others.is_empty() {
            println!(
                "{}: processes outside the bench used {:.2} cores on average (max {:.2}) while \
                 its worlds came up; {:.0} s waited for a quiet machine",
                r.arm.label(),
                others.iter().sum::<f64>() / others.len() as f64,
                others.iter().copied().fold(0.0, f64::max),
                r.worlds.iter().map(|w| w.quiet_wait_s).sum::<f64>()
            );
        }
        if let Some(left) = r.extra["left_on_server_after_remove"]
            .as_array()
            .filter(|l| !l.is_empty())
        {
            println!(
                "{}: left on its server after removing every world: {}",
                r.arm.label(),
                left.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    println!("load average at the end: {}", loadavg());

    if let Some(path) = &args.json {
        let points: Vec<Value> = args
            .sweep
            .iter()
            .map(|&n| {
                let one = |r: Option<&ArmResult>| -> Value {
                    let Some(r) = r else { return Value::Null };
                    let (Some(a), Some(b)) = (r.at(n), r.at(n - 1)) else {
                        return Value::Null;
                    };
                    json!({
                        "ram_bytes": a.ram.main(),
                        "ram_pss_bytes": a.ram.pss,
                        "ram_rss_bytes": a.ram.rss,
                        "total_time_ms": r.total_ms(n),
                        "disk_bytes": a.disk_bytes,
                        "datadir_bytes": a.datadir_bytes,
                        "marginal": {
                            "ram_bytes": a.ram.main() as f64 - b.ram.main() as f64,
                            "ram_pss_bytes": a.ram.pss as f64 - b.ram.pss as f64,
                            "ram_rss_bytes": a.ram.rss as f64 - b.ram.rss as f64,
                            "time_ms": a.time_ms,
                            "disk_bytes": a.disk_bytes as f64 - b.disk_bytes as f64,
                            "datadir_bytes": a.datadir_bytes as f64 - b.datadir_bytes as f64,
                        },
                    })
                };
                json!({ "worlds": n, "server_each": one(srv), "binky": one(rs), "binky012": one(py) })
            })
            .collect();
        let report = json!({
            "arm_load": arm_load,
            "settings": {
                "sweep": args.sweep,
                "rows": args.rows,
                "arms": args.arms.iter().map(|a| a.key()).collect::<Vec<_>>(),
                "method": "cumulative: each arm brings up max(sweep) worlds one after another and is measured after every world; the sweep points are read off that run",
                "binky_toml": app.toml("app", true, None),
                "schema_sql": SCHEMA_SQL,
                "seed_sql": SEED_SQL,
                "postgres_flags": if args.fsync {
                    "initdb --auth=scram-sha-256 -E UTF8 --locale=C -N; default durability"
                } else {
                    "initdb --auth=scram-sha-256 -E UTF8 --locale=C -N; -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
                },
                "postgres_on_tmpfs": pg_parent(args).is_some(),
                "quiet_wait_budget_s": args.quiet_wait,
                "quiet": "before each world, wait until processes outside the bench use under 0.2 cores over 1 s (within the budget)",
                "ram": "summed PSS (smaps_rollup) and RSS (VmRSS): arm 1 every process of every server; arms 2-3 the daemon process plus every process of the shared server; app processes not counted (recorded as app_processes)",
                "disk": "arm 1: du of the data directories (and pg_database_size of each app DB as disk_bytes); arms 2-3: pg_database_size of every world DB plus the template once (du of the shared data directory as datadir_bytes)",
            },
            "versions": { "binky": versions.0, "binky012": versions.1 },
            "sweep": points,
            "arms": results.iter().map(ArmResult::json).collect::<Vec<_>>(),
            "targets": targets,
            "strategy": strategy,
            "clean": clean,
        });
        binky_testkit::stats::write_results(path, "worlds", &machine, report)?;
    }
    Ok(())
}
