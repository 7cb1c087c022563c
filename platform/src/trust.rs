//! Putting binky's local CA in the system's trust, where each system keeps it.
//!
//! - Windows: the current user's `Root` store ("Trusted Root Certification Authorities"),
//!   through `certutil`, which ships with Windows: no administrator needed, and Windows asks
//!   the user to confirm in a dialog. Browsers but Firefox read that store.
//! - Linux: a system-wide folder of anchors and the command that rebuilds the bundle, which
//!   differ per distribution, not per system (`binky trust` knows them); they need root.
//!   [`user_store`] is `None` there.

use std::ffi::OsString;
use std::path::Path;

/// How this system's per-user trust store takes and gives back a certificate, where it has
/// one binky uses (Windows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserStore {
    /// Where it is, in words for a person.
    pub name: &'static str,
}

impl UserStore {
    /// The command that adds the certificate file `cert` (PEM or DER).
    pub fn add(&self, cert: &Path) -> Vec<OsString> {
        let mut cmd: Vec<OsString> = ["certutil", "-user", "-addstore", "Root"]
            .map(OsString::from)
            .to_vec();
        cmd.push(cert.as_os_str().to_owned());
        cmd
    }

    /// The command that removes the certificate whose SHA-1 thumbprint (hex) is
    /// `thumbprint`: the name certutil finds one certificate by, whatever its subject.
    pub fn remove(&self, thumbprint: &str) -> Vec<OsString> {
        ["certutil", "-user", "-delstore", "Root", thumbprint]
            .map(OsString::from)
            .to_vec()
    }
}

/// This system's per-user trust store, if binky uses one: Windows' (see the module doc).
pub fn user_store() -> Option<UserStore> {
    user_store_on(cfg!(windows))
}

/// [`user_store`] on Windows (`windows`) or elsewhere.
pub fn user_store_on(windows: bool) -> Option<UserStore> {
    windows.then_some(UserStore {
        name: "the current user's Trusted Root Certification Authorities (certutil -user Root)",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_takes_the_ca_into_the_users_root_store_with_certutil_and_linux_has_no_such_store() {
        assert_eq!(user_store_on(false), None);
        let store = user_store_on(true).unwrap();
        assert_eq!(
            store.add(Path::new("C:/Users/me/.binky/ca/ca.crt")),
            [
                "certutil",
                "-user",
                "-addstore",
                "Root",
                "C:/Users/me/.binky/ca/ca.crt"
            ]
        );
        assert_eq!(
            store.remove("0a1b"),
            ["certutil", "-user", "-delstore", "Root", "0a1b"]
        );
        assert_eq!(user_store().is_some(), cfg!(windows));
    }
}
