//! A private `moto_server` (S3 and the rest of AWS, in memory) on 127.0.0.1.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Res;

/// The admin access key the fixture's URL carries (moto accepts any key).
pub const KEY: &str = "AKIDBINKYTEST";

/// What to say when moto_server is not there.
pub const MISSING: &str = "moto_server (an S3 server) is not installed: run ./scripts/test, \
                           which pip-installs moto[server] into ~/.cache/binky-test/venv and \
                           sets BINKY_TEST_MOTO (or `pip install 'moto[server]'`)";

/// The moto_server binary: `$BINKY_TEST_MOTO`, else the test command's venv, else PATH.
pub fn moto_binary() -> Option<PathBuf> {
    crate::run::find_tool(
        "BINKY_TEST_MOTO",
        ".cache/binky-test/venv/bin/moto_server",
        "moto_server",
    )
}

/// A private moto_server; killed on drop.
pub struct MotoServer {
    /// `http://<KEY>:<secret>@127.0.0.1:<port>`.
    pub admin_url: String,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// Its port.
    pub port: u16,
    /// The admin secret key (moto accepts any; binky never shows it).
    pub secret: String,
    /// The program it runs.
    pub bin: PathBuf,
    child: Child,
    _tmp: tempfile::TempDir,
}

impl MotoServer {
    /// Start one on a free port with extra environment (`INITIAL_NO_AUTH_ACTION_COUNT=0`:
    /// check keys); a port taken between the probe and the bind makes moto exit: five tries.
    pub fn start_with(env: &[(&str, &str)]) -> Res<MotoServer> {
        let mut last = String::new();
        for _ in 0..5 {
            match Self::start_on(crate::net::free_port(), env) {
                Ok(s) => return Ok(s),
                Err(log) => last = log,
            }
            crate::stop::check_stop()?;
        }
        Err(format!("moto_server did not start: {last}"))
    }

    /// Start one on `port` (a port a test reserved and then freed); its log when it does
    /// not answer within 30 s.
    pub fn start_on(port: u16, env: &[(&str, &str)]) -> Res<MotoServer> {
        let bin = moto_binary().ok_or(MISSING)?;
        let tmp = tempfile::Builder::new()
            .prefix("binky-moto-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let log = tmp.path().join("moto.log");
        let out = std::fs::File::create(&log).map_err(|e| format!("log file: {e}"))?;
        let err = out.try_clone().map_err(|e| format!("log file: {e}"))?;
        let mut child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .envs(env.iter().copied())
            .current_dir(tmp.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return Err(std::fs::read_to_string(&log).unwrap_or_default());
            }
            if super::http_answers(port, "/", None) {
                let secret = format!("moto-secret-{}", crate::random_secret());
                return Ok(MotoServer {
                    admin_url: format!("http://{KEY}:{secret}@127.0.0.1:{port}"),
                    endpoint: format!("http://127.0.0.1:{port}"),
                    port,
                    secret,
                    bin,
                    child,
                    _tmp: tmp,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(format!(
            "no answer on port {port} within 30 s: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        ))
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
