//! Where binky keeps its state: `$BINKY_HOME` (default `~/.binky`: `%USERPROFILE%\.binky` on
//! Windows).

use std::path::{Path, PathBuf};

/// The files of one binky home.
#[derive(Clone, Debug)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `$BINKY_HOME`, else `~/.binky`.
    pub fn from_env() -> Result<Home, String> {
        if let Some(h) = std::env::var_os("BINKY_HOME").filter(|h| !h.is_empty()) {
            return Ok(Home::at(PathBuf::from(h)));
        }
        match binky_platform::user::home() {
            Some(home) => Ok(Home::at(home.join(".binky"))),
            None => Err(format!(
                "neither BINKY_HOME nor {} is set; set BINKY_HOME to a directory binky may use",
                binky_platform::user::HOME_VAR
            )),
        }
    }

    /// A home at `root` (made absolute).
    pub fn at(root: PathBuf) -> Home {
        let root = if root.is_absolute() {
            root
        } else {
            std::env::current_dir()
                .map(|d| d.join(&root))
                .unwrap_or(root)
        };
        Home { root }
    }

    /// Create the directory (mode 0700).
    pub fn ensure(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)?;
        std::fs::create_dir_all(self.logs())?;
        binky_platform::fs::restrict_dir(&self.root)?;
        Ok(())
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The SQLite store.
    pub fn db(&self) -> PathBuf {
        self.root.join("state.db")
    }

    /// Captured service output: `logs/<project>/<world>/<service>.log`.
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// Removed worktrees waiting to be deleted in the background.
    pub fn trash(&self) -> PathBuf {
        self.root.join("trash")
    }

    /// The local certificate authority (`ca.crt`, `ca.key`).
    pub fn ca(&self) -> PathBuf {
        self.root.join("ca")
    }

    /// The daemon's log.
    pub fn daemon_log(&self) -> PathBuf {
        self.root.join("daemon.log")
    }

    /// The daemon's lock file (one daemon per home).
    pub fn lock(&self) -> PathBuf {
        self.root.join("daemon.lock")
    }

    /// The daemon's control socket. A Unix socket path must fit in 108 bytes: a deep home
    /// gets a private directory under the runtime dir or /tmp instead.
    pub fn socket(&self) -> PathBuf {
        let preferred = self.root.join("daemon.sock");
        if preferred.as_os_str().len() < 100 {
            return preferred;
        }
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        base.join(format!(
            "binky-{}-{}",
            binky_platform::user::id(),
            self.tag()
        ))
        .join("daemon.sock")
    }

    /// A short, stable tag of this home: marks the processes it starts.
    pub fn tag(&self) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(self.root.as_os_str().as_encoded_bytes());
        digest.iter().take(5).map(|b| format!("{b:02x}")).collect()
    }
}

/// Where a world's worktree goes when binky creates it: `$BINKY_WORKTREE_ROOT/<project>/<world>`
/// when that is set, else `<repo>/../<repo-dir-name>.worktrees/<world>` (next to the
/// repository, on the same filesystem, easy to find in an editor).
pub fn worktree_path(repo_root: &Path, project: &str, world: &str) -> PathBuf {
    if let Some(root) = std::env::var_os("BINKY_WORKTREE_ROOT").filter(|r| !r.is_empty()) {
        return PathBuf::from(root).join(project).join(world);
    }
    let name = repo_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| project.to_owned());
    let parent = repo_root.parent().unwrap_or(repo_root);
    parent.join(format!("{name}.worktrees")).join(world)
}

/// Write `content` to `path` whole and durably (a reader never sees half a file; see
/// [`binky_controllers::whole_file`]).
pub fn write_atomically(path: &Path, content: &str) -> std::io::Result<()> {
    binky_controllers::whole_file::Whole::new()
        .durable()
        .write(path, content.as_bytes())
}
