//! The daemon's log: tracing to `$BINKY_HOME/daemon.log` (rotated once it passes 10 MiB).

use std::path::Path;
use std::sync::Mutex;

/// Send tracing output to `path` (append), level from `BINKY_LOG` (default `info`).
pub fn init(path: &Path) {
    if std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) > 10 * 1024 * 1024 {
        let _ = std::fs::rename(path, path.with_extension("log.1"));
    }
    let file = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("binky: cannot open {}: {e}", path.display());
            return;
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("BINKY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .try_init();
}
