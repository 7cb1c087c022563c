//! `binky daemon start|stop|status|run`.

use std::time::{Duration, Instant};

use super::context::{Ctx, Failure};
use super::{exit, DaemonAction};
use crate::daemon::client::{self, ClientError};
use crate::daemon::{self as daemon_lib, DaemonConfig};
use crate::paths::Home;
use crate::protocol::Request;

/// `binky daemon start|stop|status`.
pub async fn run(action: DaemonAction) -> Result<i32, Failure> {
    let home = Home::from_env().map_err(Failure::usage)?;
    match action {
        DaemonAction::Start => {
            let info = client::ensure(&home).await?;
            println!("binky daemon running (pid {})", info.pid.unwrap_or(0));
            Ok(exit::OK)
        }
        DaemonAction::Stop => {
            if stop(&home).await? {
                println!(
                    "binky daemon stopped (services keep running; the next daemon adopts them)"
                );
            } else {
                println!("binky daemon is not running");
            }
            Ok(exit::OK)
        }
        DaemonAction::Restart => {
            let was = stop(&home).await?;
            let info = client::ensure(&home).await?;
            println!(
                "binky daemon {} (pid {}; services kept running and were adopted)",
                if was { "restarted" } else { "started" },
                info.pid.unwrap_or(0)
            );
            Ok(exit::OK)
        }
        DaemonAction::Status => match client::ping(&home).await {
            Ok(info) => {
                let ctx = Ctx::open()?;
                let worlds = ctx.store.read(binky_controllers::store::worlds)?.len();
                println!(
                    "binky daemon running: pid {}, version {}, up {}s, {:.1} MiB resident, {worlds} world(s), home {}",
                    info.pid.unwrap_or(0),
                    info.version.as_deref().unwrap_or_default(),
                    info.uptime_secs.unwrap_or(0),
                    info.rss_bytes.unwrap_or(0) as f64 / 1048576.0,
                    home.root().display()
                );
                print!("{}", controller_lines(&info));
                Ok(exit::OK)
            }
            Err(_) => {
                println!(
                    "binky daemon is not running (home {})",
                    home.root().display()
                );
                Ok(exit::FAILED)
            }
        },
        DaemonAction::Run => Ok(run_foreground()),
    }
}

/// What each controller's work has cost since the daemon started, a line each.
fn controller_lines(info: &crate::protocol::Response) -> String {
    let ms = |us: u64| us as f64 / 1000.0;
    let mut out = String::new();
    for (name, t) in info.controllers.iter().flatten() {
        let mean = t.busy_us.checked_div(t.reconciles).unwrap_or(0);
        out.push_str(&format!(
            "  {name:<10} {} reconciles, {:.1} ms in all (mean {:.2} ms, longest {:.1} ms); housekeeping {}×, {:.1} ms\n",
            t.reconciles,
            ms(t.busy_us),
            ms(mean),
            ms(t.max_us),
            t.housekeeps,
            ms(t.housekeep_us),
        ));
    }
    out
}

/// Stop the home's daemon and wait until its process is gone; false when none ran.
async fn stop(home: &Home) -> Result<bool, Failure> {
    match client::request(home, &Request::Shutdown, Duration::from_secs(5)).await {
        Ok(_) => {
            // Stopped means gone: wait for the process itself, not just its socket.
            let until = Instant::now() + Duration::from_secs(15);
            let gone = |pid: Option<u32>| {
                pid.is_none_or(|p| binky_platform::proc::stat(p).is_none_or(|s| s.state == 'Z'))
            };
            let pid = std::fs::read_to_string(home.lock())
                .ok()
                .and_then(|p| p.trim().parse::<u32>().ok());
            while client::ping(home).await.is_ok() || !gone(pid) {
                if Instant::now() > until {
                    return Err(Failure::failed("the daemon did not stop within 15 s"));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(true)
        }
        Err(ClientError::NotRunning) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `binky daemon run`: the daemon in the foreground, logging to `$BINKY_HOME/daemon.log`.
pub fn run_foreground() -> i32 {
    // The same clean daemon whoever started it, before anything else (one thread yet).
    daemon_lib::clean::this_process();
    let home = match Home::from_env() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("binky: {e}");
            return exit::USAGE;
        }
    };
    if let Err(e) = home.ensure() {
        eprintln!("binky: cannot use {}: {e}", home.root().display());
        return exit::FAILED;
    }
    crate::logging::init(&home.daemon_log());
    // Two malloc arenas, not glibc's eight per core: the daemon's threads (two workers and
    // the store calls handed off) each kept an arena of freed memory; measured at 300
    // worlds, 83 MiB resident with the default against 48 MiB with two. Before the runtime
    // starts its threads.
    binky_platform::process::limit_malloc_arenas(2);
    // macOS watches files with kqueue, an open file a watched file or folder, and gives a
    // process 256: as many as the system lets the daemon have (its services get the old
    // limit back). Nothing on Linux, where inotify needs no descriptors.
    if let Some((was, now)) = binky_platform::process::raise_open_files_limit() {
        tracing::info!(
            was,
            now,
            "raised the daemon's limit of open files for its file watcher"
        );
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // Store calls hand their worker over while they wait (`block_in_place`), and each
        // hand-over takes a thread: unbounded (512), hundreds of worlds' reconciles at once
        // held hundreds of threads, each with its stack and malloc arena. More than this
        // many would only wait for the one store connection anyway.
        .max_blocking_threads(32)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("binky: cannot start the runtime: {e}");
            return exit::FAILED;
        }
    };
    let result = rt.block_on(async {
        // Stopped gracefully when asked (SIGTERM, SIGINT; Windows: Ctrl-Break, Ctrl-C).
        let shutdown = async {
            use binky_platform::signal::{Heard, Watch};
            match Watch::new(&[Heard::Terminate, Heard::Interrupt]) {
                Ok(mut watch) => {
                    watch.next().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        daemon_lib::run(DaemonConfig::new(home.clone()), shutdown).await
    });
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            tracing::error!(%e, "daemon failed");
            eprintln!("binky: daemon: {e}");
            exit::FAILED
        }
    }
}
