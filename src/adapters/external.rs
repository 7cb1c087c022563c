//! External adapters: any executable `binky-adapter-<name>` on PATH, driven over binky
//! 0.1.2's one-shot JSON protocol, so adapters written for 0.1.2 work unchanged.
//!
//! # Protocol
//! binky runs `binky-adapter-<name> <verb>` (`provision`, `resolve`, `teardown`,
//! `capabilities`, `clone`), writes one JSON object on its stdin and closes it:
//!
//! ```json
//! {"slice": "bk_acme_w_files", "secret": "9f…", "config": {"root": "/srv", "admin_url": null, "buckets": []}}
//! ```
//!
//! `config` is the service's `options` flattened, then `admin_url` (string or null) and
//! `buckets` (both win over an option of the same name). `capabilities` sends only
//! `{"config": …}`; `clone` sends `"source"` and `"dest"` instead of `"slice"`.
//! The adapter answers one JSON object on stdout: `{"ok": true, …}` (resolve adds
//! `"address"`, capabilities adds `"capabilities": {"clone": bool}`) or
//! `{"ok": false, "error": "…"}`. `examples/adapters/` holds a complete adapter.
//!
//! # Decisions
//! - **The secret is sent** as a top-level `"secret"` (the dest's, for `clone`): an adapter
//!   that makes per-slice credentials needs a password binky keeps. 0.1.2's adapters
//!   ignore keys they do not know, so this stays compatible. It travels on stdin, never in
//!   arguments (`ps` shows arguments to every user).
//! - **Extra answer fields become tokens**: resolve's `{"ok": true, "address": "…",
//!   "prefix": "bk_x:"}` gives `${svc.prefix}`. Strings, numbers and booleans are taken
//!   (as text), under names of `[A-Za-z0-9_]`; `ok`, `address`, `error`, `url` and `port`
//!   are not tokens.
//! - **Timeout**: every call must answer within 60 s, or `BINKY_ADAPTER_TIMEOUT` (`30s`,
//!   `2m`, read from the daemon's environment when the adapter is looked up). Not an
//!   `options` key: those are the adapter's own and are passed through to it.
//! - **No external failure is transient**, timeouts included: the protocol cannot tell a
//!   server that is down from a broken adapter, and retrying a call that hangs for a minute
//!   would keep `binky up` waiting silently. The world fails with the adapter's message and
//!   the next `binky up` tries again.
//! - `list` is not part of the protocol: an external adapter lists nothing.
//!
//! # Guarantees
//! - The adapter runs in its own process group; on a timeout (or when the call is dropped)
//!   the whole group is killed, so a hanging `sh` leaves no `sleep` behind.
//! - Output is read up to 1 MiB per stream; a missing binary, a non-zero exit, an answer
//!   that is not a JSON object, `"ok": false` and a resolve without `"address"` each give
//!   an [`AdapterError::External`] naming the adapter, the verb and what to look at.
//! - A background process the adapter leaves holding its stdout does not hold binky: once
//!   the adapter exits, its pipes get one more second.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

// A name an external adapter can have: the rule `binky.toml`'s `adapter` is held to too.
use super::kind::is_external_name as safe_name;
use super::{Adapter, AdapterConfig, AdapterError, Address, Capabilities, Result, Slice};

/// The environment variable that sets how long a call may take (`30s`, `2m`).
pub const TIMEOUT_VAR: &str = "BINKY_ADAPTER_TIMEOUT";
/// How long a call may take when [`TIMEOUT_VAR`] is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of each of stdout and stderr is kept.
pub const OUTPUT_LIMIT: usize = 1 << 20;
/// How long the pipes may stay open after the adapter exited.
const PIPE_GRACE: Duration = Duration::from_secs(1);
/// Answer fields that are protocol, not tokens (and token names binky owns).
const NOT_TOKENS: &[&str] = &["ok", "address", "error", "url", "port"];

/// An external adapter executable.
#[derive(Clone, Debug)]
pub struct External {
    name: String,
    path: PathBuf,
    timeout: Duration,
}

impl External {
    /// The external adapter `binky-adapter-<name>` on PATH, if there is one. `name` must be
    /// `[a-z0-9_-]` (at most 64 characters): anything else could reach outside the
    /// `binky-adapter-` prefix, and is never looked up. Empty PATH entries (the current
    /// directory, to a shell) are skipped: the daemon's directory is not the user's.
    pub fn find(name: &str) -> Option<External> {
        let path = std::env::var_os("PATH")?;
        Self::find_in(name, &path)
    }

    /// Like [`External::find`], searching `path` (a PATH value) instead of this process's.
    pub fn find_in(name: &str, path: &std::ffi::OsStr) -> Option<External> {
        if !safe_name(name) {
            return None;
        }
        let file = format!("binky-adapter-{name}");
        std::env::split_paths(path)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join(&file))
            .find(|candidate| executable(candidate))
            .map(|candidate| {
                let candidate = std::path::absolute(&candidate).unwrap_or(candidate);
                External::at(name, candidate)
            })
    }

    /// The adapter `name` at an explicit path (not checked until it runs).
    pub fn at(name: &str, path: impl Into<PathBuf>) -> External {
        External {
            name: name.to_owned(),
            path: path.into(),
            timeout: timeout_from_env(),
        }
    }

    /// The same adapter with another per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> External {
        self.timeout = timeout;
        self
    }

    /// The adapter's name (`filestore`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The executable.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long one call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn error(&self, verb: &str, detail: impl Into<String>) -> AdapterError {
        AdapterError::External {
            name: self.name.clone(),
            verb: verb.to_owned(),
            detail: detail.into(),
        }
    }

    /// Run one verb with `request` on stdin; the answer, once it says `"ok": true`.
    async fn call(&self, verb: &str, request: Value) -> Result<Map<String, Value>> {
        let body = request.to_string().into_bytes();
        let out = self.run(verb, body).await?;
        self.judge(verb, out)
    }

    /// Spawn, feed, read and reap the adapter, within the timeout.
    async fn run(&self, verb: &str, body: Vec<u8>) -> Result<Output> {
        let mut cmd = tokio::process::Command::new(&self.path);
        cmd.arg(verb)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        binky_platform::process::in_new_group_async(&mut cmd);
        let mut child = spawn(&mut cmd)
            .await
            .map_err(|e| self.spawn_error(verb, &e))?;
        // The group id is the leader's pid; the guard kills the group if this future is
        // dropped before the leader is reaped (after that, the id could be reused).
        let mut guard = GroupGuard(child.id());
        let (Some(stdin), Some(mut stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(self.error(verb, "could not open its stdin/stdout/stderr"));
        };
        let write = async move {
            let mut stdin = stdin;
            // An adapter that does not read stdin (0.1.2's SDK for `capabilities`) closes
            // it: a broken pipe here is not a failure, its answer decides.
            let _ = stdin.write_all(&body).await;
            let _ = stdin.shutdown().await;
        };
        tokio::pin!(write);
        let deadline = Instant::now() + self.timeout;
        let (mut out, mut err) = (Capped::default(), Capped::default());
        let (mut out_open, mut err_open, mut written) = (true, true, false);
        let mut status: Option<ExitStatus> = None;
        let mut stop_at = deadline;
        loop {
            if status.is_some() && !out_open && !err_open {
                break;
            }
            tokio::select! {
                () = &mut write, if !written => written = true,
                open = out.fill(&mut stdout), if out_open => out_open = open,
                open = err.fill(&mut stderr), if err_open => err_open = open,
                s = child.wait(), if status.is_none() => match s {
                    Ok(s) => {
                        guard.disarm();
                        status = Some(s);
                        stop_at = deadline.min(Instant::now() + PIPE_GRACE);
                    }
                    Err(e) => return Err(self.error(verb, format!("could not wait for it: {e}"))),
                },
                () = tokio::time::sleep_until(stop_at) => {
                    if status.is_some() {
                        // Exited; something it left behind holds the pipes. Its answer is in.
                        break;
                    }
                    guard.kill();
                    let _ = child.wait().await;
                    guard.disarm();
                    return Err(self.error(
                        verb,
                        format!(
                            "did not answer within {}; killed it and its process group (set {TIMEOUT_VAR} for slower adapters){}",
                            seconds(self.timeout),
                            err.tail_note(),
                        ),
                    ));
                }
            }
        }
        let status = status.ok_or_else(|| self.error(verb, "did not exit"))?;
        Ok(Output { status, out, err })
    }

    fn spawn_error(&self, verb: &str, e: &std::io::Error) -> AdapterError {
        let path = self.path.display();
        let detail = match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{path} is gone (or its `#!` interpreter is missing); reinstall binky-adapter-{} on PATH",
                self.name
            ),
            std::io::ErrorKind::PermissionDenied => {
                format!("{path} is not executable; `chmod +x {path}`")
            }
            _ => format!("could not run {path}: {e}"),
        };
        self.error(verb, detail)
    }

    /// Turn what the adapter did into its answer or an error.
    fn judge(&self, verb: &str, o: Output) -> Result<Map<String, Value>> {
        let stdout = String::from_utf8_lossy(&o.out.data);
        let stderr = String::from_utf8_lossy(&o.err.data);
        if !o.status.success() {
            let how = match (
                o.status.code(),
                binky_platform::process::exit_signal(&o.status),
            ) {
                (Some(code), _) => format!("exit {code}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                (None, None) => o.status.to_string(),
            };
            // Its own words first: stderr, else an error it answered, else stdout.
            let said = if !stderr.trim().is_empty() {
                tail(&stderr)
            } else if let Some(e) = parsed_error(&stdout) {
                e
            } else {
                tail(&stdout)
            };
            return Err(self.error(
                verb,
                if said.is_empty() {
                    format!("failed ({how}) without output")
                } else {
                    format!("failed ({how}): {said}")
                },
            ));
        }
        if o.out.overflow {
            return Err(self.error(
                verb,
                format!(
                    "answered more than {} MiB; expected one JSON object",
                    OUTPUT_LIMIT >> 20
                ),
            ));
        }
        if stdout.trim().is_empty() {
            return Err(self.error(
                verb,
                format!(
                    "answered nothing on stdout; expected one JSON object like {{\"ok\": true}}{}",
                    o.err.tail_note()
                ),
            ));
        }
        let value: Value = serde_json::from_str(&stdout).map_err(|e| {
            self.error(
                verb,
                format!(
                    "answered something that is not JSON ({e}): {}",
                    head(&stdout)
                ),
            )
        })?;
        let Value::Object(answer) = value else {
            return Err(self.error(
                verb,
                format!(
                    "answered JSON that is not an object: {}; expected {{\"ok\": true, …}}",
                    head(&stdout)
                ),
            ));
        };
        match answer.get("ok") {
            Some(Value::Bool(true)) => Ok(answer),
            Some(Value::Bool(false)) => Err(self.error(
                verb,
                match answer.get("error") {
                    Some(Value::String(e)) if !e.trim().is_empty() => e.trim().to_owned(),
                    Some(other) if !other.is_null() => other.to_string(),
                    _ => "answered {\"ok\": false} without an \"error\"".to_owned(),
                },
            )),
            _ => Err(self.error(
                verb,
                format!("answered without \"ok\": true or false: {}", head(&stdout)),
            )),
        }
    }
}

/// Spawn, retrying a few times on `ETXTBSY`: an adapter being written (installed) right
/// now, or held open by a fork in another thread, is busy for a moment.
async fn spawn(cmd: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    const ETXTBSY: i32 = 26;
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(ETXTBSY) && tries < 5 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20 * tries)).await;
            }
            other => return other,
        }
    }
}

/// `{"config": …}`: options flattened, then `admin_url` and `buckets`, as the protocol has it.
fn config_json(cfg: &AdapterConfig) -> Value {
    let mut config: Map<String, Value> = cfg
        .options
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    config.insert(
        "admin_url".into(),
        cfg.admin_url.clone().map_or(Value::Null, Value::String),
    );
    config.insert(
        "buckets".into(),
        Value::Array(cfg.buckets.iter().cloned().map(Value::String).collect()),
    );
    Value::Object(config)
}

#[async_trait::async_trait]
impl Adapter for External {
    fn kind(&self) -> Option<super::AdapterKind> {
        // Found by its executable's name (`find`), never by a kind's.
        None
    }

    async fn capabilities(&self, cfg: &AdapterConfig) -> Result<Capabilities> {
        let answer = self
            .call("capabilities", json!({ "config": config_json(cfg) }))
            .await?;
        let clone = answer
            .get("capabilities")
            .and_then(|c| c.get("clone"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(Capabilities { clone })
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        self.call("provision", slice_request(slice, cfg))
            .await
            .map(drop)
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        let answer = self.call("resolve", slice_request(slice, cfg)).await?;
        let url = match answer.get("address") {
            Some(Value::String(a)) if !a.trim().is_empty() => a.clone(),
            other => {
                return Err(self.error(
                    "resolve",
                    format!(
                        "answered {} instead of the slice's address; resolve must answer {{\"ok\": true, \"address\": \"…\"}}",
                        match other {
                            None => "no \"address\"".to_owned(),
                            Some(v) => format!("\"address\": {v}"),
                        }
                    ),
                ))
            }
        };
        Ok(Address {
            url,
            tokens: tokens(&answer),
        })
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        self.call("teardown", slice_request(slice, cfg))
            .await
            .map(drop)
    }

    async fn clone_slice(&self, from: &Slice, to: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let request = json!({
            "source": from.name,
            "dest": to.name,
            "secret": to.secret,
            "config": config_json(cfg),
        });
        self.call("clone", request).await.map(drop)
    }
}

/// The request of the verbs that work on one slice.
fn slice_request(slice: &Slice, cfg: &AdapterConfig) -> Value {
    json!({ "slice": slice.name, "secret": slice.secret, "config": config_json(cfg) })
}

/// Resolve's extra scalar fields, as tokens.
fn tokens(answer: &Map<String, Value>) -> BTreeMap<String, String> {
    answer
        .iter()
        .filter(|(k, _)| {
            !NOT_TOKENS.contains(&k.as_str())
                && !k.is_empty()
                && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
        .filter_map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some((k.clone(), text))
        })
        .collect()
}

/// A regular file (after symlinks) someone may execute.
fn executable(path: &Path) -> bool {
    binky_platform::fs::is_executable(path)
}

fn timeout_from_env() -> Duration {
    match std::env::var(TIMEOUT_VAR) {
        Ok(text) => match crate::duration::parse_duration(&text) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) | Err(_) => {
                tracing::warn!(value = %text, "{TIMEOUT_VAR} is not a positive duration like `30s`; using 60 s");
                DEFAULT_TIMEOUT
            }
        },
        Err(_) => DEFAULT_TIMEOUT,
    }
}

/// `60 s`, `1.5 s`, `200 ms`.
fn seconds(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// The first 200 characters, for a message.
fn head(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("`{}…`", &text[..i]),
        None => format!("`{text}`"),
    }
}

/// The last lines (at most 20, at most 2000 characters), for a message.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let mut out = lines[lines.len().saturating_sub(20)..].join("\n");
    let count = out.chars().count();
    if count > 2000 {
        out = format!("…{}", out.chars().skip(count - 2000).collect::<String>());
    }
    out.trim().to_owned()
}

/// The `"error"` of an `{"ok": false, "error": …}` answer, if stdout is one.
fn parsed_error(stdout: &str) -> Option<String> {
    let v: Value = serde_json::from_str(stdout).ok()?;
    v.get("error")?.as_str().map(|e| e.trim().to_owned())
}

/// What an adapter run left: its exit status and output.
struct Output {
    status: ExitStatus,
    out: Capped,
    err: Capped,
}

/// Output kept up to [`OUTPUT_LIMIT`]; more is read and dropped, so the adapter never
/// blocks on a full pipe.
#[derive(Default)]
struct Capped {
    data: Vec<u8>,
    overflow: bool,
}

impl Capped {
    /// Read one chunk; false once the stream is closed (or broken).
    async fn fill(&mut self, r: &mut (impl AsyncRead + Unpin)) -> bool {
        let mut buf = [0u8; 8192];
        // `read` is cancel-safe: a chunk is never lost when another branch wins.
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                let room = OUTPUT_LIMIT.saturating_sub(self.data.len());
                self.data.extend_from_slice(&buf[..n.min(room)]);
                self.overflow |= n > room;
                true
            }
        }
    }

    /// `; its stderr: …` with the tail of this stream, or nothing.
    fn tail_note(&self) -> String {
        let text = String::from_utf8_lossy(&self.data);
        let t = tail(&text);
        if t.is_empty() {
            String::new()
        } else {
            format!("; its stderr: {t}")
        }
    }
}

/// Kills the adapter's process group unless disarmed (once the leader is reaped).
struct GroupGuard(Option<u32>);

impl GroupGuard {
    fn kill(&self) {
        if let Some(pid) = self.0 {
            let _ = binky_platform::signal::send_group(pid, "SIGKILL");
        }
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_names_are_looked_up() {
        for good in ["filestore", "s3-local", "my_store2"] {
            assert!(safe_name(good), "{good}");
        }
        for bad in ["", "../x", "a/b", "Store", "x y", "a.b", &"a".repeat(65)] {
            assert!(!safe_name(bad), "{bad}");
            assert!(External::find_in(bad, std::ffi::OsStr::new("/bin")).is_none());
        }
    }

    #[test]
    fn the_config_is_flat_and_reserved_keys_win() {
        let cfg = AdapterConfig {
            admin_url: None,
            options: [
                ("root".to_owned(), "/x".to_owned()),
                ("buckets".to_owned(), "no".to_owned()),
            ]
            .into(),
            buckets: vec!["a".into()],
            ..AdapterConfig::default()
        };
        assert_eq!(
            config_json(&cfg),
            json!({"root": "/x", "admin_url": null, "buckets": ["a"]})
        );
    }

    #[test]
    fn extra_scalar_fields_become_tokens() {
        let answer = json!({"ok": true, "address": "x://", "prefix": "bk:", "db": 3,
            "nested": {"a": 1}, "url": "no", "bad-name": "no"});
        let t = tokens(answer.as_object().unwrap());
        assert_eq!(
            t,
            [
                ("db".to_owned(), "3".to_owned()),
                ("prefix".to_owned(), "bk:".to_owned())
            ]
            .into()
        );
    }

    #[test]
    fn messages_quote_the_start_and_the_end() {
        assert_eq!(head("  abc \n"), "`abc`");
        assert!(head(&"x".repeat(500)).ends_with("…`"));
        let many: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let t = tail(&many);
        assert!(t.starts_with("line 30") && t.ends_with("line 49"), "{t}");
        assert_eq!(seconds(Duration::from_secs(60)), "60 s");
        assert_eq!(seconds(Duration::from_millis(300)), "300 ms");
    }
}
