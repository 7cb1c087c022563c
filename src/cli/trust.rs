//! `binky trust [--uninstall]`: put binky's local CA in the system trust store (and say how
//! for browsers), or take it out.

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

fn run(cmd: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cmd[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {}",
            cmd.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn nss_db() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let db = PathBuf::from(home).join(".pki/nssdb");
    db.is_dir().then_some(db)
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `binky trust`.
pub fn run_trust(uninstall: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let ca = LocalCa::load_or_create(&ctx.home.ca()).map_err(|e| Failure::failed(e.to_string()))?;
    let name = format!("binky-{}", ctx.home.tag());
    let nickname = format!("binky local CA ({})", ctx.home.tag());
    let root = binky_platform::user::is_root();
    let Some(system) = store() else {
        return Err(Failure::failed(format!(
            "no system trust store found (looked for {}); add {} to your system's trust store by hand",
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
