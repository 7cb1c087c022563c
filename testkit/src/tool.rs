//! One tool under benchmark (binky, or the binky 0.1.2 reference) in its own [`Sandbox`]:
//! its commands run with the sandbox's `HOME` and `BINKY_HOME` and a timeout, and on drop it
//! removes the worlds it may have left, stops its daemon and kills whatever of the sandbox
//! still runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::procs::reap_sandbox;
use crate::run::{run_cmd, Run};
use crate::sandbox::Sandbox;
use crate::stop::check_stop;
use crate::Res;

/// Which binky.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// This repo's binky.
    Rust,
    /// binky 0.1.2 (Python).
    Py,
}

impl Kind {
    /// The name the reports give it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Rust => "binky",
            Kind::Py => "binky 0.1.2",
        }
    }

    /// The arguments that print its version.
    pub fn version_args(self) -> &'static [&'static str] {
        match self {
            Kind::Rust => &["--version"],
            Kind::Py => &["version"],
        }
    }
}

/// A tool in its sandbox.
pub struct Tool {
    /// Which binky.
    pub kind: Kind,
    /// [`Kind::label`].
    pub label: &'static str,
    /// Its executable.
    pub bin: PathBuf,
    /// The sandbox's directory.
    pub root: PathBuf,
    /// Its `HOME`.
    pub home: PathBuf,
    /// Its `BINKY_HOME`.
    pub binky_home: PathBuf,
    /// Given to every command as well.
    pub env: Vec<(String, String)>,
    /// Worlds (the repo they were made in, name) that may exist and must be removed at
    /// teardown.
    pub live: Vec<(PathBuf, String)>,
    /// Set by teardown: processes of this sandbox still alive after remove + daemon stop.
    pub leftovers: Vec<String>,
    /// Teardown's `remove` adds `-q` for binky.
    pub quiet_remove: bool,
    /// Teardown's timeout for one `remove`.
    pub remove_timeout: Duration,
    /// Where [`Tool::version`] and teardown's `daemon stop` run.
    pub daemon_dir: PathBuf,
    torn_down: bool,
    _dir: tempfile::TempDir,
}

impl Tool {
    /// A fresh sandbox named `prefix…` for `bin`; teardown removes worlds without `-q`, 60 s
    /// each, and stops the daemon in the sandbox's root until told otherwise.
    pub fn new(kind: Kind, bin: PathBuf, prefix: &str, env: Vec<(String, String)>) -> Res<Tool> {
        let Sandbox {
            root,
            home,
            binky_home,
            dir,
        } = Sandbox::new(prefix, kind == Kind::Py)?;
        Ok(Tool {
            kind,
            label: kind.label(),
            bin,
            daemon_dir: root.clone(),
            root,
            home,
            binky_home,
            env,
            live: Vec::new(),
            leftovers: Vec::new(),
            quiet_remove: false,
            remove_timeout: Duration::from_secs(60),
            torn_down: false,
            _dir: dir,
        })
    }

    /// The command `bin args` in `dir`, in the sandbox.
    pub fn cmd(&self, dir: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env("BINKY_HOME", &self.binky_home)
            .env_remove("BINKY_LOG")
            .env_remove("RUST_LOG");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Run `bin args` in `dir` (killed after `timeout`); after an interrupt only the
    /// teardown still runs commands.
    pub fn run(&self, dir: &Path, args: &[&str], timeout: Duration) -> Res<Run> {
        if !self.torn_down {
            check_stop()?;
        }
        run_cmd(self.cmd(dir, args), &self.root, timeout)
    }

    /// [`Tool::run`], an error unless it exits 0.
    pub fn run_ok(&self, dir: &Path, args: &[&str], timeout: Duration) -> Res<Run> {
        let r = self.run(dir, args, timeout)?;
        if r.ok() {
            Ok(r)
        } else {
            Err(failed(self.label, args, &r))
        }
    }

    /// Its version (run in [`Tool::daemon_dir`]), or `unknown (why)`.
    pub fn version(&self) -> String {
        self.run_ok(
            &self.daemon_dir,
            self.kind.version_args(),
            Duration::from_secs(30),
        )
        .map(|r| r.stdout.trim().to_owned())
        .unwrap_or_else(|e| format!("unknown ({e})"))
    }

    /// Remove every world (the latest first), stop the daemon, kill whatever of this sandbox
    /// is still alive; once.
    pub fn teardown(&mut self) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        for (dir, w) in std::mem::take(&mut self.live).iter().rev() {
            let mut args = vec!["remove", w.as_str(), "--force"];
            if self.quiet_remove && self.kind == Kind::Rust {
                args.push("-q");
            }
            if let Err(e) = self.run_ok(dir, &args, self.remove_timeout) {
                eprintln!("teardown: {e}");
            }
        }
        let daemon_dir = self.daemon_dir.clone();
        if let Err(e) = self.run_ok(&daemon_dir, &["daemon", "stop"], Duration::from_secs(30)) {
            eprintln!("teardown: {e}");
        }
        // Give exiting processes a moment before calling them leftovers.
        let left = reap_sandbox(&self.binky_home, &self.root, Duration::from_secs(5));
        self.leftovers.extend(left.iter().cloned());
        if !left.is_empty() {
            eprintln!(
                "teardown: {} process(es) of {} were still running after remove + daemon stop; killed:\n  {}",
                left.len(),
                self.label,
                self.leftovers.join("\n  ")
            );
        }
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The versions of binky and of the reference, said on stderr with their binaries, and a
/// warning when the reference is not 0.1.2.
pub fn versions(rs: &Tool, py: &Tool) -> (String, String) {
    let versions = (rs.version(), py.version());
    eprintln!("binky: {} ({})", versions.0, rs.bin.display());
    eprintln!("binky 0.1.2: {} ({})", versions.1, py.bin.display());
    if !versions.1.contains("0.1.2") {
        eprintln!(
            "warning: the reference reports version `{}`, not 0.1.2",
            versions.1
        );
    }
    versions
}

/// The daemon's pid in the text of `binky daemon status` (`… pid N …` in both tools).
pub fn daemon_pid_in(text: &str) -> Option<u32> {
    text.split("pid ").nth(1).and_then(|s| {
        s.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .ok()
    })
}

/// The `[project]` table a bench's `binky.toml` starts with (a blank line after it).
pub fn project_toml(name: &str, low: u16, high: u16) -> String {
    format!("[project]\nname = \"{name}\"\nport_range = [{low}, {high}]\n\n")
}

/// The error for a command that did not exit 0.
pub fn failed(label: &str, args: &[&str], r: &Run) -> String {
    format!(
        "{label}: `binky {}` exited {}\nstdout: {}\nstderr: {}",
        args.join(" "),
        r.status,
        r.stdout.trim(),
        r.stderr.trim()
    )
}

/// The interpreter of a Python entry point (its `#!` line).
pub fn python_of(bin: &Path) -> Option<String> {
    std::fs::read_to_string(bin)
        .ok()?
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .map(|p| p.trim().to_owned())
}

/// The interpreter of binky 0.1.2's entry point, `python3` when it has no `#!` line.
pub fn binky012_python(bin: &Path) -> String {
    python_of(bin).unwrap_or_else(|| "python3".into())
}

/// binky 0.1.2 ([`crate::run::find_binky012`]) when `usable` accepts it, else `hint` on
/// stderr and exit 1.
pub fn binky012_or_exit(hint: &str, usable: impl Fn(&Path) -> bool) -> PathBuf {
    match crate::run::find_binky012().filter(|b| usable(b)) {
        Some(b) => b,
        None => {
            eprintln!("{hint}");
            std::process::exit(1);
        }
    }
}

/// Can the interpreter of binky 0.1.2's entry point import `modules` (`"psycopg, redis"`)?
pub fn binky012_imports(bin: &Path, modules: &str) -> bool {
    Command::new(binky012_python(bin))
        .args(["-c", &format!("import {modules}")])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpreter_is_the_shebang_line_else_python3() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("binky");
        std::fs::write(&bin, "#! /opt/venv/bin/python3.12 \nimport sys\n").unwrap();
        assert_eq!(python_of(&bin).as_deref(), Some("/opt/venv/bin/python3.12"));
        std::fs::write(&bin, "import sys\n").unwrap();
        assert_eq!(python_of(&bin), None);
        assert_eq!(binky012_python(&bin), "python3");
        assert_eq!(binky012_python(&dir.path().join("none")), "python3");
    }

    #[test]
    fn the_daemon_pid_follows_the_first_pid_word() {
        assert_eq!(
            daemon_pid_in("daemon running (pid 4242, up 3s)"),
            Some(4242)
        );
        assert_eq!(daemon_pid_in("binky daemon: pid 17\n"), Some(17));
        assert_eq!(daemon_pid_in("daemon not running"), None);
        assert_eq!(daemon_pid_in("pid x"), None);
    }

    #[test]
    fn a_project_table_names_the_project_and_its_ports() {
        assert_eq!(
            project_toml("bench", 21000, 21999),
            "[project]\nname = \"bench\"\nport_range = [21000, 21999]\n\n"
        );
    }

    #[test]
    fn kinds_have_their_labels_and_version_arguments() {
        assert_eq!(Kind::Rust.label(), "binky");
        assert_eq!(Kind::Py.label(), "binky 0.1.2");
        assert_eq!(Kind::Rust.version_args(), ["--version"]);
        assert_eq!(Kind::Py.version_args(), ["version"]);
    }
}
