//! Running a program as another user, and handing it files: what binky does when it runs as
//! root and starts a database server that refuses to run as root (PostgreSQL, MariaDB).
//!
//! Unix looks the user up in the user database, runs the program with its uid and gid (set
//! in the child before `exec`, so the pid binky gets is the program's own) and `chown`s its
//! files. Windows is never in that position: binky is not told apart as an administrator
//! there ([`crate::user::is_root`] is false), so the servers run as the user binky runs as;
//! [`account`] says `Unsupported` and [`chown`] is never reached.

use std::io;
use std::path::Path;

/// A system user a program may run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    /// Its user id.
    pub uid: u32,
    /// Its primary group's id.
    pub gid: u32,
}

impl Account {
    /// Is this the system's highest user (uid 0)?
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

/// The system user called `name`, if there is one.
pub fn account(name: &str) -> io::Result<Option<Account>> {
    #[cfg(unix)]
    {
        let user = nix::unistd::User::from_name(name).map_err(io::Error::from)?;
        Ok(user.map(|u| Account {
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
        }))
    }
    #[cfg(not(unix))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "binky does not run programs as another user (`{name}`) on this system: \
                 run binky as the user the server should run as"
            ),
        ))
    }
}

/// Hands `path` to `account` (its owner and group).
pub fn chown(path: &Path, account: Account) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::chown(path, Some(account.uid), Some(account.gid))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, account);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "files are not handed to another user on this system",
        ))
    }
}

/// Makes the program `cmd` starts run as `account` (its uid and gid, set in the child
/// before `exec`). No account is ever had on Windows (see the module doc).
pub fn run_as(cmd: &mut std::process::Command, account: Account) -> &mut std::process::Command {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.uid(account.uid).gid(account.gid)
    }
    #[cfg(not(unix))]
    {
        let _ = account;
        cmd
    }
}

/// [`run_as`], for tokio's commands.
pub fn run_as_async(
    cmd: &mut tokio::process::Command,
    account: Account,
) -> &mut tokio::process::Command {
    #[cfg(unix)]
    {
        cmd.uid(account.uid).gid(account.gid)
    }
    #[cfg(not(unix))]
    {
        let _ = account;
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn root_is_found_by_name_and_a_made_up_user_is_not() {
        let root = account("root").unwrap().expect("every Unix has root");
        assert!(root.is_root());
        assert_eq!(account("binky-no-such-user").unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_program_run_as_this_user_and_a_file_handed_to_it_keep_this_users_ids() {
        use std::os::unix::fs::MetadataExt;
        let me = Account {
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
        };
        let out = run_as(std::process::Command::new("id").arg("-u"), me)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            me.uid.to_string()
        );
        let dir = tempfile::tempdir().unwrap();
        chown(dir.path(), me).unwrap();
        assert_eq!(std::fs::metadata(dir.path()).unwrap().uid(), me.uid);
    }

    #[cfg(windows)]
    #[test]
    fn no_user_is_looked_up_on_windows_and_the_error_says_what_to_do() {
        let e = account("postgres").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(e.to_string().contains("run binky as the user"), "{e}");
    }
}
