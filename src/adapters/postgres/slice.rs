//! Creating, sealing, cloning and dropping a slice's database and role.

use super::*;

pub(super) async fn provision(admin: &Admin, slice: &Slice) -> Result<()> {
    ensure_role(admin, slice).await?;
    let name = slice.name.as_str();
    let id = escape_identifier(name);
    ensure_database(admin, name, &id).await?;
    close_database(admin, name, &id).await
}

/// The slice's login role, with its password (made, or healed).
pub(super) async fn ensure_role(admin: &Admin, slice: &Slice) -> Result<()> {
    let name = slice.name.as_str();
    let id = escape_identifier(name);
    // A SCRAM verifier with a fresh salt: the server stores it as is, and the secret itself
    // never crosses the wire (nor lands in a log line if a statement fails).
    let verifier = escape_literal(&postgres_protocol::password::scram_sha_256(
        slice.secret.as_bytes(),
    ));

    let role_exists = admin.role_exists(name).await?;
    let created = !role_exists
        && admin
            .execute_unless(
                "creating the role",
                &format!(
                    "CREATE ROLE {id} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE \
                     NOREPLICATION NOBYPASSRLS PASSWORD {verifier}"
                ),
                // Made by a concurrent provision since we looked: heal it below.
                &SqlState::DUPLICATE_OBJECT,
            )
            .await?;
    if !created {
        // Only a superuser may name the superuser-only attributes, even to turn them off.
        let superuser_only = if admin.superuser {
            " NOSUPERUSER NOREPLICATION NOBYPASSRLS"
        } else {
            ""
        };
        admin
            .execute(
                "setting the role's password",
                &format!(
                    "ALTER ROLE {id} WITH LOGIN NOCREATEDB NOCREATEROLE{superuser_only} \
                     PASSWORD {verifier}"
                ),
            )
            .await?;
    }
    // Marked binky's, unless a mark is there already (a home's, which stays).
    let marked = admin
        .role_comment(name)
        .await?
        .flatten()
        .is_some_and(|c| mark::parse(&c).is_some());
    if !marked {
        admin
            .execute(
                "marking the role",
                &format!("COMMENT ON ROLE {id} IS {}", escape_literal(MARK)),
            )
            .await?;
    }
    if !admin.superuser {
        // CREATE DATABASE … OWNER, DROP DATABASE and pg_terminate_backend need membership.
        admin
            .execute(
                "granting the admin membership in the role",
                &format!("GRANT {id} TO CURRENT_USER"),
            )
            .await?;
    }
    Ok(())
}

/// The slice's database, owned by its role.
pub(super) async fn ensure_database(admin: &Admin, name: &str, id: &str) -> Result<()> {
    match admin.database(name).await? {
        None => {
            // CREATE DATABASE cannot run in a transaction block: its own statement.
            admin
                .execute_unless(
                    "creating the database",
                    &format!("CREATE DATABASE {id} OWNER {id}"),
                    &SqlState::DUPLICATE_DATABASE,
                )
                .await?;
        }
        Some(db) if db.ours(name) => {
            admin
                .execute(
                    "setting the database's owner",
                    &format!("ALTER DATABASE {id} OWNER TO {id}"),
                )
                .await?;
        }
        Some(db) => {
            return Err(AdapterError::Config(format!(
                "{}: a database `{name}` exists that binky did not make (owner `{}`, no \
                 `{MARK}` comment); drop or rename it, or give the service another name",
                admin.server, db.owner
            )));
        }
    }
    Ok(())
}

/// Mark the slice's database `name` (quoted: `id`) as binky's, unless a mark is there
/// already (a home's, which stays), and close it to every other role.
pub(super) async fn close_database(admin: &Admin, name: &str, id: &str) -> Result<()> {
    // Marked right after creation: a crash before this leaves a database owned by the slice
    // role, which the next provision recognises as its own.
    let marked = admin
        .database(name)
        .await?
        .is_some_and(|db| db.mark().is_some());
    if !marked {
        admin
            .execute(
                "marking the database",
                &format!("COMMENT ON DATABASE {id} IS {}", escape_literal(MARK)),
            )
            .await?;
    }
    admin
        .execute(
            "closing the database to other roles",
            &format!("REVOKE ALL ON DATABASE {id} FROM PUBLIC"),
        )
        .await
}

/// Marks the slice `name`'s database and role as `home`'s, unless either names another
/// home; the maker recorded now. Under an advisory lock on the name, so two homes claiming
/// one slice at once (each adopting the same slice made before homes had an identity) take
/// turns and the second finds the first's mark. Comments are the server's own record: they
/// go with the database and the role, and `\l+` and `\du+` show them.
pub(super) async fn claim(admin: &Admin, name: &str, home: &str) -> Result<Maker> {
    let doing = "waiting for another claim of the slice";
    admin
        .client
        .execute(
            "SELECT pg_advisory_lock($1, hashtext($2))",
            &[&CLAIM_LOCK, &name],
        )
        .await
        .map_err(|e| admin.sql_error(doing, &e))?;
    let claimed = claim_locked(admin, name, home).await;
    let unlocked = admin
        .client
        .execute(
            "SELECT pg_advisory_unlock($1, hashtext($2))",
            &[&CLAIM_LOCK, &name],
        )
        .await
        .map_err(|e| admin.sql_error("ending the claim", &e));
    let maker = claimed?;
    unlocked?;
    Ok(maker)
}

async fn claim_locked(admin: &Admin, name: &str, home: &str) -> Result<Maker> {
    let found = admin.maker(name).await?;
    if found.other_than(home).is_some() || found == Maker::Absent {
        return Ok(found);
    }
    let (id, text) = (escape_identifier(name), escape_literal(&mark::text(home)));
    if admin.database(name).await?.is_some() {
        admin
            .execute(
                "marking the database as this home's",
                &format!("COMMENT ON DATABASE {id} IS {text}"),
            )
            .await?;
    }
    if admin.role_exists(name).await? {
        admin
            .execute(
                "marking the role as this home's",
                &format!("COMMENT ON ROLE {id} IS {text}"),
            )
            .await?;
    }
    Ok(Maker::Home(home.to_owned()))
}

/// A golden template takes no connections (a copy needs none open), and belongs to the
/// admin, so that `REASSIGN OWNED` in a copy moves only the copy's objects.
pub(super) async fn seal(admin: &Admin, name: &str) -> Result<()> {
    let id = escape_identifier(name);
    admin
        .execute_each(&[
            (
                "handing the template to the admin",
                format!("ALTER DATABASE {id} OWNER TO CURRENT_USER"),
            ),
            (
                "closing the template",
                format!("ALTER DATABASE {id} ALLOW_CONNECTIONS false"),
            ),
        ])
        .await?;
    admin.terminate(name).await
}

/// How `CREATE DATABASE … TEMPLATE` copies (PostgreSQL 15+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Strategy {
    /// Every block through shared buffers and into the WAL: no checkpoint, one WAL flush;
    /// its cost grows with the template's size.
    WalLog,
    /// Two checkpoints, then the files copied and each one synced: a fixed cost that grows
    /// with the number of files (relations), then cheaper per byte.
    FileCopy,
}

impl Strategy {
    fn sql(self) -> &'static str {
        match self {
            Strategy::WalLog => " STRATEGY = WAL_LOG",
            Strategy::FileCopy => " STRATEGY = FILE_COPY",
        }
    }

    /// The strategy for a template of `bytes` (`pg_database_size`) on a server that syncs
    /// its writes (`fsync`) or not: `WAL_LOG` below [`FILE_COPY_FROM`] on a server that
    /// syncs (a checkpoint and a sync of every file cost more than writing a small database
    /// to the WAL), else `FILE_COPY` (measured in benchmarks/README.md, "Golden templates":
    /// without fsync it was the faster at every size).
    pub(super) fn for_template(bytes: i64, fsync: bool) -> Strategy {
        if fsync && bytes < FILE_COPY_FROM {
            Strategy::WalLog
        } else {
            Strategy::FileCopy
        }
    }
}

/// The service's `clone_strategy` option (`auto`, the default; `wal_log`; `file_copy`), or
/// by the template's size and the server's `fsync` ([`Strategy::for_template`]).
async fn choose_strategy(admin: &Admin, cfg: &AdapterConfig, template: &str) -> Result<Strategy> {
    let asked = cfg
        .options
        .get("clone_strategy")
        .map(|s| s.trim().to_ascii_lowercase());
    match asked.as_deref() {
        Some("wal_log") => return Ok(Strategy::WalLog),
        Some("file_copy") => return Ok(Strategy::FileCopy),
        None | Some("auto") | Some("") => {}
        Some(other) => {
            return Err(AdapterError::Config(format!(
                "options.clone_strategy = \"{other}\" is not a strategy: use \"auto\" (the default: by the template's size), \"wal_log\" or \"file_copy\""
            )))
        }
    }
    let doing = "measuring the template";
    let row = admin
        .client
        .query_one(
            "SELECT pg_database_size($1::text), current_setting('fsync')::bool",
            &[&template],
        )
        .await
        .map_err(|e| admin.sql_error(doing, &e))?;
    let bytes: i64 = row.try_get(0).map_err(|e| admin.sql_error(doing, &e))?;
    let fsync: bool = row.try_get(1).map_err(|e| admin.sql_error(doing, &e))?;
    let chosen = Strategy::for_template(bytes, fsync);
    tracing::debug!(template, bytes, fsync, ?chosen, "clone strategy");
    Ok(chosen)
}

/// `CREATE DATABASE to TEMPLATE from`, then hand every object of the copy to `to`'s role.
pub(super) async fn clone(
    admin: &Admin,
    cfg: &AdapterConfig,
    from: &Slice,
    to: &Slice,
) -> Result<()> {
    ensure_role(admin, to).await?;
    let (src, dst) = (escape_identifier(&from.name), escape_identifier(&to.name));
    // A copy left by an attempt that died half-way is redone.
    if let Some(db) = admin.database(&to.name).await? {
        if db.ours(&to.name) {
            admin.terminate(&to.name).await?;
            admin
                .execute(
                    "dropping a half-made copy",
                    &format!("DROP DATABASE IF EXISTS {dst}"),
                )
                .await?;
        }
    }
    let strategy = if admin.version >= 150_000 {
        choose_strategy(admin, cfg, &from.name).await?.sql()
    } else {
        ""
    };
    let create = format!("CREATE DATABASE {dst} TEMPLATE {src} OWNER {dst}{strategy}");
    // No session may be connected to the template while it is copied: end stray ones
    // (the template takes no new ones), and once more if one slipped in.
    let mut tries = 0;
    loop {
        admin.terminate(&from.name).await?;
        match admin.client.batch_execute(&create).await {
            Ok(()) => break,
            Err(e) if e.code() == Some(&SqlState::OBJECT_IN_USE) && tries < 5 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(admin.sql_error("copying the template", &e)),
        }
    }
    close_database(admin, &to.name, &dst).await?;
    // Objects in the copy belong to whoever built the template: hand them to the world's
    // role, or its application gets "permission denied".
    let inside = Admin::connect_to(cfg, &to.secret, &to.name).await?;
    inside
        .execute(
            "handing the copy's objects to the slice role",
            &format!("REASSIGN OWNED BY {src} TO {dst}"),
        )
        .await?;
    Ok(())
}

pub(super) async fn teardown(admin: &Admin, name: &str) -> Result<()> {
    let id = escape_identifier(name);
    match admin.database(name).await? {
        Some(db) if db.ours(name) => {
            if admin.version < 130_000 {
                // No DROP … WITH (FORCE) before 13: shut the door, then end the sessions.
                admin
                    .execute(
                        "closing the database",
                        &format!("ALTER DATABASE {id} ALLOW_CONNECTIONS false"),
                    )
                    .await?;
            }
            admin.terminate(name).await?;
            let force = if admin.version >= 130_000 {
                " WITH (FORCE)"
            } else {
                ""
            };
            admin
                .execute(
                    "dropping the database",
                    &format!("DROP DATABASE IF EXISTS {id}{force}"),
                )
                .await?;
        }
        Some(db) => tracing::warn!(
            database = name,
            owner = %db.owner,
            "not dropping a database binky did not make"
        ),
        None => {}
    }
    let role_exists = admin.role_exists(name).await?;
    if role_exists {
        // Sessions of the role in other databases (it may log in to `postgres`).
        admin.terminate(name).await?;
        admin
            .execute("dropping the role", &format!("DROP ROLE IF EXISTS {id}"))
            .await?;
    }
    Ok(())
}
