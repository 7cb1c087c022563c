//! Putting binky's local CA in the system's trust, where each system keeps it.
//!
//! - Windows: the current user's `Root` store ("Trusted Root Certification Authorities"),
//!   through `certutil`, which ships with Windows: no administrator needed, and Windows asks
//!   the user to confirm in a dialog. Browsers but Firefox read that store.
//! - macOS: the user's login keychain
//!   (`~/Library/Keychains/login.keychain-db`), trusted as a root for that user, through
//!   `security add-trusted-cert -r trustRoot`, which ships with macOS: no `sudo`, but
//!   changing trust settings asks for the user's password in a dialog of the desktop
//!   session (so it fails over SSH, where no dialog can be shown). Safari, Chrome, Apple's
//!   curl and every program using the system's TLS read it; Firefox, Node, Python and
//!   Homebrew's OpenSSL keep their own bundles.
//! - Linux: a system-wide folder of anchors and the command that rebuilds the bundle, which
//!   differ per distribution, not per system (`binky trust` knows them); they need root.
//!   [`user_store`] is `None` there.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::install::System;

/// How this system's per-user trust store takes and gives back a certificate, where it has
/// one binky uses (Windows, macOS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserStore {
    /// Where it is, in words for a person.
    pub name: &'static str,
    /// Which store it is.
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// Windows' current user `Root` store, through `certutil`.
    WindowsRoot,
    /// This login keychain file of macOS, through `security`.
    Keychain(PathBuf),
}

impl UserStore {
    /// The command that adds the certificate file `cert` (PEM or DER).
    pub fn add(&self, cert: &Path) -> Vec<OsString> {
        let mut cmd: Vec<OsString> = match &self.kind {
            Kind::WindowsRoot => ["certutil", "-user", "-addstore", "Root"]
                .map(OsString::from)
                .to_vec(),
            // `-r trustRoot`: trusted as a root for every use; without `-d` the trust is the
            // user's own, not the admin domain's (which would need sudo).
            Kind::Keychain(keychain) => {
                let mut cmd: Vec<OsString> =
                    ["security", "add-trusted-cert", "-r", "trustRoot", "-k"]
                        .map(OsString::from)
                        .to_vec();
                cmd.push(keychain.as_os_str().to_owned());
                cmd
            }
        };
        cmd.push(cert.as_os_str().to_owned());
        cmd
    }

    /// The command that removes the certificate whose SHA-1 thumbprint (hex) is
    /// `thumbprint`: the name the store finds one certificate by, whatever its subject.
    /// On macOS its trust setting goes with it (`-t`).
    pub fn remove(&self, thumbprint: &str) -> Vec<OsString> {
        match &self.kind {
            Kind::WindowsRoot => ["certutil", "-user", "-delstore", "Root", thumbprint]
                .map(OsString::from)
                .to_vec(),
            Kind::Keychain(keychain) => {
                let mut cmd: Vec<OsString> =
                    ["security", "delete-certificate", "-Z", thumbprint, "-t"]
                        .map(OsString::from)
                        .to_vec();
                cmd.push(keychain.as_os_str().to_owned());
                cmd
            }
        }
    }

    /// What a person is told when [`UserStore::add`] of `cert` failed with `error`: why it
    /// may have, and how to do it by hand.
    pub fn add_failed(&self, cert: &Path, error: &str) -> String {
        let command = words(&self.add(cert));
        match &self.kind {
            Kind::WindowsRoot => format!(
                "on Windows, binky puts its CA in {} and that failed: {error}; run `{command}` yourself, or import that file in certmgr.msc under Trusted Root Certification Authorities",
                self.name
            ),
            Kind::Keychain(_) => format!(
                "on macOS, binky puts its CA in {} and that failed: {error}; macOS asks for your password in a dialog before it changes trust settings, so run `binky trust` in a terminal of your desktop session (not over SSH) and answer the dialog, or run `{command}` there yourself, or open {} in Keychain Access, add it to the login keychain and set \"When using this certificate\" to \"Always Trust\"",
                self.name,
                cert.display()
            ),
        }
    }

    /// What a person is told when [`UserStore::remove`] of `thumbprint` failed with `error`.
    pub fn remove_failed(&self, thumbprint: &str, error: &str) -> String {
        let command = words(&self.remove(thumbprint));
        match &self.kind {
            Kind::WindowsRoot => format!(
                "on Windows, taking binky's CA out of {} failed: {error}; run `{command}` yourself, or delete it in certmgr.msc",
                self.name
            ),
            Kind::Keychain(_) => format!(
                "on macOS, taking binky's CA out of {} failed: {error}; macOS asks for your password in a dialog before it changes trust settings: run `{command}` in a terminal of your desktop session, or delete \"binky local CA\" in Keychain Access",
                self.name
            ),
        }
    }

    /// Which programs trust what the store trusts, and how the others are told of `cert`,
    /// one line each, for a person who just added it.
    pub fn readers(&self, cert: &Path) -> Vec<String> {
        let cert = cert.display();
        match &self.kind {
            Kind::WindowsRoot => vec![
                "Edge, Chrome, curl and the programs that use Windows' certificates now accept https://*.localhost from binky".to_owned(),
                format!("Firefox: Settings > Privacy & Security > Certificates > View Certificates > Authorities > Import {cert}, and tick \"Trust this CA to identify websites\" (or set security.enterprise_roots.enabled)"),
            ],
            Kind::Keychain(_) => vec![
                "Safari, Chrome, Apple's curl and the programs that use macOS' keychain now accept https://*.localhost from binky".to_owned(),
                format!("Firefox: set security.enterprise_roots.enabled in about:config (it then reads the keychain), or Settings > Privacy & Security > Certificates > View Certificates > Authorities > Import {cert}"),
                format!("Node, Python and Homebrew's curl and OpenSSL keep their own bundles: NODE_EXTRA_CA_CERTS={cert}, SSL_CERT_FILE or REQUESTS_CA_BUNDLE (a bundle that includes {cert})"),
            ],
        }
    }
}

/// A command's words as one line to run.
fn words(cmd: &[OsString]) -> String {
    cmd.iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// This system's per-user trust store, if binky uses one: Windows' and macOS' (see the
/// module doc). On macOS `None` when `HOME` is not set (no login keychain to name).
pub fn user_store() -> Option<UserStore> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    user_store_on(System::current(), home.as_deref())
}

/// [`user_store`] on `system`, for the user whose home folder is `home`.
pub fn user_store_on(system: System, home: Option<&Path>) -> Option<UserStore> {
    match system {
        System::Windows => Some(UserStore {
            name: "the current user's Trusted Root Certification Authorities (certutil -user Root)",
            kind: Kind::WindowsRoot,
        }),
        System::MacOs => Some(UserStore {
            name: "your login keychain (~/Library/Keychains/login.keychain-db)",
            kind: Kind::Keychain(home?.join("Library/Keychains/login.keychain-db")),
        }),
        System::Debian => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_takes_the_ca_into_the_users_root_store_with_certutil_and_linux_has_no_such_store() {
        assert_eq!(
            user_store_on(System::Debian, Some(Path::new("/home/me"))),
            None
        );
        let store = user_store_on(System::Windows, None).unwrap();
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
        let said = store.add_failed(Path::new("C:/ca.crt"), "denied");
        assert!(
            said.contains("`certutil -user -addstore Root C:/ca.crt`"),
            "{said}"
        );
        assert!(said.contains("denied"), "{said}");
        assert_eq!(
            user_store().is_some(),
            cfg!(any(windows, target_os = "macos"))
        );
    }

    // macOS's paths are Unix paths: on Windows `Path::join` writes a backslash between them and an
    // executable needs `.exe`, so these run on Unix (Linux in CI).
    #[cfg(unix)]
    #[test]
    fn macos_takes_the_ca_into_the_login_keychain_as_a_root_and_takes_its_trust_out_with_it() {
        let store = user_store_on(System::MacOs, Some(Path::new("/Users/me"))).unwrap();
        let cert = Path::new("/Users/me/.binky/ca/ca.crt");
        assert_eq!(
            store.add(cert),
            [
                "security",
                "add-trusted-cert",
                "-r",
                "trustRoot",
                "-k",
                "/Users/me/Library/Keychains/login.keychain-db",
                "/Users/me/.binky/ca/ca.crt"
            ]
        );
        assert_eq!(
            store.remove("0a1b"),
            [
                "security",
                "delete-certificate",
                "-Z",
                "0a1b",
                "-t",
                "/Users/me/Library/Keychains/login.keychain-db"
            ]
        );
        // No home, no keychain to name: binky says how to do it by hand instead.
        assert_eq!(user_store_on(System::MacOs, None), None);
    }

    // macOS's paths are Unix paths: on Windows `Path::join` writes a backslash between them and an
    // executable needs `.exe`, so these run on Unix (Linux in CI).
    #[cfg(unix)]
    #[test]
    fn a_failed_keychain_change_says_macos_asks_for_the_password_and_how_to_do_it_by_hand() {
        let store = user_store_on(System::MacOs, Some(Path::new("/Users/me"))).unwrap();
        let cert = Path::new("/Users/me/.binky/ca/ca.crt");
        let said = store.add_failed(
            cert,
            "SecTrustSettingsSetTrustSettings: The authorization was denied since no user interaction was possible.",
        );
        for part in [
            "on macOS",
            "no user interaction was possible",
            "password in a dialog",
            "not over SSH",
            "`security add-trusted-cert -r trustRoot -k /Users/me/Library/Keychains/login.keychain-db /Users/me/.binky/ca/ca.crt`",
            "Keychain Access",
            "Always Trust",
        ] {
            assert!(said.contains(part), "{part:?} not in {said}");
        }
        let said = store.remove_failed("0a1b", "denied");
        assert!(said.contains("`security delete-certificate -Z 0a1b -t /Users/me/Library/Keychains/login.keychain-db`"), "{said}");
        let readers = store.readers(cert).join("\n");
        assert!(readers.contains("Safari"), "{readers}");
        assert!(
            readers.contains("NODE_EXTRA_CA_CERTS=/Users/me/.binky/ca/ca.crt"),
            "{readers}"
        );
        let readers = user_store_on(System::Windows, None)
            .unwrap()
            .readers(cert)
            .join("\n");
        assert!(
            readers.contains("Edge") && !readers.contains("Safari"),
            "{readers}"
        );
    }
}
