//! Dashboard benchmark: the web dashboard with 40 worlds up, in a real headless Chromium.
//!
//! 1. **page ready**: from opening the sign-in link (a fresh one each run) until the page
//!    lists every world as `ready`.
//! 2. **first log line**: a service prints a line (it stamps the time it printed it); the
//!    time until the line is in the page's DOM (the page stamps when it added it).
//! 3. **daemon CPU** while one browser follows the log of a service printing 1,000 lines a
//!    second (a 41st world), against the same printing with no page following; the CPU of
//!    the service's log scrubber (`binky __scrub`, its own process) is shown apart.
//!
//! Run: `cargo bench --bench dashboard [-- --worlds 40 --runs 5 --cpu-secs 20 --json PATH]`
//! (it runs `target/release/binky`, or `--binky PATH`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use binky_testkit::args::Flags;
use binky_testkit::browser::Browser;
use binky_testkit::stats::{median, ms, p90, summary};
use binky_testkit::table::Table;
use binky_testkit::Res;

const USAGE: &str =
    "cargo bench --bench dashboard [-- --worlds N --runs N --cpu-secs N --binky PATH --json PATH]";

struct Bench {
    binky: PathBuf,
    home: PathBuf,
    repo: PathBuf,
}

impl Bench {
    fn cmd(&self, args: &[&str]) -> Res<String> {
        let mut cmd = Command::new(&self.binky);
        cmd.args(args)
            .current_dir(&self.repo)
            .env("BINKY_HOME", &self.home);
        // The bench signs its browser in as the person: `binky dashboard` needs a terminal.
        let _terminal = binky_testkit::terminal::for_person(&mut cmd, args);
        let out = cmd
            .output()
            .map_err(|e| format!("{}: {e}", self.binky.display()))?;
        if !out.status.success() {
            return Err(format!(
                "binky {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn link(&self) -> Res<String> {
        let out = self.cmd(&["dashboard", "--no-open", "--json"])?;
        let v: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        Ok(v["url"].as_str().unwrap_or_default().to_owned())
    }

    fn daemon_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.home.join("daemon.lock"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// CPU time (user + system) of `pid` so far, in seconds.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command.
    let hz = binky_testkit::run::capture("getconf", &["CLK_TCK"])
        .and_then(|t| t.trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    (ticks(11) + ticks(12)) / hz
}

/// The `binky __scrub` processes writing `log`.
fn scrubbers_of(log: &Path) -> Vec<u32> {
    binky_testkit::procs::with_cmdline(&["__scrub", &log.display().to_string()])
}

/// Percent of one core that `pids` used over `secs`.
fn cpu_over(pids: &[u32], secs: u64) -> f64 {
    let before: f64 = pids.iter().map(|p| cpu_secs(*p)).sum();
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let after: f64 = pids.iter().map(|p| cpu_secs(*p)).sum();
    (after - before) / t.elapsed().as_secs_f64() * 100.0
}

fn config(low: u16) -> String {
    let project = binky_testkit::tool::project_toml("dash", low, low + 400);
    format!(
        r#"{project}[groups]
quiet = ["api"]
talk = ["api", "talk"]
loud = ["api", "loud"]

[services.api]
cmd = "exec sleep 1000000"

[services.talk]
cmd = "while true; do if [ -f say ]; then echo \"said $(cat say) at $(date +%s%3N)\"; rm -f say; fi; sleep 0.02; done"

[services.loud]
cmd = "exec python3 -c \"import sys,time;t=time.time();[(sys.stdout.write('loud line %d %.3f\\n' % (i, time.time())), sys.stdout.flush(), time.sleep(max(0, t + i / 1000 - time.time()))) for i in range(10**9)]\""
"#
    )
}

fn main() {
    if let Err(e) = run() {
        eprintln!("dashboard bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let mut flags = Flags::from_env(USAGE);
    let (mut worlds, mut runs, mut cpu_window) = (40usize, 5usize, 20usize);
    let mut binky = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/binky");
    let mut json_out: Option<PathBuf> = None;
    while let Some(f) = flags.next_flag() {
        match f.as_str() {
            "--worlds" => worlds = flags.number_in("--worlds", 1..=200)?,
            "--runs" => runs = flags.number_in("--runs", 1..=100)?,
            "--cpu-secs" => cpu_window = flags.number_in("--cpu-secs", 1..=600)?,
            "--binky" => {
                let p = PathBuf::from(flags.value("--binky")?);
                binky = std::fs::canonicalize(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            }
            "--json" => json_out = Some(PathBuf::from(flags.value("--json")?)),
            other => return Err(flags.unknown(other)),
        }
    }
    if !binky.is_file() {
        return Err(format!(
            "{} not found: `cargo build --release` first, or pass --binky PATH",
            binky.display()
        ));
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let b = Bench {
        binky,
        home: dir.path().join("home"),
        repo: dir.path().join("repo"),
    };
    binky_testkit::git::init_repo(&b.repo);
    // Clear of the kernel's ephemeral ports (32768+); the port controller probes each.
    let low = 20000 + (std::process::id() % 24) as u16 * 500;
    std::fs::write(b.repo.join("binky.toml"), config(low)).map_err(|e| e.to_string())?;
    binky_testkit::git::commit_all(&b.repo, "init");
    let (http, https) = (low + 450, low + 451);
    b.cmd(&[
        "port",
        "--proxy",
        &http.to_string(),
        "--https",
        &https.to_string(),
    ])?;
    // A panic (the browser's) must not skip the teardown below.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        measure(&b, worlds, runs, cpu_window as u64)
    }))
    .unwrap_or_else(|_| Err("the measurement panicked (above)".to_owned()));
    // Everything goes, whatever happened.
    for w in b
        .cmd(&["status", "--json"])
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        .and_then(|v| v["worlds"].as_array().cloned())
        .unwrap_or_default()
    {
        if let Some(name) = w["name"].as_str() {
            let _ = b.cmd(&["remove", name, "--force", "-q"]);
        }
    }
    let _ = b.cmd(&["daemon", "stop"]);
    let out = result?;
    if let Some(p) = json_out {
        std::fs::write(&p, serde_json::to_string_pretty(&out).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

fn measure(b: &Bench, worlds: usize, runs: usize, cpu_window: u64) -> Res<Value> {
    let started = Instant::now();
    b.cmd(&["up", "talk", "--group", "talk", "-q"])?;
    for i in 1..worlds {
        b.cmd(&["up", &format!("w{i:02}"), "--group", "quiet", "-q"])?;
    }
    eprintln!(
        "{worlds} worlds up in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let mut browser = Browser::start(1400, 1000);

    // 1. Page ready: every world listed as ready.
    let mut ready = Vec::new();
    for _ in 0..runs {
        let link = b.link()?;
        browser.navigate("about:blank#x");
        let t = Instant::now();
        browser.call("Page.navigate", json!({ "url": link }));
        browser.wait_for(
            "every world ready in the page",
            Duration::from_secs(60),
            &format!(
                "document.querySelectorAll('tr.world[data-state=\"ready\"]').length === {worlds}"
            ),
        );
        ready.push(ms(t.elapsed()));
    }

    // 2. First log line: printed by the service, shown in the page.
    browser.eval("document.querySelector('tr.world[data-world=\"talk\"]').click()");
    browser.wait_for(
        "the log live",
        Duration::from_secs(20),
        "document.getElementById('log-state').textContent === 'live'",
    );
    let worktree = b
        .repo
        .parent()
        .unwrap_or(Path::new("/"))
        .join("repo.worktrees/talk");
    let mut lines = Vec::new();
    for i in 0..(runs * 4) {
        let marker = format!("m{i}-{}", std::process::id());
        std::fs::write(worktree.join("say"), &marker).map_err(|e| e.to_string())?;
        let v = browser.wait_for(
            "the line in the page",
            Duration::from_secs(10),
            &format!("(() => {{ const d = [...document.querySelectorAll('#log .line')].find(l => l.textContent.includes('{marker}')); return d ? d.textContent + ' | ' + d.dataset.at : ''; }})()"),
        );
        let text = v.as_str().unwrap_or_default();
        let printed: f64 = text
            .split(" at ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| format!("no print time in {text}"))?;
        let shown: f64 = text
            .rsplit(" | ")
            .next()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| format!("no arrival time in {text}"))?;
        lines.push(shown - printed);
    }

    // 3. Daemon CPU with a 1,000 lines/s service, without and with a page following it.
    b.cmd(&["up", "loud", "--group", "loud", "-q"])?;
    let daemon = b.daemon_pid().ok_or("no daemon pid")?;
    let log = b.home.join("logs/dash/loud/loud.log");
    let scrub = scrubbers_of(&log);
    browser.navigate("about:blank#idle");
    std::thread::sleep(Duration::from_secs(2)); // the page's streams closed
    let idle_daemon = cpu_over(&[daemon], cpu_window);
    let link = b.link()?;
    browser.call("Page.navigate", json!({ "url": link }));
    browser.wait_for(
        "the loud world listed",
        Duration::from_secs(60),
        "!!document.querySelector('tr.world[data-world=\"loud\"]')",
    );
    browser.eval("document.querySelector('tr.world[data-world=\"loud\"]').click()");
    browser.wait_for(
        "the loud log live",
        Duration::from_secs(20),
        "document.getElementById('log-state').textContent === 'live'",
    );
    let lines_in = |p: &Path| {
        std::fs::read(p)
            .map(|b| b.iter().filter(|c| **c == b'\n').count())
            .unwrap_or(0)
    };
    let before = lines_in(&log);
    let t = Instant::now();
    let daemon_following = cpu_over(&[daemon], cpu_window);
    let rate = (lines_in(&log) - before) as f64 / t.elapsed().as_secs_f64();
    let scrub_cpu = cpu_over(&scrub, 5);
    let shown = browser.eval(
        "[...document.querySelectorAll('#log .line')].filter(l => l.textContent.includes('loud line')).length",
    );
    drop(browser);

    let mut table = Table::new(&["measure", "median", "p90", "n"]);
    table.row_owned(&[
        format!("page ready, {worlds} worlds (ms)"),
        format!("{:.0}", median(&ready)),
        format!("{:.0}", p90(&ready)),
        ready.len().to_string(),
    ]);
    table.row_owned(&[
        format!("first log line, {worlds} worlds up (ms)"),
        format!("{:.0}", median(&lines)),
        format!("{:.0}", p90(&lines)),
        lines.len().to_string(),
    ]);
    println!("{}", table.render());
    println!(
        "daemon CPU with a service printing ~{rate:.0} lines/s: {idle_daemon:.1}% of a core with no page, {daemon_following:.1}% with one page following its log ({cpu_window}s windows); its scrubber {scrub_cpu:.1}%; lines in the page: {shown}"
    );
    Ok(json!({
        "worlds": worlds,
        "page_ready_ms": summary(&ready),
        "first_log_line_ms": summary(&lines),
        "loud_lines_per_sec": rate,
        "daemon_cpu_percent_no_page": idle_daemon,
        "daemon_cpu_percent_following": daemon_following,
        "scrubber_cpu_percent": scrub_cpu,
        "machine": binky_testkit::procs::machine_with(json!({})),
    }))
}
