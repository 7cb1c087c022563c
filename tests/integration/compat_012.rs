//! binky 0.1.2's own configs run here: every `binky.toml` of its sdist that 0.1.2 accepts
//! (its examples, the configs its docs show, its tests' fixtures) goes through `binky check`
//! and `binky up`, and binky acts on it.
//!
//! `scripts/test` downloads the sdist (`pip download binky==0.1.2`), installs 0.1.2 into a
//! venv and runs `tests/compat/extract_012.py`, which collects the configs and keeps the
//! ones 0.1.2's own validator accepts (nothing of 0.1.2 is in this repository); the
//! directory is `$BINKY_TEST_COMPAT_012`.
//!
//! For each config, in a repository and binky home of its own:
//! - `binky check` finds no error (warnings are fine), unless the config is one 0.1.2 also
//!   refuses when it comes up ([`REFUSED`], with why);
//! - `binky up` writes the world (its `${env.NAME}` given a value: a real PostgreSQL's
//!   admin URL where an adapter's `admin_url` reads it, else a placeholder; a port range of
//!   this test's own);
//! - the daemon acts on every service: a process is started (or waits, saying for what), a
//!   slice is made or fails saying why; nothing is left waiting in silence;
//! - `binky remove` leaves nothing behind.
//!
//! 0.1.2's example `hello` comes up and answers through the proxy. Its example `rag` runs
//! its `migrate` into a golden template on a real PostgreSQL; that needs the pgvector
//! extension, which Debian 12 does not package, so the template fails with the server's
//! own words (`extension "vector" is not available`), which binky shows.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::*;
use crate::pg_server::PgServer;

/// Configs binky refuses, as 0.1.2 does when they come up: (source in the sdist, why).
const REFUSED: &[(&str, &str)] = &[(
    "tests/test_up_down.py:271",
    "a dependency cycle: 0.1.2's own test expects `up` to fail with \"cycle\"",
)];

/// The directory `scripts/test` fills.
fn compat_dir() -> PathBuf {
    test_cache(
        "BINKY_TEST_COMPAT_012",
        "compat-012/configs",
        &["manifest.json"],
    )
}

/// One config of the sdist: its directory and where it came from.
struct Config {
    dir: PathBuf,
    source: String,
    text: String,
}

fn configs() -> Vec<Config> {
    let dir = compat_dir();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let out: Vec<Config> = manifest
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["accepted"] == true)
        .map(|m| {
            let d = dir.join(m["dir"].as_str().unwrap());
            Config {
                text: std::fs::read_to_string(d.join("binky.toml")).unwrap(),
                source: m["source"].as_str().unwrap().to_owned(),
                dir: d,
            }
        })
        .collect();
    // The sdist holds 40 configs 0.1.2 accepts; far fewer means the extraction broke.
    assert!(out.len() >= 35, "only {} configs extracted", out.len());
    out
}

/// The `${env.NAME}` references of a config (without a default).
fn env_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("${env.") {
        let after = &rest[i + 6..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if after[end..].starts_with('}') {
            out.insert(after[..end].to_owned());
        }
        rest = &after[end..];
    }
    out
}

/// The config with this test's port range in its `[project]` (a config's own range, e.g.
/// `[4000, 4999]`, would be shared with every other test running now).
fn with_range(text: &str, range: &str) -> String {
    let mut out = String::new();
    let mut in_project = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            in_project = t.starts_with("[project]");
            out.push_str(line);
            out.push('\n');
            if in_project {
                out.push_str(range);
                out.push('\n');
            }
            continue;
        }
        if in_project && t.starts_with("port_range") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A directory whose `python` is the compat venv's Python (0.1.2's examples run `python`;
/// that venv has what they import).
fn python_bin(tmp: &Path) -> PathBuf {
    let venv = compat_dir().parent().unwrap().join("venv/bin/python");
    assert!(venv.is_file(), "no {}: run ./scripts/test", venv.display());
    let bin = tmp.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // A script, not a symlink: Python finds its venv from the path it was started by.
    let shim = bin.join("python");
    std::fs::write(
        &shim,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", venv.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// A world on `cfg` in a home of its own, `up` with `vars`.
fn world_of(cfg: &Config, vars: &[(String, String)]) -> (Env, std::process::Output) {
    let env = Env::new("[project]\nname = \"placeholder\"\n");
    for entry in walk(&cfg.dir) {
        let rel = entry.strip_prefix(&cfg.dir).unwrap();
        if rel == Path::new("binky.toml") || rel == Path::new("SOURCE") {
            continue;
        }
        let to = env.repo.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    env.write_config(&with_range(&cfg.text, &env.range()));
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "0.1.2 config"]);
    // binky keeps an unused golden template for a week (binky 0.1.2 dropped it with the
    // world); the run checks that removing the world leaves nothing on the shared server.
    env.ok(&["settings", "golden_keep=0"]);
    let path = format!(
        "{}:{}",
        python_bin(env.repo.parent().unwrap()).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut all: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    all.push(("PATH", &path));
    let out = env.binky_env(&["up", "w", "--no-wait"], &all);
    (env, out)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Has the daemon acted on every service of `w`: a process started or waiting with a
/// reason, a slice made or failed with one?
fn acted_on(env: &Env) -> Result<(), String> {
    let services = env.services("w");
    let silent: Vec<String> = services
        .iter()
        .filter(|s| s["state"] == "pending" && s["message"].as_str().unwrap_or("").is_empty())
        .map(|s| s["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    if services.is_empty() {
        // A file of only [project] (0.1.2's test of `up` outside a git repository): the
        // world is up with nothing to run.
        let status = env.ok(&["status", "w", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&status).unwrap();
        return match v["state"].as_str() {
            Some("ready") => Ok(()),
            other => Err(format!("a world with no services is {other:?}")),
        };
    }
    if !silent.is_empty() {
        return Err(format!("not acted on: {silent:?} of {services:?}"));
    }
    Ok(())
}

/// `binky check` of `cfg`: `Ok(false)` when it is refused as [`REFUSED`] says.
fn check(cfg: &Config) -> Result<bool, String> {
    let refused = REFUSED.iter().find(|(s, _)| *s == cfg.source);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("binky.toml"), &cfg.text).unwrap();
    let out = std::process::Command::new(binky_bin())
        .args(["check", "binky.toml", "--json"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("check --json: {e}: {}", stdout(&out)))?;
    match (refused, v["ok"] == true) {
        (Some((_, why)), true) => Err(format!("passed check, but binky should refuse it: {why}")),
        (Some(_), false) => Ok(false),
        (None, true) => Ok(true),
        (None, false) => Err(format!(
            "binky check refuses a config binky 0.1.2 accepts: {}",
            v["findings"]
        )),
    }
}

/// `binky up` of `cfg`, the daemon acting on each service, `binky remove`: the services'
/// states, for the report.
fn run(cfg: &Config, pg: &PgServer) -> Result<String, String> {
    let vars: Vec<(String, String)> = env_names(&cfg.text)
        .into_iter()
        .map(|n| {
            let admin = cfg
                .text
                .lines()
                .any(|l| l.contains("admin_url") && l.contains(&format!("${{env.{n}}}")));
            let value = if admin {
                pg.admin_url.clone()
            } else {
                "compat-012".to_owned()
            };
            (n, value)
        })
        .collect();
    let (env, out) = world_of(cfg, &vars);
    if !out.status.success() {
        return Err(format!(
            "binky up refuses a config binky 0.1.2 accepts ({:?}): {}",
            out.status.code(),
            stderr(&out)
        ));
    }
    let mut last = String::new();
    let acted =
        binky_testkit::wait::wait_for(Duration::from_secs(60), Duration::from_millis(100), || {
            match acted_on(&env) {
                Ok(()) => true,
                Err(e) => {
                    last = e;
                    false
                }
            }
        });
    let mut problem = (!acted).then(|| format!("the daemon did not act: {last}"));
    if problem.is_none() && cfg.source == "examples/rag/binky.toml" {
        // migrate ran (0.1.2's own migrate.py) and failed on the server's missing pgvector:
        // binky says so where the user looks.
        let said = binky_testkit::wait::wait_for(
            Duration::from_secs(60),
            Duration::from_millis(200),
            || {
                env.ok(&["status", "w", "--json"])
                    .contains("extension \\\"vector\\\" is not available")
            },
        );
        if !said {
            problem = Some(format!(
                "no word of the missing vector extension: {}",
                env.ok(&["status", "w", "--json"])
            ));
        }
    }
    let states: Vec<String> = env
        .services("w")
        .iter()
        .map(|s| {
            format!(
                "{}={}",
                s["name"].as_str().unwrap_or("?"),
                s["state"].as_str().unwrap_or("?")
            )
        })
        .collect();
    env.ok(&["remove", "w", "--force", "-q"]);
    env.assert_nothing_left(&["w"]);
    match problem {
        Some(p) => Err(p),
        None => Ok(states.join(" ")),
    }
}

#[test]
fn every_config_binky_0_1_2_accepts_is_checked_and_run() {
    let all = configs();
    let pg = PgServer::start();
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for cfg in &all {
        let outcome = check(cfg).and_then(|runs| {
            if runs {
                run(cfg, &pg)
            } else {
                Ok("refused, as binky 0.1.2 refuses it at up".to_owned())
            }
        });
        match outcome {
            Ok(states) => report.push(format!("{}: {states}", cfg.source)),
            Err(why) => failures.push(format!(
                "{}: {why}\n--- binky.toml ---\n{}",
                cfg.source, cfg.text
            )),
        }
    }
    eprintln!(
        "{} configs of binky 0.1.2 ran:\n{}",
        report.len(),
        report.join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} of {} configs failed:\n\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
    wait_until("every slice to be dropped", Duration::from_secs(20), || {
        pg.slice_databases().is_empty()
    });
    pg.assert_no_slices();
}

#[test]
fn binky_0_1_2_s_hello_example_comes_up_and_answers() {
    let cfg = configs()
        .into_iter()
        .find(|c| c.source == "examples/hello/binky.toml")
        .expect("examples/hello in the sdist");
    let (env, out) = world_of(&cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until("hello's web to be ready", Duration::from_secs(30), || {
        env.services("w")
            .iter()
            .any(|s| s["name"] == "web" && s["ready"] == true)
    });
    // Through the proxy, at web.w.hello.localhost.
    let page = env.ok(&["curl", "w", "web", "/app.py", "-i"]);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("binds the port Binky injected"), "{page}");
    env.ok(&["remove", "w", "-q"]);
    env.assert_nothing_left(&["w"]);
}
