//! A benchmark's sandbox for one tool (binky, or the binky 0.1.2 reference): a temp dir with a
//! `home/` whose `.binky/` is the tool's home, so that everything the tool makes and starts
//! can be found ([`crate::procs::sandbox_processes`]) and removed.

use std::fs;
use std::path::PathBuf;

use crate::Res;

/// The directories of a sandbox; the temp dir goes on drop.
pub struct Sandbox {
    /// The temp dir itself (canonical: a process's cwd is compared with it).
    pub root: PathBuf,
    /// `root/home`, the tool's `HOME`.
    pub home: PathBuf,
    /// `home/.binky`, the tool's `BINKY_HOME`.
    pub binky_home: PathBuf,
    /// Owns the directory.
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    /// A fresh sandbox under the temp dir, named `prefix…`. For the reference (`reference`),
    /// its settings turn off the hostname proxy on :80 (and so Caddy on :443): binky's
    /// benchmarks run without one.
    pub fn new(prefix: &str, reference: bool) -> Res<Sandbox> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let root = fs::canonicalize(dir.path()).map_err(|e| format!("tempdir: {e}"))?;
        let home = root.join("home");
        let binky_home = home.join(".binky");
        fs::create_dir_all(&binky_home).map_err(|e| format!("{}: {e}", binky_home.display()))?;
        if reference {
            fs::write(
                binky_home.join("settings.json"),
                "{\"proxy_port\": 0, \"https_port\": 0}\n",
            )
            .map_err(|e| format!("settings.json: {e}"))?;
        }
        Ok(Sandbox {
            root,
            home,
            binky_home,
            dir,
        })
    }
}
