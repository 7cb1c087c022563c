//! Who runs binky, in words: for names a person reads (the local CA's common name).

/// The user's login name: `$USER` (Unix) or `%USERNAME%` (Windows), else the numeric user id
/// on Unix, else `"user"`.
pub fn name() -> String {
    for var in ["USER", "USERNAME"] {
        if let Ok(v) = std::env::var(var) {
            if !v.trim().is_empty() {
                return v;
            }
        }
    }
    #[cfg(unix)]
    {
        nix::unistd::getuid().to_string()
    }
    #[cfg(not(unix))]
    {
        "user".to_owned()
    }
}

/// The variable that names the user's home folder: `HOME` on Unix, `USERPROFILE` on Windows.
pub const HOME_VAR: &str = if cfg!(windows) { "USERPROFILE" } else { "HOME" };

/// The user's home folder: `$HOME` on Unix, `%USERPROFILE%` on Windows; `None` when it is not
/// set (or empty). Only the variable is read, never the user database, so a test or a
/// daemon can give binky a home of its own.
pub fn home() -> Option<std::path::PathBuf> {
    std::env::var_os(HOME_VAR)
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from)
}

/// How a person runs `binky ARGS` with the system's highest rights, for binky's home `home`
/// (a message's fix): `sudo env BINKY_HOME=HOME binky ARGS` on Unix; on Windows, from a
/// terminal opened with "Run as administrator", with `BINKY_HOME` set.
pub fn as_admin(home: &std::path::Path, args: &str) -> String {
    if cfg!(windows) {
        format!(
            "`binky {args}` in a terminal opened with \"Run as administrator\", with BINKY_HOME={}",
            home.display()
        )
    } else {
        format!("`sudo env BINKY_HOME={} binky {args}`", home.display())
    }
}

/// Whether binky runs with the system's highest rights: root (effective uid 0) on Unix.
/// On Windows, false (an elevated administrator is not told apart yet).
pub fn is_root() -> bool {
    #[cfg(unix)]
    {
        nix::unistd::geteuid().is_root()
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// Who this is, as a word for names that must differ between users of one machine (the
/// daemon's socket under a shared `/tmp`): the numeric user id on Unix, the login name on
/// Windows.
pub fn id() -> String {
    #[cfg(unix)]
    {
        nix::unistd::getuid().to_string()
    }
    #[cfg(not(unix))]
    {
        name()
    }
}

/// The machine's name, or `""` when it cannot be read: `/etc/hostname` on Linux,
/// `gethostname(2)` on the other Unix systems (macOS has no `/etc/hostname`),
/// `%COMPUTERNAME%` on Windows.
pub fn host() -> String {
    #[cfg(target_os = "linux")]
    let found = std::fs::read_to_string("/etc/hostname").ok();
    #[cfg(all(unix, not(target_os = "linux")))]
    let found = {
        let mut buf = [0u8; 256];
        // SAFETY: the call writes at most the buffer's size into it.
        let rc = unsafe { nix::libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        (rc == 0)
            .then(|| crate::proc::darwin::c_field(&buf))
            .flatten()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    #[cfg(not(unix))]
    let found = std::env::var("COMPUTERNAME").ok();
    found.map(|h| h.trim().to_owned()).unwrap_or_default()
}

/// The variables the system's own libraries need in every process (its folders, the user's
/// profile and temporary folder, how a program is found), which an environment cleared down
/// to a session's basics keeps (the daemon started from a world's process). Windows: without
/// `SystemRoot`, for one, a program cannot open a socket. None on Unix: a session's basics
/// (`HOME`, `PATH`, …) are the same there for every Unix, and the caller names them.
#[cfg(windows)]
pub const SYSTEM_VARIABLES: &[&str] = &[
    "SystemRoot",
    "SystemDrive",
    "windir",
    "ComSpec",
    "PATHEXT",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "USERNAME",
    "USERDOMAIN",
    "COMPUTERNAME",
    "APPDATA",
    "LOCALAPPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "ProgramData",
    "ProgramFiles",
    "ProgramFiles(x86)",
    "ProgramW6432",
    "CommonProgramFiles",
    "CommonProgramFiles(x86)",
    "CommonProgramW6432",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
    "OS",
];

/// [`SYSTEM_VARIABLES`] on Unix: none.
#[cfg(not(windows))]
pub const SYSTEM_VARIABLES: &[&str] = &[];

/// Whether `a` and `b` name one environment variable: the same text on Unix; Windows'
/// names are the same in any case (`Path` is `PATH`).
pub fn same_variable(a: &str, b: &str) -> bool {
    if cfg!(windows) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_admin_command_names_the_home_and_the_arguments() {
        let home = std::env::temp_dir().join("a home");
        let fix = super::as_admin(&home, "hosts --write");
        assert!(fix.contains("binky hosts --write"), "{fix}");
        assert!(fix.contains(&home.display().to_string()), "{fix}");
        assert_eq!(fix.contains("sudo"), cfg!(unix), "{fix}");
    }

    #[test]
    fn the_home_is_the_variable_the_system_names() {
        assert_eq!(
            super::home(),
            std::env::var_os(super::HOME_VAR).map(std::path::PathBuf::from)
        );
        assert!(super::home().is_some(), "{} is set", super::HOME_VAR);
    }

    #[test]
    fn a_variables_name_is_read_as_the_system_reads_it() {
        assert!(super::same_variable("PATH", "PATH"));
        assert_eq!(super::same_variable("Path", "PATH"), cfg!(windows));
        assert!(!super::same_variable("PATH", "PATHEXT"));
        // Each is one the system sets in this very process.
        for name in super::SYSTEM_VARIABLES.iter().take(3) {
            assert!(std::env::var_os(name).is_some(), "{name}");
        }
    }

    #[test]
    fn the_name_is_never_empty() {
        assert!(!super::name().trim().is_empty());
    }

    #[test]
    fn the_host_has_no_surrounding_space() {
        let host = super::host();
        assert_eq!(host, host.trim());
    }
}
