//! `${secret:REF}` in a service's `env`: resolved when the process is spawned, never when
//! the config is read or stored, so no value reaches the store, an event or a log line that
//! binky writes.
//!
//! A value comes from the machine's `secret_command` setting (`binky settings
//! secret_command="op read op://vault/{ref}"`; `{ref}` is replaced by the reference, shell-
//! quoted), else from `BINKY_SECRET_<REF>` in the daemon's environment (`REF` upper-cased,
//! other characters as `_`). Every resolution is recorded in `$BINKY_HOME/secrets-audit.log`
//! (mode 0600): when, which world and service, which reference, from where — never the value.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;

use binky_controllers::store::{self, Store};

/// Where secrets come from, and where their use is recorded.
#[derive(Clone)]
pub struct Secrets {
    store: Store,
    audit: PathBuf,
}

/// The references in `text`: `${secret:REF}` → `REF`.
pub fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("${secret:") {
        let after = &rest[i + 9..];
        let Some(end) = after.find('}') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    out
}

fn valid_ref(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 200
        && r.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':'))
}

/// `BINKY_SECRET_<REF>`.
pub fn env_name(r: &str) -> String {
    let up: String = r
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("BINKY_SECRET_{up}")
}

/// How long a `secret_command` may take (a vault that asks for a password never answers).
pub const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// [`COMMAND_TIMEOUT`], or `BINKY_SECRET_TIMEOUT_MS` in the daemon's environment (for tests).
fn command_timeout() -> std::time::Duration {
    std::env::var("BINKY_SECRET_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(COMMAND_TIMEOUT, std::time::Duration::from_millis)
}

/// Run `cmd` with stdout and stderr captured (read as they come, so a command printing more
/// than a pipe holds does not stall), killed after [`COMMAND_TIMEOUT`].
fn run_bounded(cmd: &str) -> Result<std::process::Output, String> {
    use std::io::Read;
    let mut command = binky_platform::process::shell_command_std(cmd);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = binky_platform::process::in_new_group(&mut command)
        .spawn()
        .map_err(|e| format!("cannot run: {e}"))?;
    fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let limit = command_timeout();
    let until = std::time::Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => {
                // The whole group: a shell's children hold the pipes open too.
                let _ = binky_platform::job::kill_group(child.id());
                let _ = child.wait();
                return Err(format!(
                    "did not answer within {} and was stopped",
                    humantime::format_duration(limit)
                ));
            }
        }
    };
    Ok(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

impl Secrets {
    /// Secrets configured in `store`, audited to `audit`.
    pub fn new(store: Store, audit: PathBuf) -> Self {
        Secrets { store, audit }
    }

    fn fetch(&self, r: &str) -> Result<(String, &'static str), String> {
        if !valid_ref(r) {
            return Err(format!(
                "secret reference `{r}` is not valid: use letters, digits and _ - . / :"
            ));
        }
        let command = self
            .store
            .read(|c| store::setting(c, "secret_command"))
            .ok()
            .flatten()
            .filter(|c| !c.trim().is_empty());
        if let Some(template) = command {
            let cmd = template.replace("{ref}", &format!("'{r}'"));
            let out = run_bounded(&cmd).map_err(|e| format!("secret `{r}`: secret_command {e}"))?;
            if !out.status.success() {
                // The command's stderr may name the problem; its stdout is never shown.
                let err = String::from_utf8_lossy(&out.stderr);
                return Err(format!(
                    "secret `{r}`: secret_command failed ({}): {}",
                    out.status,
                    err.trim().lines().last().unwrap_or("")
                ));
            }
            let mut v = String::from_utf8_lossy(&out.stdout).into_owned();
            while v.ends_with('\n') || v.ends_with('\r') {
                v.pop();
            }
            return Ok((v, "secret_command"));
        }
        let name = env_name(r);
        match std::env::var(&name) {
            Ok(v) => Ok((v, "daemon environment")),
            Err(_) => Err(format!(
                "secret `{r}`: no secret_command is set and {name} is not in the daemon's environment; set one (`binky settings secret_command=\"op read op://vault/{{ref}}\"`) or start the daemon with {name}"
            )),
        }
    }

    /// Replace every `${secret:REF}` in `env`'s values for a process of `world`/`service`.
    /// Returns the values it put in, for the log scrubber.
    pub fn resolve(
        &self,
        world: i64,
        service: &str,
        env: &mut BTreeMap<String, String>,
    ) -> Result<Vec<String>, String> {
        let mut known = BTreeMap::new();
        self.resolve_with(world, service, env, &mut known)?;
        Ok(known.into_values().collect())
    }

    /// [`Secrets::resolve`], taking a reference's value from `known` (by reference) where it
    /// is there, and adding each one fetched: a service's health command gets the values
    /// its service was started with.
    pub fn resolve_with(
        &self,
        world: i64,
        service: &str,
        env: &mut BTreeMap<String, String>,
        known: &mut BTreeMap<String, String>,
    ) -> Result<(), String> {
        for value in env.values_mut() {
            for r in references(value) {
                if !known.contains_key(&r) {
                    let (v, from) = self.fetch(&r)?;
                    self.audit(world, service, &r, from);
                    known.insert(r.clone(), v);
                }
                *value = value.replace(&format!("${{secret:{r}}}"), &known[&r]);
            }
        }
        Ok(())
    }

    fn audit(&self, world: i64, service: &str, r: &str, from: &str) {
        let name = self
            .store
            .read(|c| store::world(c, world))
            .ok()
            .flatten()
            .map(|w| format!("{}/{}", w.project, w.name))
            .unwrap_or_else(|| format!("world {world}"));
        let mut opts = std::fs::OpenOptions::new();
        opts.create(true).append(true);
        binky_platform::fs::with_mode(&mut opts, 0o600);
        if let Ok(mut f) = opts.open(&self.audit) {
            let _ = writeln!(
                f,
                "{} {name} {service} {r} from {from}",
                humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_env_names() {
        assert_eq!(
            references("a ${secret:db/pw} b ${secret:x} ${db.url}"),
            vec!["db/pw", "x"]
        );
        assert_eq!(env_name("stripe.key-1"), "BINKY_SECRET_STRIPE_KEY_1");
        assert!(valid_ref("op/vault/item:field"));
        assert!(!valid_ref("x'; rm -rf ~"));
    }
}
