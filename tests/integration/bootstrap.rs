//! A new world's worktree gets, before any `setup`, the ignored files `.worktreeinclude`
//! lists and the dependency directories `[project] copy` names: real copies (never links),
//! from the main checkout or the newest world that has them.

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
fn a_new_worktree_gets_the_included_files_and_dependency_dirs_before_setup_as_real_copies() {
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
    assert!(
        progress.contains("copied node_modules (1 file,") && progress.contains(" from "),
        "{progress}"
    );
    let wt = env.worktree("w1");
    // setup found them.
    assert_eq!(
        std::fs::read_to_string(wt.join("seen-by-setup.txt")).unwrap(),
        "SECRET=main\nPEM\nmodule.exports = 1;\n"
    );
    // Not listed, or the user's own: not copied.
    assert!(!wt.join("debug.log").exists());
    assert!(!wt.join("notes.txt").exists());
    // Mode, symlink and time kept; a copy, not a link.
    let copied = wt.join("node_modules/pkg/index.js");
    let (a, b) = (
        std::fs::metadata(&index).unwrap(),
        std::fs::metadata(&copied).unwrap(),
    );
    assert_eq!(b.permissions().mode() & 0o777, 0o755);
    assert_eq!(a.mtime(), b.mtime());
    assert_ne!(a.ino(), b.ino());
    assert_eq!(
        std::fs::read_link(wt.join("node_modules/.bin/tool")).unwrap(),
        std::path::PathBuf::from("../pkg/index.js")
    );
    // A package patched in one world does not change in the main checkout.
    std::fs::write(&copied, "patched\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(&index).unwrap(),
        "module.exports = 1;\n"
    );

    // A dependency directory the main checkout lacks comes from the newest world that has it.
    write(&wt.join("web/node_modules/lib.js"), "from w1\n");
    let out = env.binky(&["up", "w2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "copied web/node_modules (1 file, 1 KB) from {}",
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
copy = [".venv", "tools.txt", "node_modules"]

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
    env.ok(&["remove", "w", "--force"]);
    env.ok(&["remove", "v", "--force"]);
    env.assert_nothing_left(&["w", "v"]);
}
