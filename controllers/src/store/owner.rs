//! Who writes which table: one writer per table, declared in one list here, and held by
//! SQLite itself while a write transaction runs.
//!
//! # Guarantees
//! - Every write transaction belongs to one owner ([`Store::write`](super::Store::write)
//!   takes it). While it runs, an SQLite authorizer admits only the statements that write the
//!   owner's own tables ([`Owner::GRANTS`], plus appending to `events`); a statement that
//!   writes any other table is refused when it is prepared and the transaction fails with
//!   [`StoreError::NotOwner`](super::StoreError::NotOwner), naming the owner and the table. It
//!   holds for SQL written anywhere, in tests and in production alike.
//! - A read ([`Store::read`](super::Store::read)) may write nothing.
//! - The owners of the controllers' and the runtime's tables are `pub(crate)`: the `binky`
//!   crate (commands, the daemon's helpers) cannot name them, so the compiler keeps it from
//!   opening a write on a controller's table. Commands write desired state through the store's
//!   own methods ([`Store::put_world`](super::Store::put_world) …), which use [`Commands`].
//! - Inside this crate, each owner is named only by the module that owns the table (a unit
//!   test reads the sources and holds that), and a function that writes a table takes
//!   `&Tx<'_, TheOwner>`: the compiler refuses to call it inside another owner's transaction.
//!
//! # The exceptions, declared
//! Deletion ends in other hands by design (the finalizer pattern), as delete-only grants:
//! - the runtime deletes a `worlds` row once every finalizer is gone (commands created it),
//!   and with it, through `ON DELETE CASCADE`, the world's rows in every table that
//!   references it (SQLite asks the authorizer for those deletes too, as the runtime's);
//! - the golden controller deletes the `golden_drops` requests it has carried out
//!   (`binky golden rm` made them).

use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{Connection, Transaction};

/// What an owner may do to one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The table.
    pub table: &'static str,
    /// `INSERT` (and the insert half of an upsert).
    pub insert: bool,
    /// `UPDATE` (and the `DO UPDATE` half of an upsert).
    pub update: bool,
    /// `DELETE`.
    pub delete: bool,
}

impl Grant {
    /// Every kind of write.
    pub const fn all(table: &'static str) -> Grant {
        Grant {
            table,
            insert: true,
            update: true,
            delete: true,
        }
    }

    /// Only deleting rows (a finalizer's last step on a table someone else fills).
    pub const fn delete_only(table: &'static str) -> Grant {
        Grant {
            table,
            insert: false,
            update: false,
            delete: true,
        }
    }

    fn admits(&self, verb: Verb) -> bool {
        match verb {
            Verb::Insert => self.insert,
            Verb::Update => self.update,
            Verb::Delete => self.delete,
        }
    }
}

/// A kind of write, as SQLite's authorizer reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// A row inserted.
    Insert,
    /// A row updated.
    Update,
    /// A row deleted.
    Delete,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Insert => "insert into",
            Verb::Update => "update",
            Verb::Delete => "delete from",
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// The writer of a set of tables. Sealed: the owners are the types of this module.
pub trait Owner: sealed::Sealed + Copy {
    /// Who this is, for messages.
    const NAME: &'static str;
    /// The tables it writes.
    const GRANTS: &'static [Grant];
}

/// The table everyone may append to (never update or delete).
pub const EVENTS: &str = "events";

macro_rules! owners {
    ($($(#[$doc:meta])* $vis:vis $ty:ident = $name:literal: [$($grant:expr),* $(,)?];)*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            $vis struct $ty;
            impl sealed::Sealed for $ty {}
            impl Owner for $ty {
                const NAME: &'static str = $name;
                const GRANTS: &'static [Grant] = &[$($grant),*];
            }
        )*
        /// Every owner: its type's name, its name, its grants.
        pub(crate) const ALL: &[(&str, &str, &[Grant])] = &[$((stringify!($ty), $name, $ty::GRANTS)),*];
    };
}

owners! {
    /// Commands (`binky up/down/reload/remove/settings/approve/golden rm`): the desired state.
    pub(crate) Commands = "commands": [
        Grant::all("projects"),
        Grant::all("worlds"),
        Grant::all("world_ids"),
        Grant::all("exec_requests"),
        Grant::all("settings"),
        Grant::all("service_restarts"),
        Grant::all("approvals"),
        Grant::all("golden_drops"),
    ];
    /// The reconcile runtime: finalizers, observed generations, and every condition (the
    /// controllers' through their outcome, the config reader's and the file watcher's through
    /// [`crate::runtime::set_condition`]). It deletes a world whose finalizers are all gone.
    pub(crate) Runtime = "the reconcile runtime": [
        Grant::all("finalizers"),
        Grant::all("controller_status"),
        Grant::all("conditions"),
        Grant::delete_only("worlds"),
        // What deleting a world cascades to (a test holds this list to the schema).
        Grant::delete_only("worktrees"),
        Grant::delete_only("ports"),
        Grant::delete_only("processes"),
        Grant::delete_only("world_runs"),
        Grant::delete_only("routes"),
        Grant::delete_only("slices"),
        Grant::delete_only("golden_refs"),
        Grant::delete_only("service_restarts"),
        Grant::delete_only("admissions"),
        Grant::delete_only("setup_changes"),
        Grant::delete_only("process_resources"),
        Grant::delete_only("bootstrap_paths"),
    ];
    /// The admission gate.
    pub(crate) Gate = "the admission gate": [Grant::all("admissions")];
    /// The worktree controller.
    pub(crate) Worktree = "the worktree controller": [
        Grant::all("worktrees"),
        Grant::all("bootstrap_paths"),
    ];
    /// The port controller.
    pub(crate) Port = "the port controller": [Grant::all("ports")];
    /// The golden controller; it carries out (deletes) the drop requests commands make.
    pub(crate) Golden = "the golden controller": [
        Grant::all("goldens"),
        Grant::all("golden_refs"),
        Grant::delete_only("golden_drops"),
    ];
    /// The slice controller.
    pub(crate) Slice = "the slice controller": [Grant::all("slices")];
    /// The process controller.
    pub(crate) Process = "the process controller": [
        Grant::all("processes"),
        Grant::all("world_runs"),
        Grant::all("setup_changes"),
        Grant::all("process_resources"),
    ];
    /// The route controller.
    pub(crate) Route = "the route controller": [Grant::all("routes")];
    /// The daemon's managed servers (`binky` crate, `servers`).
    pub Servers = "the managed servers": [Grant::all("servers")];
    /// The daemon's proxy manager (`binky` crate).
    pub Proxy = "the proxy manager": [Grant::all("proxy_status")];
    /// Appending to the event log only ([`Store::event`](super::Store::event)).
    pub(crate) Log = "the event log": [];
}

/// A write transaction of owner `O`; reads as a [`Transaction`].
pub struct Tx<'c, O> {
    tx: Transaction<'c>,
    owner: PhantomData<O>,
}

impl<'c, O: Owner> Tx<'c, O> {
    pub(super) fn new(tx: Transaction<'c>) -> Self {
        Tx {
            tx,
            owner: PhantomData,
        }
    }

    pub(super) fn commit(self) -> rusqlite::Result<()> {
        self.tx.commit()
    }
}

impl<'c, O> Deref for Tx<'c, O> {
    type Target = Transaction<'c>;
    fn deref(&self) -> &Transaction<'c> {
        &self.tx
    }
}

/// A write the authorizer refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The owner of the transaction.
    pub owner: &'static str,
    /// What it tried.
    pub verb: Verb,
    /// The table.
    pub table: String,
}

impl Refused {
    /// `the port controller may not insert into processes (…)`.
    pub fn message(&self) -> String {
        let writer = ALL
            .iter()
            .filter(|(_, _, grants)| {
                grants
                    .iter()
                    .any(|g| g.table == self.table && g.admits(self.verb))
            })
            .map(|(_, name, _)| *name)
            .collect::<Vec<_>>();
        let who = if writer.is_empty() {
            "no owner".to_owned()
        } else {
            writer.join(", ")
        };
        format!(
            "{} may not {} {}: that table's writer is {who} (controllers/src/store/owner.rs); a bug in binky, please report it",
            self.owner,
            self.verb.as_str(),
            self.table
        )
    }
}

/// Which grants the connection's authorizer holds now: writes of an owner, or none (reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Nothing installed yet (right after the migrations).
    Open,
    /// Reads: no write at all.
    Read,
    /// A write transaction of the owner with this name.
    Write(&'static str),
    /// Test fixtures: everything.
    #[cfg(test)]
    Anything,
}

/// Install the authorizer for `mode` (SQLite re-prepares cached statements after a change, so
/// a statement prepared under one owner is authorized again under the next).
pub(super) fn install(
    conn: &Connection,
    mode: Mode,
    grants: &'static [Grant],
    refused: Arc<Mutex<Option<Refused>>>,
) {
    let owner = match mode {
        Mode::Write(name) => name,
        _ => "a read",
    };
    #[cfg(test)]
    let anything = mode == Mode::Anything;
    #[cfg(not(test))]
    let anything = false;
    conn.authorizer(Some(move |ctx: AuthContext<'_>| {
        let (verb, table) = match ctx.action {
            AuthAction::Insert { table_name } => (Verb::Insert, table_name),
            AuthAction::Update { table_name, .. } => (Verb::Update, table_name),
            AuthAction::Delete { table_name } => (Verb::Delete, table_name),
            _ => return Authorization::Allow,
        };
        // SQLite's own bookkeeping (AUTOINCREMENT's sqlite_sequence).
        if anything || table.starts_with("sqlite_") {
            return Authorization::Allow;
        }
        let own = (verb == Verb::Insert && table == EVENTS && matches!(mode, Mode::Write(_)))
            || grants.iter().any(|g| g.table == table && g.admits(verb));
        if own {
            return Authorization::Allow;
        }
        let mut slot = refused.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(Refused {
            owner,
            verb,
            table: table.to_owned(),
        });
        Authorization::Deny
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn every_table_but_the_declared_finalizer_deletes_has_one_writer() {
        let mut writers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (_, name, grants) in ALL {
            for g in *grants {
                if g.insert || g.update {
                    writers.entry(g.table).or_default().push(name);
                }
            }
        }
        for (table, who) in &writers {
            assert_eq!(who.len(), 1, "{table} is written by {who:?}");
        }
        // The delete-only grants are the finalizer steps the module doc declares: the
        // golden controller's drop requests, and the runtime's world with what it cascades to.
        let deletes: Vec<(&str, &str)> = ALL
            .iter()
            .flat_map(|(_, name, grants)| {
                grants
                    .iter()
                    .filter(|g| g.delete && !g.insert && !g.update)
                    .map(move |g| (*name, g.table))
            })
            .collect();
        let (runtime, other): (Vec<_>, Vec<_>) =
            deletes.iter().partition(|(n, _)| *n == Runtime::NAME);
        assert_eq!(other, [(Golden::NAME, "golden_drops")]);
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::store::Store::open(&dir.path().join("s.db")).expect("open");
        let mut cascades = store
            .read(|c| {
                let mut out = Vec::new();
                for t in tables(c)? {
                    let mut stmt = c.prepare(&format!("PRAGMA foreign_key_list({t})"))?;
                    let refs = stmt.query_map([], |r| {
                        Ok((
                            r.get::<_, String>("table")?,
                            r.get::<_, String>("on_delete")?,
                        ))
                    })?;
                    for r in refs {
                        let (parent, on_delete) = r?;
                        if parent == "worlds" && on_delete == "CASCADE" {
                            out.push(t.clone());
                        }
                    }
                }
                Ok(out)
            })
            .expect("schema");
        // The runtime owns these outright.
        cascades.retain(|t| !Runtime::GRANTS.iter().any(|g| g.table == t && g.insert));
        cascades.push("worlds".to_owned());
        cascades.sort();
        let mut granted: Vec<String> = runtime.iter().map(|(_, t)| t.to_string()).collect();
        granted.sort();
        assert_eq!(granted, cascades);
    }

    fn tables(c: &Connection) -> Result<Vec<String>, crate::store::StoreError> {
        let mut stmt = c.prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<Vec<String>, _>>()?)
    }

    #[test]
    fn every_table_of_the_schema_has_a_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::store::Store::open(&dir.path().join("s.db")).expect("open");
        let tables = store.read(tables).expect("tables");
        assert!(tables.len() > 15, "{tables:?}");
        for t in tables {
            let written = t == EVENTS
                || ALL
                    .iter()
                    .any(|(_, _, grants)| grants.iter().any(|g| g.table == t && g.insert));
            assert!(written, "table {t} has no writer in owner.rs");
        }
    }

    /// Each owner is named (as `owner::X`) only by the module that owns its tables.
    #[test]
    fn each_owner_is_named_only_by_its_module() {
        let homes: &[(&str, &[&str])] = &[
            ("Commands", &["store/desired.rs"]),
            ("Runtime", &["runtime/"]),
            ("Gate", &["gate.rs"]),
            ("Worktree", &["worktree.rs", "worktree/"]),
            ("Port", &["port.rs"]),
            ("Golden", &["golden.rs", "golden/"]),
            ("Slice", &["slice.rs", "slice/"]),
            ("Process", &["process.rs", "process/"]),
            ("Route", &["route.rs"]),
            ("Log", &["store/mod.rs"]),
        ];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("read src").flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
        assert!(files.len() > 20);
        let mut seen = 0;
        for f in files {
            let rel = f
                .strip_prefix(&root)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            if rel == "store/owner.rs" || rel.starts_with("tests/") || rel.ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&f).expect("read");
            for grouped in text.split("owner::{").skip(1) {
                let names = grouped.split('}').next().unwrap_or("");
                assert!(
                    !homes
                        .iter()
                        .any(|(o, _)| names.split(|c: char| !c.is_alphanumeric()).any(|w| w == *o)),
                    "{rel}: name owners as `owner::X` (a grouped import hides who writes)"
                );
            }
            for (owner, home) in homes {
                let named = text.contains(&format!("owner::{owner},"))
                    || text.contains(&format!("owner::{owner})"))
                    || text.contains(&format!("owner::{owner};"));
                if named {
                    seen += 1;
                    assert!(
                        home.iter().any(|h| rel == *h || rel.starts_with(h)),
                        "{rel} names owner::{owner}, whose tables belong to {home:?}"
                    );
                }
            }
        }
        assert!(seen >= 9, "the owners are used: {seen}");
    }
}
