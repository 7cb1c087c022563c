//! Versioned schema migrations, applied in place in one transaction each.
//!
//! Never edit a released migration: add a new one at the end.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::StoreError;

const MIGRATIONS: &[&str] = &[
    // 1: the foundation.
    r#"
    CREATE TABLE projects (
        id          INTEGER PRIMARY KEY,
        name        TEXT NOT NULL UNIQUE,
        repo_root   TEXT NOT NULL,
        created_at  INTEGER NOT NULL
    );
    CREATE TABLE worlds (
        id            INTEGER PRIMARY KEY,
        project_id    INTEGER NOT NULL REFERENCES projects(id),
        name          TEXT NOT NULL,
        branch        TEXT NOT NULL,
        from_ref      TEXT,
        worktree_path TEXT NOT NULL,
        config_rel    TEXT NOT NULL,
        config_path   TEXT NOT NULL,
        spec          TEXT NOT NULL,
        env           TEXT NOT NULL,
        service_group TEXT,
        desired_state TEXT NOT NULL CHECK (desired_state IN ('running', 'stopped')),
        generation    INTEGER NOT NULL,
        restart_nonce INTEGER NOT NULL DEFAULT 0,
        deleted_at    INTEGER,
        force_delete  INTEGER NOT NULL DEFAULT 0,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        last_used_at  INTEGER NOT NULL,
        UNIQUE (project_id, name)
    );
    CREATE TABLE finalizers (
        world_id    INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        controller  TEXT NOT NULL,
        PRIMARY KEY (world_id, controller)
    );
    CREATE TABLE controller_status (
        world_id            INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        controller          TEXT NOT NULL,
        observed_generation INTEGER NOT NULL DEFAULT 0,
        attempts            INTEGER NOT NULL DEFAULT 0,
        reconciled_at       INTEGER NOT NULL,
        PRIMARY KEY (world_id, controller)
    );
    CREATE TABLE conditions (
        world_id        INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        type            TEXT NOT NULL,
        controller      TEXT NOT NULL,
        status          TEXT NOT NULL CHECK (status IN ('True', 'False', 'Unknown')),
        reason          TEXT NOT NULL,
        message         TEXT NOT NULL,
        stalled         INTEGER NOT NULL DEFAULT 0,
        generation      INTEGER NOT NULL,
        last_transition INTEGER NOT NULL,
        PRIMARY KEY (world_id, type)
    );
    CREATE TABLE worktrees (
        world_id       INTEGER PRIMARY KEY REFERENCES worlds(id) ON DELETE CASCADE,
        path           TEXT NOT NULL,
        branch         TEXT NOT NULL,
        head           TEXT,
        dirty          INTEGER NOT NULL DEFAULT 0,
        adopted        INTEGER NOT NULL DEFAULT 0,
        created_branch INTEGER NOT NULL DEFAULT 0,
        base_commit    TEXT,
        state          TEXT NOT NULL,
        seen_generation INTEGER NOT NULL DEFAULT 0,
        updated_at     INTEGER NOT NULL
    );
    CREATE TABLE ports (
        port        INTEGER PRIMARY KEY,
        world_id    INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        service     TEXT NOT NULL,
        label       TEXT NOT NULL,
        assigned_at INTEGER NOT NULL,
        UNIQUE (world_id, service, label)
    );
    CREATE TABLE processes (
        world_id      INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        service       TEXT NOT NULL,
        state         TEXT NOT NULL,
        pid           INTEGER,
        start_time    INTEGER,
        spawn_token   TEXT,
        healthy       INTEGER NOT NULL DEFAULT 0,
        restarts      INTEGER NOT NULL DEFAULT 0,
        failures      INTEGER NOT NULL DEFAULT 0,
        last_exit     TEXT,
        last_exit_at  INTEGER,
        started_at    INTEGER,
        ready_at      INTEGER,
        next_start_at INTEGER,
        spec_hash     TEXT,
        setup_hash    TEXT,
        up_generation INTEGER NOT NULL DEFAULT 0,
        failed_generation INTEGER,
        message       TEXT NOT NULL DEFAULT '',
        updated_at    INTEGER NOT NULL,
        PRIMARY KEY (world_id, service)
    );
    CREATE TABLE world_runs (
        world_id        INTEGER PRIMARY KEY REFERENCES worlds(id) ON DELETE CASCADE,
        restart_nonce   INTEGER NOT NULL DEFAULT 0,
        post_up_key     TEXT,
        updated_at      INTEGER NOT NULL
    );
    CREATE TABLE events (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        at        INTEGER NOT NULL,
        world_id  INTEGER,
        project   TEXT NOT NULL,
        world     TEXT NOT NULL,
        kind      TEXT NOT NULL,
        message   TEXT NOT NULL
    );
    CREATE INDEX events_by_world ON events (project, world, id);
    "#,
    // 2: routes, machine settings, the proxy's observed state.
    r#"
    CREATE TABLE routes (
        host        TEXT PRIMARY KEY,
        world_id    INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        project     TEXT NOT NULL,
        world       TEXT NOT NULL,
        service     TEXT NOT NULL,
        port        INTEGER NOT NULL,
        https       INTEGER NOT NULL,
        state       TEXT NOT NULL,
        note        TEXT NOT NULL DEFAULT '',
        updated_at  INTEGER NOT NULL
    );
    CREATE INDEX routes_by_world ON routes (world_id);
    CREATE TABLE settings (
        key         TEXT PRIMARY KEY,
        value       TEXT NOT NULL,
        updated_at  INTEGER NOT NULL
    );
    CREATE TABLE proxy_status (
        id          INTEGER PRIMARY KEY CHECK (id = 1),
        pid         INTEGER NOT NULL,
        http_port   INTEGER,
        https_port  INTEGER,
        http_note   TEXT NOT NULL DEFAULT '',
        https_note  TEXT NOT NULL DEFAULT '',
        updated_at  INTEGER NOT NULL
    );
    "#,
    // 3: slices of shared servers, and the servers binky runs itself.
    r#"
    CREATE TABLE slices (
        world_id          INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        service           TEXT NOT NULL,
        adapter           TEXT NOT NULL,
        name              TEXT NOT NULL,
        secret            TEXT NOT NULL,
        state             TEXT NOT NULL,
        address           TEXT,
        tokens            TEXT NOT NULL DEFAULT '{}',
        admin_url         TEXT,
        migrate_hash      TEXT,
        seed_hash         TEXT,
        failed_generation INTEGER,
        message           TEXT NOT NULL DEFAULT '',
        updated_at        INTEGER NOT NULL,
        PRIMARY KEY (world_id, service)
    );
    CREATE TABLE servers (
        kind        TEXT PRIMARY KEY,
        pid         INTEGER,
        start_time  INTEGER,
        port        INTEGER NOT NULL,
        admin_url   TEXT NOT NULL,
        data_dir    TEXT NOT NULL,
        version     TEXT NOT NULL DEFAULT '',
        state       TEXT NOT NULL,
        message     TEXT NOT NULL DEFAULT '',
        updated_at  INTEGER NOT NULL
    );
    "#,
    // 4: golden templates, which worlds use them, and requests to drop them.
    r#"
    CREATE TABLE goldens (
        key          TEXT PRIMARY KEY,
        adapter      TEXT NOT NULL,
        clone_from   TEXT NOT NULL,
        name         TEXT NOT NULL,
        secret       TEXT NOT NULL,
        admin_url    TEXT,
        state        TEXT NOT NULL,
        builder      TEXT NOT NULL DEFAULT '',
        owner_world  INTEGER,
        output       TEXT NOT NULL DEFAULT '',
        build_ms     INTEGER,
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL
    );
    CREATE TABLE golden_refs (
        world_id  INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        service   TEXT NOT NULL,
        key       TEXT NOT NULL,
        PRIMARY KEY (world_id, service)
    );
    CREATE TABLE golden_drops (
        key          TEXT PRIMARY KEY,
        requested_at INTEGER NOT NULL
    );
    "#,
    // 5: restarts of one service (a watched file changed).
    r#"
    CREATE TABLE service_restarts (
        world_id  INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        service   TEXT NOT NULL,
        nonce     INTEGER NOT NULL,
        PRIMARY KEY (world_id, service)
    );
    "#,
    // 6: the admission gate: places of running and queued worlds, approved commands.
    r#"
    CREATE TABLE admissions (
        world_id   INTEGER PRIMARY KEY REFERENCES worlds(id) ON DELETE CASCADE,
        state      TEXT NOT NULL,
        queued_at  INTEGER NOT NULL,
        reason     TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE approvals (
        key          TEXT PRIMARY KEY,
        project      TEXT NOT NULL,
        command      TEXT NOT NULL,
        approved_at  INTEGER NOT NULL
    );
    "#,
    // 7: what a world's `setup` left changed in its worktree (see `dirty`): not the user's.
    r#"
    CREATE TABLE setup_changes (
        world_id     INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        path         TEXT NOT NULL,
        fingerprint  TEXT NOT NULL,
        PRIMARY KEY (world_id, path)
    );
    "#,
    // 8: each service's cgroup, the limits on it, and what it uses (`process::resources`).
    r#"
    CREATE TABLE process_resources (
        world_id      INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        service       TEXT NOT NULL,
        cgroup        TEXT,
        mechanism     TEXT NOT NULL DEFAULT 'none',
        note          TEXT NOT NULL DEFAULT '',
        memory_limit  INTEGER,
        cpu_limit     INTEGER,
        memory_bytes  INTEGER,
        cpu_percent   REAL,
        cpu_usec      INTEGER,
        throttled     INTEGER,
        oom_kills     INTEGER NOT NULL DEFAULT 0,
        sampled_at    INTEGER,
        updated_at    INTEGER NOT NULL,
        PRIMARY KEY (world_id, service)
    );
    "#,
    // 9: a world the gate cooled (stopped to make room, kept, started again by itself when
    // room returns), and when each world was admitted and resumed (`gate`).
    r#"
    ALTER TABLE admissions ADD COLUMN cooled_at INTEGER;
    ALTER TABLE admissions ADD COLUMN admitted_at INTEGER;
    ALTER TABLE admissions ADD COLUMN resumed_at INTEGER;
    "#,
    // 10: the ports a route balances over (the ready replicas of a replicated service),
    // comma-separated; empty: the route's `port` alone.
    r#"
    ALTER TABLE routes ADD COLUMN backends TEXT NOT NULL DEFAULT '';
    "#,
    // 11: where each world begins in the event log (its `created` event), so the events of
    // a world and of an earlier, removed world of the same name are told apart.
    r#"
    CREATE INDEX events_created ON events (project, world, id) WHERE kind = 'created';
    "#,
    // 12: what a person must act on for each service (the world's `ServicesReady` names only
    // the first) and the generation its last step was at, so that a reload of a group is
    // judged on the group's services alone.
    r#"
    ALTER TABLE processes ADD COLUMN problem TEXT;
    ALTER TABLE processes ADD COLUMN stepped_generation INTEGER NOT NULL DEFAULT 0;
    "#,
    // 13: the paths a new worktree gets from the main checkout (`.worktreeinclude`,
    // `[project] copy`), each brought on its own while the world's other work goes on:
    // what is pending, done or failed, how (cloned, linked, copied) and how long it took.
    r#"
    CREATE TABLE bootstrap_paths (
        world_id   INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        path       TEXT NOT NULL,
        src        TEXT NOT NULL,
        mode       TEXT NOT NULL,
        state      TEXT NOT NULL,
        how        TEXT,
        files      INTEGER NOT NULL DEFAULT 0,
        bytes      INTEGER NOT NULL DEFAULT 0,
        took_ms    INTEGER NOT NULL DEFAULT 0,
        message    TEXT NOT NULL DEFAULT '',
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (world_id, path)
    );
    "#,
    // 14: how long the command that last started a world waits (`--timeout`, ms): a service
    // without `health` may take that long to listen on its port.
    r#"
    ALTER TABLE worlds ADD COLUMN wait_ms INTEGER;
    "#,
    // 15: golden templates built in stages and grown from the one before (`golden`): the
    // service they belong to (`lineage`), the migration inputs they were built from (path →
    // hash, JSON), whether their migrated (unseeded) stage is complete, the template they
    // grew from and how they were built, and when a world last used them (kept after the
    // last world for `golden_keep`).
    r#"
    ALTER TABLE goldens ADD COLUMN lineage TEXT NOT NULL DEFAULT '';
    ALTER TABLE goldens ADD COLUMN inputs TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE goldens ADD COLUMN migrated INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE goldens ADD COLUMN staged INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE goldens ADD COLUMN base TEXT;
    ALTER TABLE goldens ADD COLUMN how TEXT NOT NULL DEFAULT '';
    ALTER TABLE goldens ADD COLUMN used_at INTEGER NOT NULL DEFAULT 0;
    UPDATE goldens SET used_at = updated_at;
    "#,
    // 16: a world's id is never given again (SQLite reuses the highest rowid once its row is
    // gone: a world made again under a removed one's name got its id, and an agent's
    // `remove` of "its" world removed a person's): the next id, above every id a world or
    // an event ever had.
    r#"
    CREATE TABLE world_ids (next INTEGER NOT NULL);
    INSERT INTO world_ids (next) SELECT MAX(
        COALESCE((SELECT MAX(id) FROM worlds), 0),
        COALESCE((SELECT MAX(world_id) FROM events), 0)
    ) + 1;
    "#,
    // 17: commands `binky exec` was asked to run while approvals are on and no person has
    // approved them yet (the key is the approval's): what `binky approve --list` and the
    // dashboard show, for a person to approve.
    r#"
    CREATE TABLE exec_requests (
        key          TEXT PRIMARY KEY,
        project      TEXT NOT NULL,
        world        TEXT NOT NULL,
        command      TEXT NOT NULL,
        requested_at INTEGER NOT NULL
    );
    "#,
    // 18: this home's identity: made once, at random, for a new home and for one made
    // before it existed alike, and never changed. Slices and golden templates carry it in
    // their names and in the mark their server keeps of who made them, so two homes that
    // share a server tell theirs apart (`crate::adapter::slice_name`, docs/shared-server.md).
    // Eight characters of [a-z2-7]: 40 bits, short enough for every server's name limits.
    r#"
    CREATE TABLE home (
        one         INTEGER PRIMARY KEY CHECK (one = 1),
        id          TEXT NOT NULL CHECK (length(id) = 8),
        created_at  INTEGER NOT NULL
    );
    WITH RECURSIVE letters (n, id) AS (
        SELECT 0, ''
        UNION ALL
        SELECT n + 1, id || substr('abcdefghijklmnopqrstuvwxyz234567', (random() & 31) + 1, 1)
        FROM letters WHERE n < 8
    )
    INSERT INTO home (one, id, created_at)
    SELECT 1, id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM letters WHERE n = 8;
    "#,
    // 19: what a world's shared (hard-linked) files went through: when each path's bring-in
    // began (a linked file changed later was edited in place through the link) and the
    // fingerprint of a path that is one file as it was brought (not the user's change for
    // `binky remove`); and the linked files found edited in place (`shared_edits`), with
    // the main checkout and the worlds that hold the same file and those that may have
    // changed it.
    r#"
    ALTER TABLE bootstrap_paths ADD COLUMN brought_at INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE bootstrap_paths ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
    UPDATE bootstrap_paths SET brought_at = updated_at - took_ms WHERE state = 'done';
    CREATE TABLE shared_edits (
        world_id    INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
        file        TEXT NOT NULL,
        path        TEXT NOT NULL,
        changed_at  INTEGER NOT NULL,
        main_shares INTEGER NOT NULL,
        sharers     TEXT NOT NULL,
        editors     TEXT NOT NULL,
        found_at    INTEGER NOT NULL,
        PRIMARY KEY (world_id, file)
    );
    "#,
    // 20: which worlds an agent made (through `binky mcp`, or any process binky started): a
    // record of the world, written in the transaction that makes it and gone with it. It
    // was a text file any process could append to, `mcp-created` beside the store, whose
    // lines are read once here ([`import_agent_made`]).
    r#"
    CREATE TABLE agent_worlds (
        world_id  INTEGER PRIMARY KEY REFERENCES worlds(id) ON DELETE CASCADE,
        made_by   TEXT NOT NULL,
        made_at   INTEGER NOT NULL
    );
    "#,
    // 21: what of a process service's spec it was started with, field by field
    // (`spec::RestartKey`): an edit restarts it exactly when `binky apply` says so. None for
    // a process an earlier binky started: it is taken as it runs, and restarted by nothing
    // but a change of what it runs with (`spec_hash`).
    r#"
    ALTER TABLE processes ADD COLUMN restart_key TEXT;
    "#,
];

/// The migration that records agent-made worlds in the store, which reads `mcp-created`.
const AGENT_WORLDS: i64 = 20;

/// The file beside the store that listed agent-made worlds before [`AGENT_WORLDS`].
pub const AGENT_MADE_FILE: &str = "mcp-created";

/// The newest schema version this build knows.
pub const LATEST: i64 = MIGRATIONS.len() as i64;

pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    migrate_to(conn, LATEST)
}

/// Migrate up to schema version `target` (tests make a store as an older binky left it).
pub(super) fn migrate_to(conn: &mut Connection, target: i64) -> Result<(), StoreError> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current > LATEST {
        return Err(StoreError::TooNew {
            found: current,
            known: LATEST,
        });
    }
    let upto = MIGRATIONS.len().min(target.max(0) as usize);
    for (i, sql) in MIGRATIONS[..upto].iter().enumerate().skip(current as usize) {
        let version = i as i64 + 1;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)?;
        // Another process may have migrated while we waited for the lock.
        let now: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if now >= version {
            continue;
        }
        tx.execute_batch(sql)?;
        let legacy = (version == AGENT_WORLDS)
            .then(|| import_agent_made(&tx))
            .transpose()?
            .flatten();
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        if let Some(file) = legacy {
            // Read once, with the migration: kept beside the store under another name for
            // a person to look at, never read again.
            let mut done = file.clone().into_os_string();
            done.push(".imported");
            let _ = std::fs::rename(&file, done);
        }
    }
    Ok(())
}

/// Import the lines of `mcp-created` beside the store (`ID\tPROJECT\tNAME`, a world an
/// agent made through `binky mcp`) for the worlds that exist with that id, project and
/// name; the file read, if there was one.
fn import_agent_made(tx: &rusqlite::Transaction<'_>) -> Result<Option<PathBuf>, StoreError> {
    let Some(file) = tx
        .path()
        .filter(|p| !p.is_empty())
        .and_then(|p| Path::new(p).parent().map(|d| d.join(AGENT_MADE_FILE)))
    else {
        return Ok(None);
    };
    let Ok(text) = std::fs::read_to_string(&file) else {
        return Ok(None);
    };
    let now = super::now_ms();
    for line in text.lines() {
        let mut f = line.splitn(3, '\t');
        let (Some(id), Some(project), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let Ok(id) = id.parse::<i64>() else { continue };
        tx.execute(
            "INSERT OR IGNORE INTO agent_worlds (world_id, made_by, made_at)
             SELECT w.id, 'binky mcp (recorded in mcp-created)', ?4
             FROM worlds w JOIN projects p ON p.id = w.project_id
             WHERE w.id = ?1 AND p.name = ?2 AND w.name = ?3",
            rusqlite::params![id, project, name, now],
        )?;
    }
    Ok(Some(file))
}
