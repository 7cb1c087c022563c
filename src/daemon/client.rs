//! Talking to the daemon, and starting it on demand.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::paths::Home;
use crate::protocol::{Request, Response};

/// Why the daemon could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nobody listens on the socket.
    #[error("the binky daemon is not running")]
    NotRunning,
    /// It did not answer in time.
    #[error("the binky daemon did not answer within {0:?}; see {1}")]
    Timeout(Duration, String),
    /// It could not be started.
    #[error("cannot start the binky daemon: {0}")]
    Start(String),
    /// It answered with an error.
    #[error("the binky daemon refused: {0}")]
    Refused(String),
}

/// A command that cannot reach the daemon has failed (exit 1), saying why.
impl From<ClientError> for crate::failure::Failure {
    fn from(e: ClientError) -> crate::failure::Failure {
        crate::failure::Failure::failed(e.to_string())
    }
}

/// Send one request and read one answer.
pub async fn request(
    home: &Home,
    req: &Request,
    timeout: Duration,
) -> Result<Response, ClientError> {
    let socket = home.socket();
    let work = async {
        let stream = binky_platform::ipc::connect(&socket)
            .await
            .map_err(|_| ClientError::NotRunning)?;
        let (read, mut write) = tokio::io::split(stream);
        let mut line =
            serde_json::to_string(req).map_err(|e| ClientError::Refused(e.to_string()))?;
        line.push('\n');
        write
            .write_all(line.as_bytes())
            .await
            .map_err(|_| ClientError::NotRunning)?;
        let mut reader = BufReader::new(read);
        let mut answer = String::new();
        reader
            .read_line(&mut answer)
            .await
            .map_err(|_| ClientError::NotRunning)?;
        if answer.is_empty() {
            return Err(ClientError::NotRunning);
        }
        let resp: Response =
            serde_json::from_str(&answer).map_err(|e| ClientError::Refused(e.to_string()))?;
        if resp.ok {
            Ok(resp)
        } else {
            Err(ClientError::Refused(resp.error.unwrap_or_default()))
        }
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| ClientError::Timeout(timeout, home.daemon_log().display().to_string()))?
}

/// Ping the daemon.
pub async fn ping(home: &Home) -> Result<Response, ClientError> {
    ping_within(home, Duration::from_secs(3)).await
}

/// Ping the daemon, giving up after `timeout` (a view that only shows whether it runs).
pub async fn ping_within(home: &Home, timeout: Duration) -> Result<Response, ClientError> {
    request(home, &Request::Ping, timeout).await
}

/// Nudge the daemon about a world (best effort: the daemon resyncs anyway).
pub async fn nudge(home: &Home, world: Option<i64>) -> Result<(), ClientError> {
    request(home, &Request::Nudge { world }, Duration::from_secs(3))
        .await
        .map(drop)
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

/// Whether the daemon lock names a live process other than `ours`: another command's daemon
/// took the lock first and is still starting.
fn other_daemon_starting(home: &Home, ours: u32) -> bool {
    std::fs::read_to_string(home.lock())
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .is_some_and(|pid| pid != ours && binky_platform::process::alive(pid))
}

/// Make sure a daemon runs for `home`, starting one (detached) if needed.
pub async fn ensure(home: &Home) -> Result<Response, ClientError> {
    match ping(home).await {
        Ok(info) => return Ok(info),
        // It runs, busy: starting another would only lose the lock to it.
        Err(e @ ClientError::Timeout(..)) => return Err(e),
        Err(_) => {}
    }
    home.ensure()
        .map_err(|e| ClientError::Start(format!("{}: {e}", home.root().display())))?;
    let exe = std::env::current_exe().map_err(|e| ClientError::Start(e.to_string()))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.daemon_log())
        .map_err(|e| ClientError::Start(format!("{}: {e}", home.daemon_log().display())))?;
    let mut cmd = std::process::Command::new(exe);
    // The same daemon whoever starts it (`clean`): never with a world's variables or mark.
    let origin = crate::person::origin();
    cmd.args(["daemon", "run"])
        .env_clear()
        .envs(super::clean::environment(std::env::vars_os(), &origin))
        .env("BINKY_HOME", home.root())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .current_dir("/");
    // Its own session (Windows: no console, its own group): no terminal's signals reach it,
    // and it outlives this command.
    binky_platform::process::detached(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| ClientError::Start(e.to_string()))?;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(info) = ping(home).await {
            // Reap it in the background if it ever exits while we live (it normally outlives us).
            std::thread::spawn(move || {
                let _ = child.wait();
            });
            return Ok(info);
        }
        if let Ok(Some(status)) = child.try_wait() {
            // Lost a race with another command that started one: use that one, once it
            // answers (it may still be starting: the lock file names it while it lives).
            if let Ok(info) = ping(home).await {
                return Ok(info);
            }
            if other_daemon_starting(home, child.id()) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            return Err(ClientError::Start(format!(
                "it exited ({status}); last lines of {}:\n{}",
                home.daemon_log().display(),
                log_tail(&home.daemon_log())
            )));
        }
        if Instant::now() > deadline {
            return Err(ClientError::Timeout(
                Duration::from_secs(15),
                home.daemon_log().display().to_string(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
