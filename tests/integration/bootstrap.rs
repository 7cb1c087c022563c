//! A new world's worktree gets, before the commands that need them, the ignored files
//! `.worktreeinclude` lists (copies) and the dependency directories `[project] copy` names
//! (cloned, else hard-linked, else copied), from the main checkout or the newest world that
//! has them.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use crate::harness::*;

const CONFIG: &str = r#"
[project]
name = "boot"
{range}
copy = ["node_modules", "web/node_modules"]

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
setup = "cat .env certs/local.pem node_modules/pkg/index.js > seen-by-setup.txt"
"#;

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_new_worktree_gets_the_included_files_and_dependency_dirs_before_setup_linked_or_copied() {
    let env = Env::new(CONFIG);
    let repo = env.repo.clone();
    write(
        &repo.join(".gitignore"),
        "node_modules/\n.env\ncerts/\n*.log\nseen-by-setup.txt\n",
    );
    write(
        &repo.join(".worktreeinclude"),
        "# local settings\n.env\ncerts/\n",
    );
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignores"]);
    // The main checkout's ignored and untracked files.
    write(&repo.join(".env"), "SECRET=main\n");
    write(&repo.join("certs/local.pem"), "PEM\n");
    write(&repo.join("debug.log"), "not listed\n");
    write(
        &repo.join("notes.txt"),
        "untracked, not ignored: the user's\n",
    );
    let index = repo.join("node_modules/pkg/index.js");
    write(&index, "module.exports = 1;\n");
    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(repo.join("node_modules/.bin")).unwrap();
    std::os::unix::fs::symlink("../pkg/index.js", repo.join("node_modules/.bin/tool")).unwrap();

    let out = env.binky(&["up", "w1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let progress = stderr(&out);
    // Linked (cloned on a filesystem that clones): no data copied.
    assert!(
        (progress.contains("linked node_modules (1 file,")
            || progress.contains("cloned node_modules (1 file,"))
            && progress.contains(" from "),
        "{progress}"
    );
    // `.worktreeinclude`'s files are the world's own copies (a world edits its `.env`).
    assert!(progress.contains("copied .env (1 file,"), "{progress}");
    let wt = env.worktree("w1");
    // setup found them.
    assert_eq!(
        std::fs::read_to_string(wt.join("seen-by-setup.txt")).unwrap(),
        "SECRET=main\nPEM\nmodule.exports = 1;\n"
    );
    // Not listed, or the user's own: not copied.
    assert!(!wt.join("debug.log").exists());
    assert!(!wt.join("notes.txt").exists());
    // Mode, symlink and time kept.
    let copied = wt.join("node_modules/pkg/index.js");
    let (a, b) = (
        std::fs::metadata(&index).unwrap(),
        std::fs::metadata(&copied).unwrap(),
    );
    assert_eq!(b.permissions().mode() & 0o777, 0o755);
    assert_eq!(a.mtime(), b.mtime());
    assert_eq!(
        std::fs::read_link(wt.join("node_modules/.bin/tool")).unwrap(),
        std::path::PathBuf::from("../pkg/index.js")
    );
    // A package replaced in one world (a new file renamed into place, as package managers
    // write) does not change in the main checkout.
    let fresh = wt.join("node_modules/pkg/.index.js.new");
    std::fs::write(&fresh, "patched\n").unwrap();
    std::fs::rename(&fresh, &copied).unwrap();
    assert_eq!(
        std::fs::read_to_string(&index).unwrap(),
        "module.exports = 1;\n"
    );
    assert_eq!(std::fs::read_to_string(&copied).unwrap(), "patched\n");
    // `binky status` says how each path came.
    let status = env.ok(&["status", "w1"]);
    assert!(
        status.contains("node_modules") && (status.contains("linked") || status.contains("cloned")),
        "{status}"
    );

    // A dependency directory the main checkout lacks comes from the newest world that has it.
    write(&wt.join("web/node_modules/lib.js"), "from w1\n");
    let out = env.binky(&["up", "w2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "web/node_modules (1 file, 1 KB) from {}",
            wt.display()
        )),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(env.worktree("w2").join("web/node_modules/lib.js")).unwrap(),
        "from w1\n"
    );
    // The copies are ignored files: not uncommitted changes.
    env.ok(&["remove", "w1"]);
    env.ok(&["remove", "w2"]);
    env.assert_nothing_left(&["w1", "w2"]);
}

#[test]
fn a_copied_virtualenv_is_the_new_worlds_own_not_a_pointer_to_the_one_it_came_from() {
    let env = Env::new(&CONFIG.replace(
        "copy = [\"node_modules\", \"web/node_modules\"]",
        "copy = [\"backend/.venv\"]",
    ).replace("setup = \"cat .env certs/local.pem node_modules/pkg/index.js > seen-by-setup.txt\"\n", ""));
    let repo = env.repo.clone();
    write(&repo.join(".gitignore"), ".venv/\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignores"]);
    // A real virtualenv in the main checkout, with a script and an editable install.
    let venv = repo.join("backend/.venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let script = venv.join("bin/tool");
    write(
        &script,
        &format!(
            "#!{}/bin/python\nimport sys\nprint(sys.prefix)\n",
            venv.display()
        ),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages");
    write(
        &site.join("__editable__.app.pth"),
        &format!("{}/backend/src\n", repo.display()),
    );

    let said = env.ok(&["up", "w1"]);
    let wt = env.worktree("w1");
    let copied = wt.join("backend/.venv");
    assert!(
        copied.join("bin/tool").is_file(),
        "{said}\n{}",
        env.ok(&["events", "w1"])
    );
    // Its script runs the world's own interpreter, which knows its own prefix.
    let out = std::process::Command::new(copied.join("bin/tool"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::path::Path::new(String::from_utf8_lossy(&out.stdout).trim())
            .canonicalize()
            .unwrap(),
        copied.canonicalize().unwrap()
    );
    let activate = std::fs::read_to_string(copied.join("bin/activate")).unwrap();
    assert!(
        activate.contains(&copied.display().to_string()),
        "{activate}"
    );
    assert!(
        !activate.contains(&venv.display().to_string()),
        "{activate}"
    );
    let site_copy = wt.join(site.strip_prefix(&repo).unwrap());
    assert_eq!(
        std::fs::read_to_string(site_copy.join("__editable__.app.pth")).unwrap(),
        format!("{}/backend/src\n", wt.display())
    );
    // The main checkout's is untouched.
    assert!(std::fs::read_to_string(&script)
        .unwrap()
        .contains(&venv.display().to_string()));
    env.ok(&["remove", "w1"]);
    env.assert_nothing_left(&["w1"]);
}

#[test]
fn copy_paths_are_relative_to_the_directory_of_binky_toml() {
    let env = Env::new(CONFIG);
    let app = env.repo.join("apps/shop");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::rename(env.repo.join("binky.toml"), app.join("binky.toml")).unwrap();
    std::fs::copy(env.repo.join("server.py"), app.join("server.py")).unwrap();
    // The setup reads what the repository top's .worktreeinclude brings; not needed here.
    let text = std::fs::read_to_string(app.join("binky.toml"))
        .unwrap()
        .replace(
            "setup = \"cat .env certs/local.pem node_modules/pkg/index.js > seen-by-setup.txt\"\n",
            "",
        );
    std::fs::write(app.join("binky.toml"), text).unwrap();
    write(&env.repo.join(".gitignore"), "node_modules/\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "the app in a subdirectory"]);
    write(&app.join("node_modules/pkg/index.js"), "in the app\n");
    write(
        &env.repo.join("node_modules/other/index.js"),
        "at the top: not named\n",
    );
    let out = env.binky_in(&app, &["up", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let wt = env.worktree("w");
    assert_eq!(
        std::fs::read_to_string(wt.join("apps/shop/node_modules/pkg/index.js")).unwrap(),
        "in the app\n"
    );
    assert!(!wt.join("node_modules").exists());
    let out = env.binky_in(&app, &["remove", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    env.assert_nothing_left(&["w"]);
}

/// A `copy` path binky will not take — one git does not ignore (`.gitignore` names `/venv/`,
/// the project uses `.venv`), one git tracks — is a warning of `binky check` and a line of
/// `binky up` naming why and the fix; never skipped without a word.
#[test]
fn a_copy_path_binky_will_not_take_is_said_by_check_and_up_with_the_fix() {
    let env = Env::new(
        r#"
[project]
name = "refused"
{range}
copy = [".venv", "tools.txt", "node_modules", "package-lock.json"]

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
"#,
    );
    let repo = env.repo.clone();
    write(&repo.join(".gitignore"), "/venv/\nnode_modules/\n");
    write(&repo.join("tools.txt"), "tracked\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignores"]);
    write(&repo.join(".venv/bin/python"), "#!/bin/sh\n");
    write(&repo.join("node_modules/pkg/index.js"), "1;\n");
    // A lockfile the repository does not commit nor ignore: named outright, it is copied.
    write(
        &repo.join("package-lock.json"),
        "{\"lockfileVersion\": 3}\n",
    );
    let out = env.binky(&["check"]);
    assert!(out.status.success(), "warnings only: {}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("`.venv/` is not ignored by git")
            && text.contains("add `/.venv/` to .gitignore"),
        "{text}"
    );
    assert!(
        text.contains("`tools.txt` is tracked by git")
            && text.contains("remove \"tools.txt\" from [project] copy"),
        "{text}"
    );
    assert!(
        !text.contains("node_modules"),
        "an ignored path is fine: {text}"
    );
    let out = env.binky(&["up", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("project.copy: .venv not copied")
            && err.contains("fix: add `/.venv/` to .gitignore"),
        "{err}"
    );
    assert!(!env.worktree("w").join(".venv").exists());
    assert!(
        !text.contains("package-lock.json"),
        "a file named outright is copied: {text}"
    );
    assert_eq!(
        std::fs::read_to_string(env.worktree("w").join("package-lock.json")).unwrap(),
        "{\"lockfileVersion\": 3}\n"
    );
    assert!(env
        .worktree("w")
        .join("node_modules/pkg/index.js")
        .is_file());
    // Ignored, it is copied into the next world, and nothing is said.
    write(&repo.join(".gitignore"), "/venv/\n.venv/\nnode_modules/\n");
    env.git(&["commit", "-qam", "ignore .venv"]);
    let out = env.binky(&["check"]);
    assert!(!stdout(&out).contains(".venv"), "{}", stdout(&out));
    let out = env.binky(&["up", "v"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains(".venv not copied"),
        "{}",
        stderr(&out)
    );
    assert!(env.worktree("v").join(".venv/bin/python").is_file());
    // The lockfile binky brought, as it came, is not an uncommitted change of the user's.
    env.ok(&["remove", "w"]);
    env.ok(&["remove", "v"]);
    env.assert_nothing_left(&["w", "v"]);
}

/// A package tarball `name@version` whose index.js says its version, made with `npm pack`.
pub(crate) fn pack(dir: &std::path::Path, name: &str, version: &str) -> std::path::PathBuf {
    let src = dir.join(format!("src-{version}"));
    write(
        &src.join("package.json"),
        &format!("{{\"name\": \"{name}\", \"version\": \"{version}\", \"main\": \"index.js\"}}\n"),
    );
    write(
        &src.join("index.js"),
        &format!("module.exports = '{version}';\n"),
    );
    let out = std::process::Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(dir)
        .current_dir(&src)
        .output()
        .expect("npm (./scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(format!("{name}-{version}.tgz"))
}

/// Linking shares files, never changes: after a world's venv was made its own (its scripts
/// rewritten) and `npm install` changed a package in the world, the main checkout's venv
/// and node_modules are byte for byte what they were.
#[test]
fn the_main_checkouts_venv_and_node_modules_are_unchanged_by_what_a_linked_world_does() {
    let env = Env::new(&CONFIG.replace(
        "copy = [\"node_modules\", \"web/node_modules\"]",
        "copy = [\"node_modules\", \".venv\"]",
    ).replace("setup = \"cat .env certs/local.pem node_modules/pkg/index.js > seen-by-setup.txt\"\n", ""));
    let repo = env.repo.clone();
    let vendor = repo.join("vendor");
    std::fs::create_dir_all(&vendor).unwrap();
    let v1 = pack(&vendor, "demo-pkg", "1.0.0");
    let v2 = pack(&vendor, "demo-pkg", "2.0.0");
    for v in ["1.0.0", "2.0.0"] {
        std::fs::remove_dir_all(vendor.join(format!("src-{v}"))).unwrap();
    }
    write(&repo.join(".gitignore"), "node_modules/\n.venv/\n");
    write(
        &repo.join("package.json"),
        "{\"name\": \"app\", \"version\": \"0.0.0\", \"dependencies\": {\"demo-pkg\": \"file:vendor/demo-pkg-1.0.0.tgz\"}}\n",
    );
    let npm = |dir: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new("npm")
            .args(args)
            .args(["--offline", "--no-audit", "--no-fund", "--silent"])
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "npm {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    npm(&repo, &["install"]);
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "a package"]);
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(repo.join(".venv"))
        .status()
        .unwrap();
    assert!(made.success());
    let (nm, venv) = (
        snapshot(&repo.join("node_modules")),
        snapshot(&repo.join(".venv")),
    );
    assert!(
        nm.keys().any(|k| k.ends_with("demo-pkg/index.js")),
        "{:?}",
        nm.keys()
    );
    assert!(venv.contains_key("bin/activate"), "{:?}", venv.keys());

    let said = env.ok(&["up", "w"]);
    let wt = env.worktree("w");
    let events = env.ok(&["events", "w"]);
    assert!(
        events.contains("linked node_modules") || events.contains("cloned node_modules"),
        "{said}\n{events}"
    );
    // The world's venv is its own (its activate names the world), and a changed package.
    let activate = std::fs::read_to_string(wt.join(".venv/bin/activate")).unwrap();
    assert!(
        activate.contains(&wt.join(".venv").display().to_string()),
        "{activate}"
    );
    npm(&wt, &["install", &v2.display().to_string()]);
    assert_eq!(
        std::fs::read_to_string(wt.join("node_modules/demo-pkg/index.js")).unwrap(),
        "module.exports = '2.0.0';\n"
    );
    // The main checkout's: byte for byte what it was.
    assert_eq!(
        snapshot(&repo.join("node_modules")),
        nm,
        "node_modules changed"
    );
    assert_eq!(snapshot(&repo.join(".venv")), venv, "the venv changed");
    assert!(v1.is_file());
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// Linking needs one filesystem: a worktree on another (tmpfs here) gets its paths copied,
/// and says so once; `mode = "copy"` copies on the same filesystem too.
#[test]
fn across_filesystems_a_linked_path_is_copied_and_says_so_and_mode_copy_always_copies() {
    use std::os::unix::fs::MetadataExt;
    let env = Env::new(&CONFIG.replace(
        "copy = [\"node_modules\", \"web/node_modules\"]",
        "copy = [\"node_modules\", { path = \"vendor\", mode = \"copy\" }]",
    ).replace("setup = \"cat .env certs/local.pem node_modules/pkg/index.js > seen-by-setup.txt\"\n", ""));
    let repo = env.repo.clone();
    write(&repo.join(".gitignore"), "node_modules/\nvendor/\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignores"]);
    write(&repo.join("node_modules/pkg/index.js"), "1;\n");
    write(&repo.join("vendor/lib/a.rb"), "a\n");
    // On the repository's filesystem: node_modules linked, vendor copied.
    let out = env.binky(&["up", "same"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let wt = env.worktree("same");
    let ino = |p: &std::path::Path| std::fs::metadata(p).unwrap().ino();
    assert_eq!(
        ino(&wt.join("node_modules/pkg/index.js")),
        ino(&repo.join("node_modules/pkg/index.js"))
    );
    assert_ne!(
        ino(&wt.join("vendor/lib/a.rb")),
        ino(&repo.join("vendor/lib/a.rb"))
    );
    assert!(
        stderr(&out).contains("copied vendor (1 file"),
        "{}",
        stderr(&out)
    );
    // Worktrees on another filesystem.
    let other = tempfile::tempdir_in("/dev/shm").expect("/dev/shm for worktrees on tmpfs");
    assert_ne!(
        std::fs::metadata(other.path()).unwrap().dev(),
        std::fs::metadata(&repo).unwrap().dev(),
        "this test needs /dev/shm on another filesystem than the temporary directory"
    );
    let out = env.binky_env(
        &["up", "far"],
        &[("BINKY_WORKTREE_ROOT", &other.path().display().to_string())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("copied node_modules (1 file")
            && said.contains("the worktree is on another filesystem, where files cannot be linked"),
        "{said}"
    );
    let status = env.ok(&["status", "far"]);
    assert!(
        status.contains("node_modules") && status.contains("copied"),
        "{status}"
    );
    // doctor sums up how the worlds' paths came, and names the fix for the copied ones.
    let doctor = stdout(&env.binky(&["doctor"]));
    assert!(
        doctor.contains("worktree paths")
            && doctor.contains("far:node_modules")
            && doctor.contains("put worktrees on the repository's filesystem"),
        "{doctor}"
    );
    env.ok(&["remove", "same"]);
    env.ok(&["remove", "far"]);
    env.assert_nothing_left(&["same", "far"]);
}

/// A world made again under a removed one's name (the store may give it the removed one's
/// id) gets its paths again.
#[test]
fn a_world_made_again_under_a_removed_ones_name_gets_its_paths_again() {
    let env = Env::new(&CONFIG.replace(
        "setup = \"cat .env certs/local.pem node_modules/pkg/index.js > seen-by-setup.txt\"\n",
        "",
    ));
    write(&env.repo.join(".gitignore"), "node_modules/\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignores"]);
    write(&env.repo.join("node_modules/pkg/index.js"), "1;\n");
    for round in 0..2 {
        env.ok(&["up", "w"]);
        assert!(
            env.worktree("w")
                .join("node_modules/pkg/index.js")
                .is_file(),
            "round {round}: {}",
            env.ok(&["events", "w"])
        );
        env.ok(&["remove", "w"]);
    }
    env.assert_nothing_left(&["w"]);
}

/// pnpm keeps nearly every package under `node_modules/.pnpm/<name>@<version>/node_modules/
/// <name>/`, with `node_modules/<name>` a symlink into it: that store is linked like any
/// package (same inode, symlinks kept), while a hidden cache beside it and pnpm's own
/// bookkeeping (`.modules.yaml`, `.pnpm/lock.yaml`) are the world's own copies.
#[test]
fn pnpms_package_store_is_linked_like_packages_and_caches_beside_it_are_copied() {
    use std::os::unix::fs::MetadataExt;
    let env = Env::new(&CONFIG.replace(
        "setup = \"cat .env certs/local.pem node_modules/pkg/index.js > seen-by-setup.txt\"\n",
        "setup = \"cat node_modules/left-pad/index.js > seen-by-setup.txt\"\n",
    ));
    let repo = env.repo.clone();
    write(
        &repo.join(".gitignore"),
        "node_modules/\nseen-by-setup.txt\n",
    );
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignores"]);
    let nm = repo.join("node_modules");
    let pkg = nm.join(".pnpm/left-pad@1.3.0/node_modules/left-pad");
    write(&pkg.join("index.js"), "module.exports = 'pad';\n");
    write(&pkg.join("package.json"), "{\"name\": \"left-pad\"}\n");
    write(&pkg.join("lib/util.js"), "exports.u = 1;\n");
    write(&nm.join(".pnpm/lock.yaml"), "lockfileVersion: '9.0'\n");
    write(&nm.join(".modules.yaml"), "layoutVersion: 5\n");
    write(&nm.join(".cache/babel/entry.json"), "{}\n");
    std::os::unix::fs::symlink(
        ".pnpm/left-pad@1.3.0/node_modules/left-pad",
        nm.join("left-pad"),
    )
    .unwrap();
    std::fs::create_dir_all(nm.join(".pnpm/node_modules")).unwrap();
    std::os::unix::fs::symlink(
        "../left-pad@1.3.0/node_modules/left-pad",
        nm.join(".pnpm/node_modules/left-pad"),
    )
    .unwrap();

    let out = env.binky(&["up", "p"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let wt = env.worktree("p");
    // The setup read a package through the symlink.
    assert_eq!(
        std::fs::read_to_string(wt.join("seen-by-setup.txt")).unwrap(),
        "module.exports = 'pad';\n"
    );
    let id = |p: &std::path::Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.dev(), m.ino())
    };
    let rel = "node_modules/.pnpm/left-pad@1.3.0/node_modules/left-pad";
    for f in ["index.js", "package.json", "lib/util.js"] {
        assert_eq!(
            id(&wt.join(rel).join(f)),
            id(&repo.join(rel).join(f)),
            "{f} of the store is not linked"
        );
    }
    for (link, to) in [
        (
            "node_modules/left-pad",
            ".pnpm/left-pad@1.3.0/node_modules/left-pad",
        ),
        (
            "node_modules/.pnpm/node_modules/left-pad",
            "../left-pad@1.3.0/node_modules/left-pad",
        ),
    ] {
        assert_eq!(
            std::fs::read_link(wt.join(link)).unwrap(),
            std::path::PathBuf::from(to),
            "{link}"
        );
    }
    // Caches and bookkeeping: the world's own.
    for f in [
        "node_modules/.cache/babel/entry.json",
        "node_modules/.modules.yaml",
        "node_modules/.pnpm/lock.yaml",
    ] {
        assert_ne!(id(&wt.join(f)), id(&repo.join(f)), "{f} is linked");
        assert_eq!(
            std::fs::read(wt.join(f)).unwrap(),
            std::fs::read(repo.join(f)).unwrap(),
            "{f}"
        );
    }
    // The 3 files copied of 6 are said.
    assert!(
        stderr(&out).contains("linked node_modules (6 files,") && stderr(&out).contains("3 copied"),
        "{}",
        stderr(&out)
    );
    env.ok(&["remove", "p"]);
    env.assert_nothing_left(&["p"]);
}

/// A literal file name in `copy` is taken even when git neither tracks nor ignores it (a
/// lockfile the repository does not commit); a glob takes only what git ignores, so an
/// untracked file that is not ignored — someone's work — is never brought by a pattern.
#[test]
fn a_glob_in_copy_skips_an_untracked_unignored_file_a_literal_name_takes() {
    let env = Env::new(
        r#"
[project]
name = "globs"
{range}
copy = ["package-lock.json", "*.lock", "conf/*.local"]

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
"#,
    );
    let repo = env.repo.clone();
    write(&repo.join(".gitignore"), "cache.lock\nconf/*.local\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignores"]);
    // Untracked, not ignored: named outright, or matched by a glob only.
    write(
        &repo.join("package-lock.json"),
        "{\"lockfileVersion\": 3}\n",
    );
    write(&repo.join("yarn.lock"), "# someone's work\n");
    write(&repo.join("conf/mine.local.txt"), "not matched\n");
    // Ignored and matched by a glob.
    write(&repo.join("cache.lock"), "ignored\n");
    write(&repo.join("conf/db.local"), "ignored too\n");
    let out = env.binky(&["up", "g"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let wt = env.worktree("g");
    assert_eq!(
        std::fs::read_to_string(wt.join("package-lock.json")).unwrap(),
        "{\"lockfileVersion\": 3}\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("cache.lock")).unwrap(),
        "ignored\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("conf/db.local")).unwrap(),
        "ignored too\n"
    );
    assert!(
        !wt.join("yarn.lock").exists(),
        "a glob brought an untracked file git does not ignore"
    );
    assert!(!wt.join("conf/mine.local.txt").exists());
    // What was brought, as it came, is not an uncommitted change of the user's.
    env.ok(&["remove", "g"]);
    env.assert_nothing_left(&["g"]);
}
