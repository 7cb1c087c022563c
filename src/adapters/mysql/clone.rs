//! Cloning a sealed template into a slice: survey it, copy its objects and rows, rewrite the definitions that name it.

use super::*;

/// What a template holds that [`clone`] copies.
#[derive(Debug, Default)]
pub(super) struct Inventory {
    pub(super) tables: Vec<String>,
    pub(super) views: Vec<String>,
    pub(super) triggers: Vec<String>,
    /// `(PROCEDURE | FUNCTION, name)`.
    pub(super) routines: Vec<(String, String)>,
}

/// Copy the database `from` into a fresh slice `to` inside the server (see the module doc).
pub(super) async fn clone(admin: &mut Admin, from: &str, to: &Slice) -> Result<()> {
    let server = admin.server.clone();
    // Whatever can refuse does so before anything is made.
    let (inventory, charset) = bounded(&server, VERB_TIMEOUT, survey(admin, from)).await?;
    bounded(&server, VERB_TIMEOUT, async {
        ensure_user(admin, to).await?;
        // A copy left by an attempt that died half-way is made again from scratch.
        admin.end_sessions(&to.name).await?;
        admin
            .execute(
                "dropping a half-made copy",
                &format!("DROP DATABASE IF EXISTS {}", quote_ident(&to.name)),
            )
            .await?;
        admin
            .execute(
                "creating the copy",
                &format!(
                    "CREATE DATABASE {}{}",
                    quote_ident(&to.name),
                    charset.clause()
                ),
            )
            .await
    })
    .await?;
    let copied = bounded(
        &server,
        CLONE_TIMEOUT,
        copy(admin, &inventory, from, &to.name),
    )
    .await;
    if copied.is_err() {
        // Never leave a partial copy behind: the world falls back to provision, migrate and
        // seed, which must start from an empty database.
        let name = to.name.clone();
        let _ = bounded(&server, VERB_TIMEOUT, async {
            admin.end_sessions(&name).await?;
            admin
                .execute(
                    "dropping the failed copy",
                    &format!("DROP DATABASE IF EXISTS {}", quote_ident(&name)),
                )
                .await
        })
        .await;
    }
    copied
}

/// The template's objects, or a `Config` error naming what cannot be copied.
pub(super) async fn survey(admin: &mut Admin, from: &str) -> Result<(Inventory, DbCharset)> {
    let schema = admin
        .rows_with(
            "reading the template",
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME \
             FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            vec![Value::from(from)],
        )
        .await?;
    let Some(schema) = schema.first() else {
        return Err(AdapterError::Server {
            server: admin.server.clone(),
            detail: format!("the golden template database `{from}` does not exist"),
        });
    };
    let charset = DbCharset {
        charset: text(schema, 0),
        collation: text(schema, 1),
    };
    let mut inv = Inventory::default();
    let mut refused: Vec<String> = Vec::new();
    for row in admin
        .rows_with(
            "listing the template's tables",
            "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME",
            vec![Value::from(from)],
        )
        .await?
    {
        let (Some(name), Some(kind)) = (text(&row, 0), text(&row, 1)) else {
            continue;
        };
        match kind.as_str() {
            "BASE TABLE" => inv.tables.push(name),
            "VIEW" => inv.views.push(name),
            "SEQUENCE" => refused.push(format!("sequence `{name}`")),
            "SYSTEM VERSIONED" => refused.push(format!("system-versioned table `{name}`")),
            other => refused.push(format!("{} `{name}`", other.to_ascii_lowercase())),
        }
    }
    for row in admin
        .rows_with(
            "listing the template's routines",
            "SELECT ROUTINE_TYPE, ROUTINE_NAME FROM information_schema.ROUTINES \
             WHERE ROUTINE_SCHEMA = ? ORDER BY ROUTINE_TYPE, ROUTINE_NAME",
            vec![Value::from(from)],
        )
        .await?
    {
        let (Some(kind), Some(name)) = (text(&row, 0), text(&row, 1)) else {
            continue;
        };
        match kind.as_str() {
            "PROCEDURE" | "FUNCTION" => inv.routines.push((kind, name)),
            other => refused.push(format!("{} `{name}`", other.to_ascii_lowercase())),
        }
    }
    for row in admin
        .rows_with(
            "listing the template's events",
            "SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ? \
             ORDER BY EVENT_NAME",
            vec![Value::from(from)],
        )
        .await?
    {
        if let Some(name) = text(&row, 0) {
            refused.push(format!("event `{name}`"));
        }
    }
    for row in admin
        .rows_with(
            "listing the template's triggers",
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? \
             ORDER BY EVENT_OBJECT_TABLE, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER",
            vec![Value::from(from)],
        )
        .await?
    {
        if let Some(name) = text(&row, 0) {
            inv.triggers.push(name);
        }
    }
    if !refused.is_empty() {
        return Err(AdapterError::Config(format!(
            "the golden template `{from}` holds what binky cannot copy inside the server \
             ({}); each world is provisioned, migrated and seeded instead",
            refused.join(", ")
        )));
    }
    Ok((inv, charset))
}

/// Copy the inventory of `from` into the empty database `to`, over this session.
pub(super) async fn copy(admin: &mut Admin, inv: &Inventory, from: &str, to: &str) -> Result<()> {
    let (src, dst) = (quote_ident(from), quote_ident(to));
    let definer = fit_name(to, MAX_USER);
    admin
        .execute(
            "preparing the copy",
            "SET SESSION foreign_key_checks = 0, unique_checks = 0",
        )
        .await?;
    admin
        .execute("using the copy", &format!("USE {dst}"))
        .await?;
    for table in &inv.tables {
        let t = quote_ident(table);
        let doing = format!("copying the definition of table `{table}`");
        let create = admin
            .rows(&doing, &format!("SHOW CREATE TABLE {src}.{t}"))
            .await?
            .first()
            .and_then(|r| text(r, 1))
            .ok_or_else(|| admin.server_error(&format!("{doing}: no definition")))?;
        admin.execute(&doing, &create).await?;
        let columns: Vec<String> = admin
            .rows_with(
                &doing,
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? \
                   AND EXTRA NOT LIKE '%VIRTUAL GENERATED%' \
                   AND EXTRA NOT LIKE '%STORED GENERATED%' \
                   AND EXTRA NOT LIKE '%PERSISTENT GENERATED%' \
                 ORDER BY ORDINAL_POSITION",
                vec![Value::from(from), Value::from(table.as_str())],
            )
            .await?
            .iter()
            .filter_map(|r| text(r, 0))
            .map(|c| quote_ident(&c))
            .collect();
        if columns.is_empty() {
            continue;
        }
        let list = columns.join(", ");
        admin
            .execute(
                &format!("copying the rows of table `{table}`"),
                &format!("INSERT INTO {dst}.{t} ({list}) SELECT {list} FROM {src}.{t}"),
            )
            .await?;
    }
    // Routines before views (a view may call a function); triggers last, after the rows.
    for (kind, name) in &inv.routines {
        let doing = format!("copying {} `{name}`", kind.to_ascii_lowercase());
        let (mode, create) = show_create(admin, &doing, &format!("{kind} {src}"), name).await?;
        let create = create.ok_or_else(|| {
            admin.server_error(&format!(
                "{doing}: the server shows no definition (admin_url's user needs SELECT on \
                 mysql.proc, or to be the routine's definer)"
            ))
        })?;
        admin
            .with_sql_mode(&doing, &mode, &rewrite(&create, from, to, &definer))
            .await?;
    }
    let mut pending: Vec<&String> = inv.views.iter().collect();
    while !pending.is_empty() {
        let mut waiting = Vec::new();
        let mut last = None;
        for view in pending.iter().copied() {
            let doing = format!("copying view `{view}`");
            let create = admin
                .rows(
                    &doing,
                    &format!("SHOW CREATE VIEW {src}.{}", quote_ident(view)),
                )
                .await?
                .first()
                .and_then(|r| text(r, 1))
                .ok_or_else(|| admin.server_error(&format!("{doing}: no definition")))?;
            match admin
                .conn
                .query_drop(rewrite(&create, from, to, &definer))
                .await
            {
                Ok(()) => {}
                // It reads a view not made yet: the next pass.
                Err(mysql_async::Error::Server(e)) if matches!(e.code, 1146 | 1356) => {
                    last = Some(admin.error(&doing, &mysql_async::Error::Server(e)));
                    waiting.push(view);
                }
                Err(e) => return Err(admin.error(&doing, &e)),
            }
        }
        if waiting.len() == pending.len() {
            return Err(last.unwrap_or_else(|| admin.server_error("copying views")));
        }
        pending = waiting;
    }
    for trigger in &inv.triggers {
        let doing = format!("copying trigger `{trigger}`");
        let (mode, create) = show_create(admin, &doing, &format!("TRIGGER {src}"), trigger).await?;
        let create =
            create.ok_or_else(|| admin.server_error(&format!("{doing}: no definition")))?;
        admin
            .with_sql_mode(&doing, &mode, &rewrite(&create, from, to, &definer))
            .await?;
    }
    Ok(())
}

/// `SHOW CREATE {what}.{name}` of a routine or trigger: the sql_mode it was made under and
/// its definition, when the server shows one (columns 1 and 2).
async fn show_create(
    admin: &mut Admin,
    doing: &str,
    what: &str,
    name: &str,
) -> Result<(String, Option<String>)> {
    let sql = format!("SHOW CREATE {what}.{}", quote_ident(name));
    let row = admin.rows(doing, &sql).await?;
    Ok(row
        .first()
        .map(|r| (text(r, 1).unwrap_or_default(), text(r, 2)))
        .unwrap_or_default())
}

/// A definition read from the template, made the copy's: its schema name replaced and its
/// definer made the copy's user.
pub(super) fn rewrite(sql: &str, from: &str, to: &str, user: &str) -> String {
    with_definer(&replace_schema(sql, from, to), user)
}

/// `` `from`. `` and a bare `from.` (not inside a longer name) → `` `to`. ``.
pub(super) fn replace_schema(sql: &str, from: &str, to: &str) -> String {
    let quoted = sql.replace(&format!("`{from}`."), &format!("`{to}`."));
    let bare = format!("{from}.");
    let mut out = String::with_capacity(quoted.len());
    let mut rest = quoted.as_str();
    while let Some(at) = rest.find(&bare) {
        let before = rest[..at].chars().next_back();
        let inside_name =
            before.is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '`'));
        out.push_str(&rest[..at]);
        if inside_name {
            out.push_str(&bare);
        } else {
            out.push_str(&format!("`{to}`."));
        }
        rest = &rest[at + bare.len()..];
    }
    out.push_str(rest);
    out
}

/// The `DEFINER=<account>` clause made `` DEFINER=`user`@`%` ``, or put after `CREATE`
/// when the definition has none (it would default to the admin).
pub(super) fn with_definer(sql: &str, user: &str) -> String {
    let clause = format!("DEFINER=`{user}`@`%`");
    // ASCII upper-casing keeps byte offsets.
    let upper = sql.to_ascii_uppercase();
    if let Some(at) = upper.find("DEFINER=") {
        let mut end = skip_account_part(sql, at + "DEFINER=".len());
        if sql.as_bytes().get(end) == Some(&b'@') {
            end = skip_account_part(sql, end + 1);
        }
        return format!("{}{clause}{}", &sql[..at], &sql[end..]);
    }
    let lead = sql.len() - sql.trim_start().len();
    if upper[lead..].starts_with("CREATE ") {
        return format!("{}CREATE {clause} {}", &sql[..lead], &sql[lead + 7..]);
    }
    sql.to_owned()
}

/// The end of one part of an account name starting at `i` (`` `u` ``, `'u'`, `"u"` or bare).
pub(super) fn skip_account_part(s: &str, i: usize) -> usize {
    let b = s.as_bytes();
    match b.get(i) {
        Some(&q) if matches!(q, b'`' | b'\'' | b'"') => {
            let mut j = i + 1;
            while j < b.len() {
                if b[j] == q {
                    if b.get(j + 1) == Some(&q) {
                        j += 2;
                        continue;
                    }
                    return j + 1;
                }
                j += if b[j] == b'\\' && q != b'`' { 2 } else { 1 };
            }
            b.len()
        }
        _ => {
            let mut j = i;
            while j < b.len() && !b[j].is_ascii_whitespace() && b[j] != b'@' {
                j += 1;
            }
            j
        }
    }
}
