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
        .await
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
