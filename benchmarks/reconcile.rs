//! Reconcile benchmark: how long after `binky.toml` is saved does the changed service run
//! again, not counting that service's own start time — with N worlds up.
//!
//! Setup: one repository, one `BINKY_HOME`, `--worlds` worlds (default 10) of three
//! services each: `api` (a small Python HTTP server with an HTTP health check), `web` (the
//! same, interpolating `${api.url}`) and `side` (`sleep`). Then `--edits` times (default
//! 40), round-robin over the worlds, the benchmark rewrites one world's `binky.toml` with a
//! new `env` value for `api` and waits until the world's events show `api` ready again.
//!
//! Per edit, from the daemon's event timestamps (ms) and the benchmark's clock:
//! - **reconcile latency** = (when the new `api` process was started) − (when the file was
//!   written): the watcher noticing, batching, validating, planning and writing the spec,
//!   the process controller stopping the old process and spawning the new one. The service's
//!   own start (spawn → health check passes) is excluded, as the issue asks;
//! - the same through the comparator arm, in the same run: the file written with the daemon's
//!   watcher still on, and `binky apply NAME --no-wait` run at once by the benchmark (what an
//!   agent without a watcher would do: binky 0.1.2 has no live reconcile; its way is
//!   `binky up` again, which restarts every service);
//! - the full time to ready (write → `api` ready), for reference.
//!
//! Every edit is checked: `api` really restarted (a new pid) with the new value, `web` and
//! `side` kept their pids.
//!
//! Run: `cargo bench --bench reconcile [-- --worlds N --edits N --json PATH]`.

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use binky_testkit::args::{or_exit, Flags};
use binky_testkit::Res;

const SERVER_PY: &str = r#"
import http.server, json, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(dict(os.environ)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

struct Args {
    worlds: usize,
    edits: usize,
    json: Option<PathBuf>,
}

const USAGE: &str =
    "usage: cargo bench --bench reconcile -- [--worlds N] [--edits N] [--json PATH]";

fn parse_args() -> Res<Args> {
    let mut a = Args {
        worlds: 10,
        edits: 40,
        json: None,
    };
    // Both flags are positive numbers.
    a.json = Flags::from_env(USAGE).each(|f, flag| {
        let n = match flag {
            "--worlds" => &mut a.worlds,
            "--edits" => &mut a.edits,
            _ => return Ok(false),
        };
        *n = f.positive(flag, false)?;
        Ok(true)
    })?;
    Ok(a)
}

fn free_port_block(len: u16) -> u16 {
    // A block of ports nobody listens on now, away from the usual ranges.
    let mut base = 41000 + (std::process::id() % 200) as u16 * 60;
    loop {
        if (base..base + len).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return base;
        }
        base += len;
    }
}

fn config(low: u16, value: usize) -> String {
    let project = binky_testkit::tool::project_toml("reconcile", low, low + 199);
    format!(
        r#"{project}[services.api]
cmd = "exec python3 server.py ${{self.port}}"
url = true
health = "/"
env = {{ VALUE = "{value}" }}

[services.web]
cmd = "exec python3 server.py ${{self.port}}"
url = true
env = {{ API = "${{api.url}}" }}

[services.side]
cmd = "exec sleep 100000"
"#
    )
}

struct Bench {
    bin: PathBuf,
    dir: tempfile::TempDir,
    repo: PathBuf,
    home: PathBuf,
}

impl Bench {
    fn binky(&self, args: &[&str]) -> Res<Output> {
        Command::new(&self.bin)
            .args(args)
            .current_dir(&self.repo)
            .env("BINKY_HOME", &self.home)
            .output()
            .map_err(|e| e.to_string())
    }

    fn ok(&self, args: &[&str]) -> Res<String> {
        let out = self.binky(args)?;
        if !out.status.success() {
            return Err(format!(
                "binky {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn worktree(&self, w: &str) -> PathBuf {
        self.dir.path().join("repo.worktrees").join(w)
    }

    fn pids(&self, w: &str) -> Res<BTreeMap<String, u64>> {
        let v: Value =
            serde_json::from_str(&self.ok(&["status", w, "--json"])?).map_err(|e| e.to_string())?;
        Ok(v["services"]
            .as_array()
            .ok_or("no services")?
            .iter()
            .filter_map(|s| Some((s["name"].as_str()?.to_owned(), s["pid"].as_u64()?)))
            .collect())
    }

    fn events(&self, w: &str) -> Res<Vec<Value>> {
        let v: Value = serde_json::from_str(&self.ok(&["events", w, "--json", "-n", "40"])?)
            .map_err(|e| e.to_string())?;
        Ok(v.as_array().cloned().unwrap_or_default())
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

struct Sample {
    latency_ms: i64,
    to_ready_ms: i64,
}

/// Write world `w`'s file with `value` (and run `binky apply` at once when `apply`), then
/// wait for `api` to be ready again; check the restart.
fn edit(b: &Bench, low: u16, w: &str, value: usize, apply: bool) -> Res<Sample> {
    let before = b.pids(w)?;
    let last_id = b
        .events(w)?
        .last()
        .and_then(|e| e["id"].as_i64())
        .unwrap_or(0);
    let path = b.worktree(w).join("binky.toml");
    let tmp = path.with_extension("toml.tmp");
    fs::write(&tmp, config(low, value)).map_err(|e| e.to_string())?;
    let written = now_ms();
    fs::rename(&tmp, &path).map_err(|e| e.to_string())?;
    if apply {
        b.ok(&["apply", w, "--no-wait"])?;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let (started, ready) = loop {
        if Instant::now() > deadline {
            return Err(format!("{w}: api did not come back within 30 s"));
        }
        let evs: Vec<Value> = b
            .events(w)?
            .into_iter()
            .filter(|e| e["id"].as_i64().unwrap_or(0) > last_id)
            .collect();
        let at = |kind: &str, prefix: &str| {
            evs.iter()
                .find(|e| {
                    e["kind"] == kind && e["message"].as_str().is_some_and(|m| m.contains(prefix))
                })
                .and_then(|e| e["at"].as_i64())
        };
        if let (Some(s), Some(r)) = (at("started", "started api "), at("ready", "api ready")) {
            break (s, r);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let after = b.pids(w)?;
    if after.get("api") == before.get("api") {
        return Err(format!("{w}: api did not restart"));
    }
    for s in ["web", "side"] {
        if after.get(s) != before.get(s) {
            return Err(format!("{w}: {s} restarted on an edit of api's env"));
        }
    }
    Ok(Sample {
        latency_ms: started - written,
        to_ready_ms: ready - written,
    })
}

fn pct(v: &mut [i64], p: f64) -> i64 {
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn run(args: &Args) -> Res<Value> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let repo = dir.path().join("repo");
    let home = dir.path().join("home");
    fs::create_dir_all(&repo).map_err(|e| e.to_string())?;
    let low = free_port_block(220);
    let b = Bench {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_binky")),
        dir,
        repo: repo.clone(),
        home,
    };
    let git = |a: &[&str]| -> Res<()> {
        let ok = Command::new("git")
            .args(a)
            .current_dir(&repo)
            .output()
            .map_err(|e| e.to_string())?
            .status
            .success();
        ok.then_some(()).ok_or_else(|| format!("git {a:?} failed"))
    };
    git(&["init", "-q", "-b", "main"])?;
    git(&["config", "user.email", "b@example.com"])?;
    git(&["config", "user.name", "b"])?;
    fs::write(repo.join("binky.toml"), config(low, 0)).map_err(|e| e.to_string())?;
    fs::write(repo.join("server.py"), SERVER_PY).map_err(|e| e.to_string())?;
    git(&["add", "-A"])?;
    git(&["commit", "-qm", "init"])?;
    let (p, s) = ((low + 205).to_string(), (low + 206).to_string());
    b.ok(&["port", "--proxy", &p, "--https", &s])?;
    let worlds: Vec<String> = (0..args.worlds).map(|i| format!("w{i:02}")).collect();
    let result = (|| -> Res<Value> {
        for w in &worlds {
            b.ok(&["up", w, "-q"])?;
        }
        // Let the watcher pick every world up and the machine settle.
        std::thread::sleep(Duration::from_secs(3));
        let mut watch = Vec::new();
        let mut apply = Vec::new();
        for i in 0..args.edits {
            let w = &worlds[i % worlds.len()];
            // Alternate the arms so drift over the run hits both alike.
            let via_apply = (i / worlds.len()) % 2 == 1;
            let s = edit(&b, low, w, i + 1, via_apply)?;
            eprintln!(
                "edit {i:>3} {w} {:<8} latency {:>4} ms, to ready {:>4} ms",
                if via_apply { "apply" } else { "watcher" },
                s.latency_ms,
                s.to_ready_ms
            );
            if via_apply {
                apply.push(s);
            } else {
                watch.push(s);
            }
        }
        let summary = |v: &[Sample]| {
            let mut lat: Vec<i64> = v.iter().map(|s| s.latency_ms).collect();
            let mut rdy: Vec<i64> = v.iter().map(|s| s.to_ready_ms).collect();
            if lat.is_empty() {
                return json!(null);
            }
            json!({
                "n": lat.len(),
                "latency_p50_ms": pct(&mut lat, 0.5),
                "latency_p90_ms": pct(&mut lat, 0.9),
                "latency_max_ms": pct(&mut lat, 1.0),
                "to_ready_p50_ms": pct(&mut rdy, 0.5),
            })
        };
        Ok(json!({
            "worlds": worlds.len(),
            "services_per_world": 3,
            "edits": args.edits,
            "watcher": summary(&watch),
            "apply": summary(&apply),
            "target_p50_ms": 200,
        }))
    })();
    for w in &worlds {
        let _ = b.binky(&["remove", w, "--force"]);
    }
    let _ = b.binky(&["daemon", "stop"]);
    result
}

fn main() {
    let args = or_exit(parse_args());
    match run(&args) {
        Ok(v) => {
            let w = &v["watcher"];
            let a = &v["apply"];
            println!(
                "\nreconcile, {} worlds x 3 services, {} edits of api's env",
                v["worlds"], v["edits"]
            );
            println!("| arm | edits | latency p50 | p90 | max | write -> ready p50 |");
            println!("| --- | ---: | ---: | ---: | ---: | ---: |");
            for (name, s) in [("file watcher", w), ("`binky apply` at once", a)] {
                println!(
                    "| {name} | {} | {} ms | {} ms | {} ms | {} ms |",
                    s["n"],
                    s["latency_p50_ms"],
                    s["latency_p90_ms"],
                    s["latency_max_ms"],
                    s["to_ready_p50_ms"]
                );
            }
            let p50 = w["latency_p50_ms"].as_i64().unwrap_or(i64::MAX);
            println!(
                "target: watcher p50 <= 200 ms with {} worlds: {} ({p50} ms)",
                v["worlds"],
                if p50 <= 200 { "PASS" } else { "MISS" }
            );
            if let Some(p) = &args.json {
                let _ = fs::write(p, serde_json::to_string_pretty(&v).unwrap_or_default());
            }
        }
        Err(e) => {
            eprintln!("reconcile benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
