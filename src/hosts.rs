//! The hosts file's binky block: `127.0.0.1 <host>` for every routed hostname, for the
//! tools that cannot resolve `*.localhost` themselves, kept current by the daemon once a
//! person asked for it (`binky hosts --write`).
//!
//! # Guarantees
//! - `binky hosts --write` writes the block at once and records the file in the machine
//!   setting `hosts_file`; from then on, every new routing table the route controller
//!   publishes rewrites the block when its names changed ([`KeptHosts`]): a world made
//!   later resolves too, a removed world's names go. `binky hosts --remove` takes the block
//!   out and clears the setting.
//! - Only the block between [`BEGIN`] and [`END`] is binky's: every other line of the file
//!   stays as it was, and the file is written whole with the mode it had (a crash never
//!   leaves half a hosts file).
//! - When the daemon may not write the file (`/etc/hosts` is root's, the daemon the
//!   user's), nothing is lost: the daemon's log says so, and `binky status` says the file is
//!   behind and how to bring it up to date ([`behind`]).

use std::sync::{Arc, Mutex};

use binky_controllers::route::{RouteSink, RouteTable};
use binky_controllers::store::{self, Store};

/// The line that opens binky's block.
pub const BEGIN: &str =
    "# binky begin (kept current by binky while `binky hosts --write` is on; edit outside this block)";
/// The line that closes it.
pub const END: &str = "# binky end";

/// The machine setting holding the file the daemon keeps (empty or unset: none).
pub const SETTING: &str = "hosts_file";

/// The hosts file `binky hosts` edits: `BINKY_HOSTS_FILE`, else the system's (`/etc/hosts`;
/// `C:\Windows\System32\drivers\etc\hosts` on Windows).
pub fn default_file() -> std::path::PathBuf {
    std::env::var_os("BINKY_HOSTS_FILE")
        .map(Into::into)
        .unwrap_or_else(binky_platform::fs::hosts_file)
}

/// The file the daemon keeps current, if a person asked for it.
pub fn kept_file(store: &Store) -> Result<Option<std::path::PathBuf>, store::StoreError> {
    Ok(store
        .read(|c| store::setting(c, SETTING))?
        .filter(|p| !p.trim().is_empty())
        .map(Into::into))
}

/// The block's lines for `table`: one `127.0.0.1 <host>` a routed host.
pub fn lines(table: &RouteTable) -> Vec<String> {
    table
        .routes
        .keys()
        .map(|h| format!("127.0.0.1 {h}"))
        .collect()
}

/// `text` without binky's block.
pub fn without_block(text: &str) -> String {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("# binky begin") {
            inside = true;
            continue;
        }
        if inside && line.trim() == END {
            inside = false;
            continue;
        }
        if !inside {
            out.push(line);
        }
    }
    let mut s = out.join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// The lines of binky's block in `text` (none without one).
pub fn block_of(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("# binky begin") {
            inside = true;
        } else if inside && line.trim() == END {
            inside = false;
        } else if inside {
            out.push(line.to_owned());
        }
    }
    out
}

/// `text` with binky's block holding `lines` (none: without a block).
pub fn with_block(text: &str, lines: &[String]) -> String {
    let mut new = without_block(text);
    if !lines.is_empty() {
        new.push_str(BEGIN);
        new.push('\n');
        for l in lines {
            new.push_str(l);
            new.push('\n');
        }
        new.push_str(END);
        new.push('\n');
    }
    new
}

/// Write `new` over `path` whole, with the mode the file has (a hosts file others read).
pub fn write(path: &std::path::Path, new: &str) -> std::io::Result<()> {
    let mut how = binky_controllers::whole_file::Whole::new().durable();
    if let Some(mode) = std::fs::metadata(path)
        .ok()
        .and_then(|m| binky_platform::fs::mode(&m))
    {
        how = how.mode(mode);
    }
    how.write(path, new.as_bytes())
}

/// Make the block of `path` hold `lines`, unless it already does; whether it wrote.
fn keep_in(path: &std::path::Path, lines: &[String]) -> std::io::Result<bool> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let new = with_block(&text, lines);
    if new == text {
        return Ok(false);
    }
    write(path, &new)?;
    Ok(true)
}

/// What `binky status` says when the kept file's block is not what the routes are (the
/// daemon may not write the file, or someone edited the block since the last change):
/// how many names are missing or left over, and the command that brings it up to date.
/// `None` when it is current or no file is kept.
pub fn behind(store: &Store, home_root: &std::path::Path) -> Option<String> {
    let path = kept_file(store).ok()??;
    let table = binky_controllers::route::load_table(store).ok()?;
    let want = lines(&table);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let have = block_of(&text);
    let missing = want.iter().filter(|l| !have.contains(l)).count();
    let stale = have.iter().filter(|l| !want.contains(l)).count();
    if missing == 0 && stale == 0 {
        return None;
    }
    Some(format!(
        "{} is behind the routes ({missing} name(s) missing, {stale} left over); the daemon rewrites it when the routes change, where it may write the file (its log, {}, says when it could not): bring it up to date now with {}, or stop keeping it with `binky hosts --remove`",
        path.display(),
        home_root.join("daemon.log").display(),
        binky_platform::user::as_admin(home_root, "hosts --write")
    ))
}

/// The route controller's sink in the daemon: the proxy's, and, while a person has asked
/// for it, the hosts file's block (see the module's guarantees).
pub struct KeptHosts<S> {
    inner: S,
    store: Store,
    /// One rewrite at a time, so an older table never lands after a newer one.
    writing: Mutex<()>,
}

impl<S: RouteSink> KeptHosts<S> {
    /// Publish to `inner`, and keep the hosts file `store`'s setting names.
    pub fn new(inner: S, store: Store) -> Self {
        KeptHosts {
            inner,
            store,
            writing: Mutex::new(()),
        }
    }
}

impl<S: RouteSink> RouteSink for KeptHosts<S> {
    fn publish(&self, table: Arc<RouteTable>) {
        let want = lines(&table);
        self.inner.publish(table);
        let path = match kept_file(&self.store) {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(err) => {
                tracing::warn!(%err, "cannot read which hosts file to keep");
                return;
            }
        };
        let _one = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        match keep_in(&path, &want) {
            Ok(true) => {
                tracing::info!(file = %path.display(), names = want.len(), "hosts file kept current")
            }
            Ok(false) => {}
            Err(err) => tracing::warn!(
                file = %path.display(),
                %err,
                "cannot keep the hosts file current; `binky status` says how to bring it up to date"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_replaced_and_the_rest_kept() {
        let text = format!(
            "127.0.0.1 localhost\n{BEGIN}\n127.0.0.1 old.x.localhost\n{END}\n::1 ip6-localhost\n"
        );
        assert_eq!(
            without_block(&text),
            "127.0.0.1 localhost\n::1 ip6-localhost\n"
        );
        assert_eq!(without_block("a\nb\n"), "a\nb\n");
        assert_eq!(block_of(&text), vec!["127.0.0.1 old.x.localhost"]);
        let new = with_block(&text, &["127.0.0.1 new.x.localhost".into()]);
        assert_eq!(
            new,
            format!("127.0.0.1 localhost\n::1 ip6-localhost\n{BEGIN}\n127.0.0.1 new.x.localhost\n{END}\n")
        );
        assert_eq!(
            with_block(&new, &[]),
            "127.0.0.1 localhost\n::1 ip6-localhost\n"
        );
    }

    #[test]
    fn an_older_block_of_binky_is_taken_as_binkys() {
        // The marker `binky hosts --write` wrote before the daemon kept the file.
        let text = "a\n# binky begin (managed by `binky hosts --write`; edit outside this block)\n127.0.0.1 x.localhost\n# binky end\n";
        assert_eq!(without_block(text), "a\n");
        assert_eq!(block_of(text), vec!["127.0.0.1 x.localhost"]);
    }
}
