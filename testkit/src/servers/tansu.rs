//! A private tansu broker (Kafka protocol) with in-memory storage on 127.0.0.1.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Res;

/// What to say when tansu is not there.
pub const MISSING: &str = "tansu (the Kafka-protocol broker the kafka tests run against) is not \
                           installed: run ./scripts/test, which builds tansu into \
                           ~/.cache/binky-test/bin (once, ~20 min), or set BINKY_TEST_TANSU to \
                           a tansu binary";

/// The tansu binary: `$BINKY_TEST_TANSU`, else the test command's cache, else PATH.
pub fn tansu_binary() -> Option<PathBuf> {
    crate::run::find_tool("BINKY_TEST_TANSU", ".cache/binky-test/bin/tansu", "tansu")
}

/// A client of `bootstrap` that gives up within seconds.
pub async fn connect(
    bootstrap: &str,
) -> Result<rskafka::client::Client, rskafka::client::error::Error> {
    let backoff = rskafka::BackoffConfig {
        deadline: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    rskafka::client::ClientBuilder::new(vec![bootstrap.to_owned()])
        .backoff_config(backoff)
        .build()
        .await
}

/// A private tansu broker; killed on drop.
pub struct TansuServer {
    /// `kafka://127.0.0.1:<port>`.
    pub admin_url: String,
    /// `127.0.0.1:<port>`.
    pub bootstrap: String,
    /// Its port.
    pub port: u16,
    /// Its directory (output in `tansu.log`).
    pub dir: PathBuf,
    /// The program it runs.
    pub bin: PathBuf,
    child: Child,
    _tmp: tempfile::TempDir,
}

impl TansuServer {
    /// Start one on a free port; a port taken between the probe and the bind makes tansu
    /// exit: five tries.
    pub fn start() -> Res<TansuServer> {
        let mut log = String::new();
        for _ in 0..5 {
            match TansuServer::start_on(crate::net::free_port()) {
                Ok(server) => return Ok(server),
                Err(text) => log = text,
            }
            crate::stop::check_stop()?;
        }
        Err(format!("tansu did not start: {log}"))
    }

    /// Start one on `port`; its output when it does not come up.
    pub fn start_on(port: u16) -> Res<TansuServer> {
        let bin = tansu_binary().ok_or(MISSING)?;
        let tmp = tempfile::Builder::new()
            .prefix("binky-tansu-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let log = tmp.path().join("tansu.log");
        let listener = format!("tcp://127.0.0.1:{port}");
        let out = std::fs::File::create(&log).map_err(|e| format!("log file: {e}"))?;
        let err = out.try_clone().map_err(|e| format!("log file: {e}"))?;
        let mut child = Command::new(&bin)
            .arg("broker")
            .args(["--listener-url", &listener])
            .args(["--advertised-listener-url", &listener])
            .args(["--storage-engine", "memory://tansu/"])
            .args(["--cluster-id", "binky-test"])
            .current_dir(tmp.path())
            .env_remove("CLUSTER_ID")
            .env_remove("STORAGE_ENGINE")
            .env_remove("SCHEMA_REGISTRY")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        let bootstrap = format!("127.0.0.1:{port}");
        if wait_ready(&mut child, port, &bootstrap) {
            return Ok(TansuServer {
                admin_url: format!("kafka://{bootstrap}"),
                bootstrap,
                port,
                dir: tmp.path().to_owned(),
                bin,
                child,
                _tmp: tmp,
            });
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(std::fs::read_to_string(&log).unwrap_or_default())
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for TansuServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait (20 s at most) until the broker answers a metadata request, or the child exits.
fn wait_ready(child: &mut Child, port: u16, bootstrap: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && crate::stop::check_stop().is_ok() {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        let listening = std::net::TcpStream::connect_timeout(
            &([127, 0, 0, 1], port).into(),
            Duration::from_millis(200),
        )
        .is_ok();
        if listening {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            let ready = rt.is_ok_and(|rt| {
                rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(5), async {
                        connect(bootstrap).await.ok()?.list_topics().await.ok()
                    })
                    .await
                    .ok()
                    .flatten()
                    .is_some()
                })
            });
            if ready {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
