//! Creating, sealing and dropping a slice's database and user.

use super::*;

pub(super) async fn provision(admin: &mut Admin, slice: &Slice, charset: &DbCharset) -> Result<()> {
    ensure_user(admin, slice).await?;
    admin
        .execute(
            "creating the database",
            &format!(
                "CREATE DATABASE IF NOT EXISTS {}{}",
                quote_ident(&slice.name),
                charset.clause()
            ),
        )
        .await
}

/// The slice's user: made or healed (password, unlocked), granted its database only.
pub(super) async fn ensure_user(admin: &mut Admin, slice: &Slice) -> Result<()> {
    let account = account(&slice.name);
    let identified = if admin.mariadb {
        format!(
            "IDENTIFIED BY PASSWORD '{}'",
            native_password_hash(&slice.secret)
        )
    } else {
        format!("IDENTIFIED BY {}", quote_literal(&slice.secret))
    };
    admin
        .execute(
            "creating the user",
            &format!("CREATE USER IF NOT EXISTS {account} {identified}"),
        )
        .await?;
    admin
        .execute(
            "setting the user's password",
            &format!("ALTER USER {account} {identified}"),
        )
        .await?;
    admin.lock_account(&account, false).await?;
    let on = admin.grant_target(&slice.name);
    admin
        .execute(
            "granting the user its database",
            &format!("GRANT ALL PRIVILEGES ON {on}.* TO {account}"),
        )
        .await
}

/// The database of the server's catalog of which binky home made each slice (MySQL keeps
/// no comment on a database; MariaDB's `COMMENT` is not in MySQL 8): a table of its own,
/// whose primary key makes a claim atomic across homes.
pub(super) const CATALOG: &str = "binky_catalog";

/// `binky_catalog.slices`, made when missing.
async fn ensure_catalog(admin: &mut Admin) -> Result<()> {
    admin
        .execute(
            "making binky's catalog of slices",
            &format!("CREATE DATABASE IF NOT EXISTS {}", quote_ident(CATALOG)),
        )
        .await?;
    admin
        .execute(
            "making binky's catalog of slices",
            &format!(
                "CREATE TABLE IF NOT EXISTS {}.`slices` (\
                 `name` VARCHAR(64) CHARACTER SET ascii NOT NULL PRIMARY KEY, \
                 `home` CHAR(8) CHARACTER SET ascii NOT NULL, \
                 `claimed_at` TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
                quote_ident(CATALOG)
            ),
        )
        .await
}

/// The home the catalog records for the slice `name`, if any (no catalog yet: none).
async fn recorded_home(admin: &mut Admin, name: &str) -> Result<Option<String>> {
    let rows = admin
        .rows_with_missing_ok(
            "reading binky's catalog of slices",
            &format!(
                "SELECT `home` FROM {}.`slices` WHERE `name` = ?",
                quote_ident(CATALOG)
            ),
            vec![Value::from(name)],
        )
        .await?;
    Ok(rows.first().and_then(|r| text(r, 0)))
}

/// Which home the catalog says made the slice `name`: unmarked when its database or user
/// is there without a row, absent when neither is.
pub(super) async fn maker(admin: &mut Admin, name: &str) -> Result<Maker> {
    let there = admin.database_exists(name).await? || admin.user_exists(name).await?;
    if !there {
        return Ok(Maker::Absent);
    }
    Ok(match recorded_home(admin, name).await? {
        Some(home) => Maker::Home(home),
        None => Maker::Unmarked,
    })
}

/// Records `home` as the slice `name`'s maker unless the catalog names another (`INSERT
/// IGNORE` against the primary key: of two homes claiming at once, one wins); the maker
/// recorded now.
pub(super) async fn claim(admin: &mut Admin, name: &str, home: &str) -> Result<Maker> {
    ensure_catalog(admin).await?;
    admin
        .rows_with(
            "claiming the slice in binky's catalog",
            &format!(
                "INSERT IGNORE INTO {}.`slices` (`name`, `home`) VALUES (?, ?)",
                quote_ident(CATALOG)
            ),
            vec![Value::from(name), Value::from(home)],
        )
        .await?;
    Ok(match recorded_home(admin, name).await? {
        Some(h) => Maker::Home(h),
        None => Maker::Unmarked,
    })
}

pub(super) async fn teardown(admin: &mut Admin, name: &str) -> Result<()> {
    // The user first: no session can start while the database goes.
    admin
        .execute(
            "dropping the user",
            &format!("DROP USER IF EXISTS {}", account(name)),
        )
        .await?;
    admin.end_sessions(name).await?;
    admin
        .execute(
            "dropping the database",
            &format!("DROP DATABASE IF EXISTS {}", quote_ident(name)),
        )
        .await?;
    // Its mark last: a teardown cut short before this is still the home's to finish.
    admin
        .rows_with_missing_ok(
            "removing the slice from binky's catalog",
            &format!(
                "DELETE FROM {}.`slices` WHERE `name` = ?",
                quote_ident(CATALOG)
            ),
            vec![Value::from(name)],
        )
        .await
        .map(|_| ())
}

/// Lock the template's user, take its privileges, end its sessions.
pub(super) async fn seal(admin: &mut Admin, name: &str) -> Result<()> {
    let account = account(name);
    if admin.user_exists(name).await? {
        admin.lock_account(&account, true).await?;
        admin
            .execute(
                "revoking the template user's privileges",
                &format!("REVOKE ALL PRIVILEGES, GRANT OPTION FROM {account}"),
            )
            .await?;
    }
    admin.end_sessions(name).await
}
