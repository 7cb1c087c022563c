//! `binky trust [--uninstall]`: put binky's local CA in the system trust store (and say how
//! for browsers), or take it out.
//!
//! On Linux that is the distribution's anchor folder, as root. On Windows it is the current
//! user's Trusted Root Certification Authorities, through `certutil -user -addstore Root`;
//! on macOS the login keychain, through `security add-trusted-cert -r trustRoot`
//! ([`binky_platform::trust`]): no administrator needed, and the system asks to confirm (on
//! macOS with the user's password).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::context::{Ctx, Failure};
use super::exit;
use crate::proxy::tls::LocalCa;

/// A system trust store: where anchors go and the command that rebuilds the bundle.
struct SystemStore {
    dir: &'static str,
    update: &'static [&'static str],
}

const STORES: &[SystemStore] = &[
    // Debian, Ubuntu
    SystemStore {
        dir: "/usr/local/share/ca-certificates",
        update: &["update-ca-certificates"],
    },
    // Fedora, RHEL, Arch (p11-kit)
    SystemStore {
        dir: "/etc/pki/ca-trust/source/anchors",
        update: &["update-ca-trust", "extract"],
    },
    SystemStore {
        dir: "/etc/ca-certificates/trust-source/anchors",
        update: &["trust", "extract-compat"],
    },
];

fn store() -> Option<&'static SystemStore> {
    STORES.iter().find(|s| Path::new(s.dir).is_dir())
}

fn run<S: AsRef<OsStr>>(cmd: &[S]) -> Result<(), String> {
    let words: Vec<String> = cmd
        .iter()
        .map(|w| w.as_ref().to_string_lossy().into_owned())
        .collect();
    let Some((program, args)) = cmd.split_first() else {
        return Err("no command to run".to_owned());
    };
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", words[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        // certutil says why on stdout, the Unix tools on stderr.
        let said = [out.stderr, out.stdout]
            .iter()
            .map(|b| String::from_utf8_lossy(b).trim().to_owned())
            .find(|t| !t.is_empty())
            .unwrap_or_default();
        Err(format!("{} failed: {said}", words.join(" ")))
    }
}

fn nss_db() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let db = PathBuf::from(home).join(".pki/nssdb");
    db.is_dir().then_some(db)
}

/// Is the program `cmd` on `PATH`?
fn have(cmd: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| binky_platform::fs::executable_in(&dir, cmd))
    })
}

/// `binky trust`.
pub fn run_trust(uninstall: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let ca = LocalCa::load_or_create(&ctx.home.ca()).map_err(|e| Failure::failed(e.to_string()))?;
    let name = format!("binky-{}", ctx.home.tag());
    let nickname = format!("binky local CA ({})", ctx.home.tag());
    if let Some(user_store) = binky_platform::trust::user_store() {
        return if uninstall {
            uninstall_user(&user_store, &ca)
        } else {
            install_user(&user_store, &ca)
        };
    }
    let root = binky_platform::user::is_root();
    let Some(system) = store() else {
        return Err(Failure::failed(format!(
            "no system trust store found on this system (looked for {}); add {} to your system's trust store by hand",
            STORES.iter().map(|s| s.dir).collect::<Vec<_>>().join(", "),
            ca.cert_path().display()
        )));
    };
    let target = Path::new(system.dir).join(format!("{name}.crt"));
    if !root {
        return Err(needs_root(system, &target, &ca, uninstall));
    }
    if uninstall {
        return uninstall_ca(system, &target, &nickname);
    }
    install_ca(system, &target, &nickname, &ca)
}

/// The SHA-1 thumbprint of the CA's certificate (hex), the name certutil and macOS'
/// `security` find it by.
fn thumbprint(ca: &LocalCa) -> String {
    use sha1::{Digest, Sha1};
    Sha1::digest(ca.cert_der().as_ref())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Windows and macOS: binky's CA into the current user's trust store.
fn install_user(store: &binky_platform::trust::UserStore, ca: &LocalCa) -> Result<i32, Failure> {
    let cmd = store.add(&ca.cert_path());
    run(&cmd).map_err(|e| Failure::failed(store.add_failed(&ca.cert_path(), &e)))?;
    println!("binky's CA is trusted for this user, in {}", store.name);
    for line in store.readers(&ca.cert_path()) {
        println!("  {line}");
    }
    println!("`binky trust --uninstall` takes it out again.");
    Ok(exit::OK)
}

/// Windows and macOS: binky's CA out of the current user's trust store.
fn uninstall_user(store: &binky_platform::trust::UserStore, ca: &LocalCa) -> Result<i32, Failure> {
    let print = thumbprint(ca);
    run(&store.remove(&print)).map_err(|e| Failure::failed(store.remove_failed(&print, &e)))?;
    println!("removed binky's CA from {}", store.name);
    Ok(exit::OK)
}

/// Not root: the commands that would change the system trust store, for a person to run.
fn needs_root(system: &SystemStore, target: &Path, ca: &LocalCa, uninstall: bool) -> Failure {
    let cmds = if uninstall {
        format!(
            "sudo rm -f {} && sudo {}",
            target.display(),
            system.update.join(" ")
        )
    } else {
        format!(
            "sudo cp {} {} && sudo {}",
            ca.cert_path().display(),
            target.display(),
            system.update.join(" ")
        )
    };
    Failure::failed(format!(
        "changing the system trust store needs root; run:\n  {cmds}"
    ))
}

/// `binky trust --uninstall`: binky's CA out of the system trust store and Chromium's.
fn uninstall_ca(system: &SystemStore, target: &Path, nickname: &str) -> Result<i32, Failure> {
    let existed = target.exists();
    if existed {
        std::fs::remove_file(target)
            .map_err(|e| Failure::failed(format!("{}: {e}", target.display())))?;
    }
    run(system.update).map_err(Failure::failed)?;
    if let (Some(db), true) = (nss_db(), have("certutil")) {
        let _ = run(&[
            "certutil",
            "-d",
            &format!("sql:{}", db.display()),
            "-D",
            "-n",
            nickname,
        ]);
    }
    println!(
        "{} binky's CA from the system trust store{}",
        if existed { "removed" } else { "there was no" },
        if existed { "" } else { " to remove" }
    );
    Ok(exit::OK)
}

/// Puts binky's CA in the system trust store and Chromium's, and says how Firefox takes it.
fn install_ca(
    system: &SystemStore,
    target: &Path,
    nickname: &str,
    ca: &LocalCa,
) -> Result<i32, Failure> {
    std::fs::write(target, ca.cert_pem())
        .map_err(|e| Failure::failed(format!("{}: {e}", target.display())))?;
    run(system.update).map_err(Failure::failed)?;
    println!(
        "binky's CA is trusted by the system ({}):",
        target.display()
    );
    println!("  curl, wget, Python, Go, Node (with NODE_USE_SYSTEM_CA=1 or --use-system-ca) now accept https://*.localhost from binky");
    match (nss_db(), have("certutil")) {
        (Some(db), true) => {
            match run(&[
                "certutil",
                "-d",
                &format!("sql:{}", db.display()),
                "-A",
                "-t",
                "C,,",
                "-n",
                nickname,
                "-i",
                &ca.cert_path().to_string_lossy(),
            ]) {
                Ok(()) => println!("  Chromium and Chrome: added to {}", db.display()),
                Err(e) => println!("  Chromium and Chrome: {e}"),
            }
        }
        _ => println!(
            "  Chromium and Chrome keep their own store: `certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n '{nickname}' -i {}` (certutil is in libnss3-tools)",
            ca.cert_path().display()
        ),
    }
    println!(
        "  Firefox: Settings > Privacy & Security > Certificates > View Certificates > Authorities > Import {}, and tick \"Trust this CA to identify websites\"",
        ca.cert_path().display()
    );
    println!("`binky trust --uninstall` takes it out again.");
    Ok(exit::OK)
}

// Their commands (sh, true) and what they test (root's relocated data) are Unix's.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_program_on_path_is_had_and_a_made_up_one_is_not() {
        assert!(have("sh"));
        assert!(!have("binky-no-such-tool"));
    }

    #[test]
    fn a_failed_command_says_what_it_printed_on_either_stream() {
        // certutil explains itself on stdout.
        // (What it printed is not in the command's own words, which the error quotes too.)
        let e = run(&["sh", "-c", "printf 'refused %s' by-the-store; exit 1"]).unwrap_err();
        assert!(e.contains("refused by-the-store"), "{e}");
        let e = run(&["sh", "-c", "printf 'on %s' stderr >&2; exit 1"]).unwrap_err();
        assert!(e.contains("on stderr"), "{e}");
        let e = run(&["binky-no-such-tool"]).unwrap_err();
        assert!(e.contains("cannot run binky-no-such-tool"), "{e}");
        assert!(run(&["true"]).is_ok());
    }
}
