//! Who writes which table: one writer per table, declared in one list here, and held by
//! SQLite itself while a write transaction runs.
//!
//! # Guarantees
//! - Every write transaction belongs to one owner ([`Store::write`](super::Store::write)
//!   takes it). While it runs, an SQLite authorizer admits only reads and the DML that writes
//!   the owner's own tables ([`Owner::GRANTS`], plus appending to `events`): a statement that
//!   writes any other table, and any statement that is not DML or a read — `CREATE`, `DROP`,
//!   `ALTER`, a `PRAGMA` that sets something, `ATTACH`, `VACUUM`, `ANALYZE`, `REINDEX` — is
//!   refused when it is prepared and the transaction fails with
//!   [`StoreError::NotOwner`](super::StoreError::NotOwner), naming the owner and what it
//!   tried. It holds for SQL written anywhere, in tests and in production alike. Schema
//!   changes are the migrations', which run when the store opens, before any authorizer.
//! - A read ([`Store::read`](super::Store::read)) may write nothing and change nothing: it
//!   runs `SELECT`s (in a transaction or not) and the `PRAGMA`s that only read
//!   ([`READ_PRAGMAS`]: `data_version` for the dashboard and `binky top`, `quick_check` for
//!   `binky doctor`, …).
//! - The owners of the controllers' and the runtime's tables are `pub(crate)`: the `binky`
//!   crate (commands, the daemon's helpers) cannot name them, so the compiler keeps it from
//!   opening a write on a controller's table. Commands write desired state through the store's
//!   own methods ([`Store::put_world`](super::Store::put_world) …), which use [`Commands`].
//! - The statements live in the store: each owner's in `store/write/<owner>.rs` (the
//!   commands' in `store/desired.rs`), every read in `store/read/`. A function that writes a
//!   table takes `&Tx<'_, TheOwner>`: the compiler refuses to call it inside another owner's
//!   transaction. Inside this crate, each owner is named only by the module that owns the
//!   table, which opens its transactions, and by its store module of statements; and no file
//!   outside `store/`, in this crate or the `binky` one, runs SQL (unit tests read the sources
//!   and hold both).
//!
//! # The exceptions, declared
//! Deletion ends in other hands by design (the finalizer pattern), as delete-only grants:
//! - the runtime deletes a `worlds` row once every finalizer is gone (commands created it),
//!   and with it, through `ON DELETE CASCADE`, the world's rows in every table that
//!   references it (SQLite asks the authorizer for those deletes too, as the runtime's);
//! - the golden controller deletes the `golden_drops` requests it has carried out
//!   (`binky golden rm` made them).
//!
//! And one table has no writer at all ([`FIXED`]): `home`, the home's identity, made by its
//! migration and only read afterwards.

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

/// Tables their migration fills once and no owner writes afterwards: `home`, this home's
/// identity, which must never change (the slices and templates on shared servers carry it).
pub const FIXED: &[&str] = &["home"];

/// The `PRAGMA`s a read or a write may run: queries that change nothing, without a value
/// (`PRAGMA user_version`, never `PRAGMA user_version = 7`) …
pub const READ_PRAGMAS: &[&str] = &[
    "data_version",
    "user_version",
    "schema_version",
    "application_id",
    "journal_mode",
    "foreign_keys",
    "page_count",
    "page_size",
    "freelist_count",
    "quick_check",
    "integrity_check",
    "foreign_key_check",
    "foreign_key_list",
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "compile_options",
];

/// … and those of them whose argument only names what to read (`PRAGMA table_info(worlds)`,
/// `PRAGMA quick_check(10)`).
const READ_PRAGMAS_WITH_ARGUMENT: &[&str] = &[
    "quick_check",
    "integrity_check",
    "foreign_key_check",
    "foreign_key_list",
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
];

/// SQLite's own bookkeeping for `AUTOINCREMENT` (`events`' ids), which it writes as a row is
/// inserted into such a table: a writer may insert and update its rows, never delete them
/// (ids would be given again).
const SEQUENCE: &str = "sqlite_sequence";

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
    /// Commands (`binky up/down/reload/remove/settings/approve/golden rm`): the desired state,
    /// and which worlds an agent made (with the world, by `binky up`).
    pub(crate) Commands = "commands": [
        Grant::all("projects"),
        Grant::all("worlds"),
        Grant::all("world_ids"),
        Grant::all("exec_requests"),
        Grant::all("settings"),
        Grant::all("service_restarts"),
        Grant::all("approvals"),
        Grant::all("golden_drops"),
        Grant::all("agent_worlds"),
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
        Grant::delete_only("shared_edits"),
        Grant::delete_only("agent_worlds"),
    ];
    /// The admission gate.
    pub(crate) Gate = "the admission gate": [Grant::all("admissions")];
    /// The worktree controller.
    pub(crate) Worktree = "the worktree controller": [
        Grant::all("worktrees"),
        Grant::all("bootstrap_paths"),
        Grant::all("shared_edits"),
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

/// A statement the authorizer refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The owner of the transaction (`a read` for a read).
    pub owner: &'static str,
    /// What it tried.
    pub what: Denied,
}

/// What a refused statement tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// To write a table that is not its owner's.
    Write {
        /// How.
        verb: Verb,
        /// The table.
        table: String,
    },
    /// A statement that is neither DML nor a read (schema, a `PRAGMA` that sets something,
    /// `ATTACH`…), as SQL.
    Statement(String),
    /// A change of the schema (`CREATE`, `DROP`), seen as a write of SQLite's schema table.
    Schema {
        /// How.
        verb: Verb,
        /// The schema table (`sqlite_master`, `sqlite_temp_master`).
        table: String,
    },
}

impl Refused {
    /// `the port controller may not insert into processes (…)`.
    pub fn message(&self) -> String {
        let (verb, table) = match &self.what {
            Denied::Write { verb, table } => (*verb, table),
            Denied::Schema { verb, table } => {
                return format!(
                    "{} may not change the schema (it would {} {table}): schema changes are migrations (controllers/src/store/migrations.rs), run when the store opens; a bug in binky, please report it",
                    self.owner,
                    verb.as_str()
                )
            }
            Denied::Statement(sql) => {
                return format!(
                    "{} may not run `{sql}`: {} (controllers/src/store/owner.rs; schema changes are migrations, controllers/src/store/migrations.rs); a bug in binky, please report it",
                    self.owner,
                    if self.owner == "a read" {
                        "a read runs only SELECT and the PRAGMAs that read"
                    } else {
                        "a write runs only reads and INSERT, UPDATE and DELETE on its owner's tables"
                    }
                )
            }
        };
        let writer = ALL
            .iter()
            .filter(|(_, _, grants)| grants.iter().any(|g| g.table == table && g.admits(verb)))
            .map(|(_, name, _)| *name)
            .collect::<Vec<_>>();
        let who = if writer.is_empty() {
            "no owner".to_owned()
        } else {
            writer.join(", ")
        };
        format!(
            "{} may not {} {table}: that table's writer is {who} (controllers/src/store/owner.rs); a bug in binky, please report it",
            self.owner,
            verb.as_str(),
        )
    }
}

/// SQLite's schema table (`sqlite_master`, `sqlite_schema`, and their temporary database's),
/// which only DDL writes.
fn is_schema_table(table: &str) -> bool {
    let table = table.rsplit('.').next().unwrap_or(table);
    [
        "sqlite_master",
        "sqlite_schema",
        "sqlite_temp_master",
        "sqlite_temp_schema",
    ]
    .iter()
    .any(|t| table.eq_ignore_ascii_case(t))
}

/// What `action` does, when it is neither DML nor a read: the SQL it stands for.
fn not_dml(action: &AuthAction<'_>) -> Option<String> {
    use AuthAction as A;
    Some(match action {
        A::Select | A::Read { .. } | A::Function { .. } | A::Recursive => return None,
        // BEGIN, COMMIT, ROLLBACK and savepoints: the store's own transactions, and a read's
        // consistent snapshot.
        A::Transaction { .. } | A::Savepoint { .. } => return None,
        A::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let name = pragma_name.to_ascii_lowercase();
            let reads = match pragma_value {
                None => READ_PRAGMAS.contains(&name.as_str()),
                Some(_) => READ_PRAGMAS_WITH_ARGUMENT.contains(&name.as_str()),
            };
            if reads {
                return None;
            }
            match pragma_value {
                Some(v) => format!("PRAGMA {pragma_name} = {v}"),
                None => format!("PRAGMA {pragma_name}"),
            }
        }
        A::CreateTable { table_name } | A::CreateTempTable { table_name } => {
            format!("CREATE TABLE {table_name}")
        }
        A::DropTable { table_name } | A::DropTempTable { table_name } => {
            format!("DROP TABLE {table_name}")
        }
        A::AlterTable { table_name, .. } => format!("ALTER TABLE {table_name}"),
        A::CreateIndex { index_name, .. } | A::CreateTempIndex { index_name, .. } => {
            format!("CREATE INDEX {index_name}")
        }
        A::DropIndex { index_name, .. } | A::DropTempIndex { index_name, .. } => {
            format!("DROP INDEX {index_name}")
        }
        A::CreateTrigger { trigger_name, .. } | A::CreateTempTrigger { trigger_name, .. } => {
            format!("CREATE TRIGGER {trigger_name}")
        }
        A::DropTrigger { trigger_name, .. } | A::DropTempTrigger { trigger_name, .. } => {
            format!("DROP TRIGGER {trigger_name}")
        }
        A::CreateView { view_name } | A::CreateTempView { view_name } => {
            format!("CREATE VIEW {view_name}")
        }
        A::DropView { view_name } | A::DropTempView { view_name } => {
            format!("DROP VIEW {view_name}")
        }
        A::CreateVtable { table_name, .. } => format!("CREATE VIRTUAL TABLE {table_name}"),
        A::DropVtable { table_name, .. } => format!("DROP TABLE {table_name}"),
        A::Attach { filename } => format!("ATTACH '{filename}'"),
        A::Detach { database_name } => format!("DETACH {database_name}"),
        A::Reindex { index_name } => format!("REINDEX {index_name}"),
        A::Analyze { table_name } => format!("ANALYZE {table_name}"),
        other => format!("{other:?}"),
    })
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
        if anything {
            return Authorization::Allow;
        }
        let deny = |what: Denied| {
            let mut slot = refused.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert(Refused { owner, what });
            Authorization::Deny
        };
        let (verb, table) = match ctx.action {
            AuthAction::Insert { table_name } => (Verb::Insert, table_name),
            AuthAction::Update { table_name, .. } => (Verb::Update, table_name),
            AuthAction::Delete { table_name } => (Verb::Delete, table_name),
            other => {
                return match not_dml(&other) {
                    None => Authorization::Allow,
                    Some(sql) => deny(Denied::Statement(sql)),
                }
            }
        };
        // DDL: SQLite asks about the write of its schema table, for some statements before
        // the statement itself (which is refused below when asked about).
        if is_schema_table(table) {
            return deny(Denied::Schema {
                verb,
                table: table.to_owned(),
            });
        }
        let writing = matches!(mode, Mode::Write(_));
        let main = ctx.database_name.is_none_or(|d| d == "main");
        let own = main
            && ((writing && table == SEQUENCE && verb != Verb::Delete)
                || (writing && verb == Verb::Insert && table == EVENTS)
                || grants.iter().any(|g| g.table == table && g.admits(verb)));
        if own {
            return Authorization::Allow;
        }
        deny(Denied::Write {
            verb,
            table: match ctx.database_name {
                Some(d) if d != "main" => format!("{d}.{table}"),
                _ => table.to_owned(),
            },
        })
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
                || FIXED.contains(&t.as_str())
                || ALL
                    .iter()
                    .any(|(_, _, grants)| grants.iter().any(|g| g.table == t && g.insert));
            assert!(written, "table {t} has no writer in owner.rs");
        }
    }

    /// Each owner is named (as `owner::X`) only by the module that owns its tables and by the
    /// store's module of that owner's statements (`store/write/<owner>.rs`): a transaction
    /// of `X` is opened by its controller, and its statements (`&Tx<'_, owner::X>`) are
    /// written in the store.
    #[test]
    fn each_owner_is_named_only_by_its_module() {
        let homes: &[(&str, &[&str])] = &[
            ("Commands", &["store/desired.rs"]),
            ("Runtime", &["runtime/", "store/write/runtime.rs"]),
            ("Gate", &["gate.rs", "store/write/gate.rs"]),
            ("Worktree", &["worktree/", "store/write/worktree.rs"]),
            ("Port", &["port.rs", "store/write/port.rs"]),
            ("Golden", &["golden/", "store/write/golden.rs"]),
            ("Slice", &["slice/", "store/write/slice.rs"]),
            ("Process", &["process/", "store/write/process.rs"]),
            ("Route", &["route.rs", "store/write/route.rs"]),
            ("Log", &["store/mod.rs"]),
            // The `binky` crate opens their transactions; in this crate, only their
            // statements name them.
            ("Servers", &["store/write/servers.rs"]),
            ("Proxy", &["store/write/proxy.rs"]),
        ];
        let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        // A home that no longer exists would let any file of that name back in unnoticed.
        for (owner, home) in homes {
            for h in *home {
                assert!(
                    crate_dir.join("src").join(h).exists(),
                    "owner::{owner}'s home {h} is no file or folder of src/: name where it is now"
                );
            }
        }
        let files = sources(crate_dir);
        assert!(files.len() > 20);
        let mut seen = 0;
        for (rel, text) in files {
            if rel == "store/owner.rs" {
                continue;
            }
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
                let named = [",", ")", ";", ">"]
                    .iter()
                    .any(|end| text.contains(&format!("owner::{owner}{end}")));
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

    /// The Rust sources of the crate at `dir` but its tests (`tests/`, `*tests.rs`), as
    /// (path under `src/`, text).
    fn sources(dir: &std::path::Path) -> Vec<(String, String)> {
        let root = dir.join("src");
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
        files
            .into_iter()
            .map(|f| {
                let rel = f
                    .strip_prefix(&root)
                    .expect("under src")
                    .to_string_lossy()
                    .replace('\\', "/");
                (rel, f)
            })
            .filter(|(rel, _)| !rel.starts_with("tests/") && !rel.ends_with("tests.rs"))
            .map(|(rel, f)| {
                let text = std::fs::read_to_string(&f).expect("read");
                (rel, text)
            })
            .collect()
    }

    /// SQL against the store is written only in the store (`controllers/src/store/`): its
    /// reads in `store/read/`, its writes in `store/write/<owner>.rs` and the commands' in
    /// `store/desired.rs`. Elsewhere, in this crate and in the `binky` crate, no statement is
    /// prepared or run on a connection (the SQL sent to the databases binky manages, in
    /// the `binky` crate's adapters and servers, is not the store's).
    #[test]
    fn store_sql_is_written_only_in_the_store() {
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let not_the_store = ["adapters/", "servers/postgres.rs", "servers/mariadb.rs"];
        let crates = [
            (manifest.to_path_buf(), "controllers"),
            (manifest.join(".."), "binky"),
            (manifest.join("../proxy"), "binky-proxy"),
        ];
        let calls = [
            ".query_row(",
            ".query_map(",
            ".prepare_cached(",
            ".execute_batch(",
            ".pragma_query",
            ".pragma_update(",
            "tx.execute(",
            "c.execute(",
            "conn.execute(",
            "tx.prepare(",
            "c.prepare(",
            "conn.prepare(",
        ];
        let mut read = 0;
        for (dir, name) in crates {
            for (rel, text) in sources(&dir) {
                read += 1;
                if (name == "controllers" && rel.starts_with("store/"))
                    || (name == "binky" && not_the_store.iter().any(|n| rel.starts_with(n)))
                {
                    continue;
                }
                for call in calls {
                    assert!(
                        !text.contains(call),
                        "{name}/src/{rel} runs SQL (`{call}`): the store's statements live in controllers/src/store/ (reads in store/read/, writes in store/write/<owner>.rs)"
                    );
                }
            }
        }
        assert!(read > 100, "the sources of every crate are read: {read}");
    }
}
