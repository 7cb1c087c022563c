//! What a world brings in from the main checkout stays the world's: a file named in `copy`
//! is never hard-linked, real npm, pip and uv run as a world's setup change no byte of the
//! main checkout's or another world's, a copy-on-write filesystem gives each world its own
//! files, and a write in place through a link (where only links are cheap) is named, with
//! the worlds and checkout sharing the file and the fix.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::harness::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn run(dir: &Path, program: &str, args: &[&str], vars: &[(&str, &str)]) -> String {
    let out = Command::new(program)
        .args(args)
        .envs(vars.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (./scripts/test installs it)"));
    assert!(
        out.status.success(),
        "{program} {args:?} in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// npm, offline, quiet.
fn npm(dir: &Path, args: &[&str]) {
    let mut all = args.to_vec();
    all.extend(["--offline", "--no-audit", "--no-fund", "--silent"]);
    run(dir, "npm", &all, &[]);
}

/// Writes a wheel `name-version` (a module `name` whose `VERSION` says its version, a data
/// file under a hidden name, a console script) into `dir`, as a build backend would.
fn wheel(dir: &Path, name: &str, version: &str) {
    const MAKE: &str = r#"
import base64, hashlib, os, sys, zipfile
name, version, out = sys.argv[1:4]
info = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": f"VERSION = '{version}'\ndef main():\n    print(VERSION)\n",
    f"{name}/templates/.icons/a.svg": f"<svg>{version}</svg>\n",
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    f"{info}/entry_points.txt": f"[console_scripts]\n{name}-tool = {name}:main\n",
}
record = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(text.encode())}")
record.append(f"{info}/RECORD,,")
files[f"{info}/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(os.path.join(out, f"{name}-{version}-py3-none-any.whl"), "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
"#;
    std::fs::create_dir_all(dir).unwrap();
    let d = dir.display().to_string();
    run(dir, "python3", &["-c", MAKE, name, version, &d], &[]);
}

/// `binky status NAME --json`.
fn status_of(env: &Env, world: &str) -> serde_json::Value {
    serde_json::from_str(&env.ok(&["status", world, "--json"])).unwrap()
}

/// How each brought path of `world` came (`cloned`, `linked`, `copied`, `mixed`).
fn brought_how(env: &Env, world: &str) -> Vec<(String, String)> {
    status_of(env, world)["bootstrap"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["path"].as_str().unwrap_or_default().to_owned(),
                b["how"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The files of `world` recorded as changed in place through a link.
fn shared_edits(env: &Env, world: &str) -> Vec<String> {
    status_of(env, world)["shared_edits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["file"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The issue's reproduction: an untracked `package-lock.json` (lockfileVersion 2) named in
/// `copy`, and `npm install` as setup. The lockfile is the world's own copy, so the world's
/// npm rewriting it changes neither the main checkout's (bytes, inode) nor another world's;
/// and `remove` takes both worlds without `--force` (what npm wrote is the setup's, what
/// was brought and left alone binky's).
#[test]
fn a_lockfile_named_in_copy_is_each_worlds_own_so_npm_install_in_one_changes_no_other() {
    let env = Env::new(
        r#"
[project]
name = "lock"
{range}
copy = ["node_modules", "package-lock.json"]

[services.web]
cmd = "exec python3 server.py ${self.port}"
url = true
setup = "npm install --offline --no-audit --no-fund"
"#,
    );
    let repo = env.repo.clone();
    let vendor = repo.join("vendor");
    std::fs::create_dir_all(&vendor).unwrap();
    crate::bootstrap::pack(&vendor, "demo-pkg", "1.0.0");
    std::fs::remove_dir_all(vendor.join("src-1.0.0")).unwrap();
    write(
        &repo.join("package.json"),
        "{\"name\": \"app\", \"version\": \"0.0.0\", \"dependencies\": {\"demo-pkg\": \"file:vendor/demo-pkg-1.0.0.tgz\"}}\n",
    );
    write(&repo.join(".gitignore"), "node_modules/\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "a package"]);
    npm(&repo, &["install"]);
    // The lockfile as an older npm left it (version 2, written on one line): not
    // committed, named in `copy` outright; every npm install rewrites it.
    let lock = repo.join("package-lock.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lock).unwrap()).unwrap();
    doc["lockfileVersion"] = 2.into();
    write(&lock, &format!("{doc}\n"));
    let (bytes, inode) = (
        std::fs::read(&lock).unwrap(),
        std::fs::metadata(&lock).unwrap().ino(),
    );

    let out = env.binky(&["up", "w1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let w1 = env.worktree("w1");
    let how = brought_how(&env, "w1");
    assert!(
        how.contains(&("package-lock.json".into(), "copied".into())),
        "{how:?}"
    );
    // w1's npm rewrote its own lockfile…
    assert_ne!(std::fs::read(w1.join("package-lock.json")).unwrap(), bytes);
    // …and not the main checkout's.
    assert_eq!(std::fs::read(&lock).unwrap(), bytes);
    let meta = std::fs::metadata(&lock).unwrap();
    assert_eq!((meta.ino(), meta.nlink()), (inode, 1));

    let before = snapshot(&w1);
    let out = env.binky(&["up", "w2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(snapshot(&w1), before, "w2's npm install changed w1");
    assert_eq!(std::fs::read(&lock).unwrap(), bytes);
    // Neither world refuses removal over the lockfile.
    env.ok(&["remove", "w1"]);
    env.ok(&["remove", "w2"]);
    env.assert_nothing_left(&["w1", "w2"]);
}

/// Real npm (`install` of another version, then `ci`), pip (`install --upgrade`, `uninstall`)
/// and uv (`sync` to another version) run as one world's setup against its linked
/// `node_modules` and virtualenvs: the main checkout's and another world's trees are byte
/// for byte what they were, and no linked file is reported written in place (uv links
/// packages from its cache: no false alarm).
#[test]
fn after_npm_pip_and_uv_run_as_a_worlds_setup_the_main_checkout_and_other_worlds_are_unchanged() {
    let frameworks = test_cache("BINKY_TEST_FRAMEWORKS", "frameworks", &["bin/uv"]);
    let uv = frameworks.join("bin/uv").display().to_string();
    let env = Env::new(
        r#"
[project]
name = "tools"
{range}
copy = ["web/node_modules", "backend/.venv", "api/.venv"]

[services.app]
cmd = "exec python3 server.py ${self.port}"
url = true
setup = "sh setup.sh"
"#,
    );
    let repo = env.repo.clone();
    let uv_cache = env.dir.path().join("uv-cache").display().to_string();
    let uv_vars = [("UV_CACHE_DIR", uv_cache.as_str())];
    // Packages from local files only: npm tarballs and wheels, two versions each.
    let vendor = repo.join("vendor");
    std::fs::create_dir_all(&vendor).unwrap();
    for v in ["1.0.0", "2.0.0"] {
        crate::bootstrap::pack(&vendor, "demo-pkg", v);
        std::fs::remove_dir_all(vendor.join(format!("src-{v}"))).unwrap();
    }
    let wheels = vendor.join("wheels");
    wheel(&wheels, "demo_pkg", "1.0");
    wheel(&wheels, "demo_pkg", "2.0");
    wheel(&wheels, "other_pkg", "1.0");
    write(
        &repo.join("web/package.json"),
        "{\"name\": \"web\", \"version\": \"0.0.0\", \"dependencies\": {\"demo-pkg\": \"file:../vendor/demo-pkg-1.0.0.tgz\"}}\n",
    );
    let pyproject = |version: &str| {
        format!(
            "[project]\nname = \"api\"\nversion = \"0.0.0\"\nrequires-python = \">=3.8\"\ndependencies = [\"demo_pkg=={version}\"]\n\n[tool.uv]\nfind-links = [\"../vendor/wheels\"]\nno-index = true\npackage = false\n"
        )
    };
    write(&repo.join("api/pyproject.toml"), &pyproject("1.0"));
    write(
        &repo.join("setup.sh"),
        "set -e\n\
         [ -n \"$SETUP_TOOLS\" ] || exit 0\n\
         (cd web && npm install --offline --no-audit --no-fund ../vendor/demo-pkg-2.0.0.tgz && npm ci --offline --no-audit --no-fund)\n\
         backend/.venv/bin/pip install -q --no-index --find-links vendor/wheels --upgrade demo_pkg\n\
         backend/.venv/bin/pip uninstall -q -y other_pkg\n\
         (cd api && \"$UV\" sync --offline -q)\n",
    );
    write(&repo.join(".gitignore"), "node_modules/\n.venv/\nuv.lock\n");
    // The main checkout's dependencies, installed by the real tools.
    npm(&repo.join("web"), &["install"]);
    run(
        &repo.join("api"),
        &uv,
        &["sync", "--offline", "-q"],
        &uv_vars,
    );
    run(&repo, "python3", &["-m", "venv", "backend/.venv"], &[]);
    run(
        &repo,
        "backend/.venv/bin/pip",
        &[
            "install",
            "-q",
            "--no-index",
            "--find-links",
            "vendor/wheels",
            "demo_pkg==1.0",
            "other_pkg",
        ],
        &[],
    );
    // The project moved on to demo_pkg 2.0: a world's `uv sync` upgrades its venv.
    write(&repo.join("api/pyproject.toml"), &pyproject("2.0"));
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "dependencies"]);

    let out = env.binky(&["up", "other"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let other = env.worktree("other");
    let dirs = ["web/node_modules", "backend/.venv", "api/.venv"];
    for (path, how) in brought_how(&env, "other") {
        assert!(how == "linked" || how == "mixed", "{path}: {how}");
    }
    let trees = |top: &Path| -> Vec<_> { dirs.iter().map(|d| snapshot(&top.join(d))).collect() };
    let (main_before, other_before) = (trees(&repo), trees(&other));

    let out = env.binky_env(
        &["up", "busy"],
        &[
            ("SETUP_TOOLS", "all"),
            ("UV", &uv),
            ("UV_CACHE_DIR", &uv_cache),
        ],
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        stderr(&out),
        env.ok(&["logs", "busy"])
    );
    let busy = env.worktree("busy");
    // The tools did their work in busy…
    assert_eq!(
        std::fs::read_to_string(busy.join("web/node_modules/demo-pkg/index.js")).unwrap(),
        "module.exports = '2.0.0';\n"
    );
    // `lib/python3.X/site-packages`, whatever the interpreter's version.
    let site = |top: &Path, venv: &str| {
        let lib = top.join(venv).join("lib");
        let version = std::fs::read_dir(&lib)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("python"))
            .unwrap_or_else(|| panic!("no python directory in {}", lib.display()));
        version.path().join("site-packages")
    };
    assert_eq!(
        std::fs::read_to_string(site(&busy, "backend/.venv").join("demo_pkg/__init__.py"))
            .unwrap()
            .lines()
            .next(),
        Some("VERSION = '2.0'")
    );
    assert!(!site(&busy, "backend/.venv").join("other_pkg").exists());
    assert!(site(&busy, "api/.venv")
        .join("demo_pkg-2.0.dist-info")
        .is_dir());
    assert!(!site(&busy, "api/.venv")
        .join("demo_pkg-1.0.dist-info")
        .exists());
    // …and changed no byte of the main checkout's or the other world's.
    let (main_after, other_after) = (trees(&repo), trees(&other));
    for (i, d) in dirs.iter().enumerate() {
        assert!(
            main_after[i] == main_before[i],
            "the main checkout's {d} changed"
        );
        assert!(other_after[i] == other_before[i], "other's {d} changed");
    }
    // Nothing was written through a link: nothing is reported.
    env.ok(&["down", "busy"]);
    env.ok(&["down", "other"]);
    for w in ["busy", "other"] {
        assert_eq!(shared_edits(&env, w), Vec::<String>::new(), "{w}");
    }
    env.ok(&["remove", "busy"]);
    env.ok(&["remove", "other"]);
    env.assert_nothing_left(&["busy", "other"]);
}

/// A loop-mounted XFS image with reflink (copy-on-write clones), made in a temporary
/// directory and unmounted and deleted when dropped, whatever the test did.
struct CowMount {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl CowMount {
    /// Mounted, or why not (not root, no loop device, no `mkfs.xfs`).
    fn new() -> Result<CowMount, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (image, at) = (dir.path().join("xfs.img"), dir.path().join("mnt"));
        std::fs::create_dir_all(&at).map_err(|e| e.to_string())?;
        let image_file = std::fs::File::create(&image).map_err(|e| e.to_string())?;
        // Sparse: only what the test writes takes disk.
        image_file.set_len(512 << 20).map_err(|e| e.to_string())?;
        let step = |program: &str, args: &[&std::ffi::OsStr]| -> Result<(), String> {
            let out = Command::new(program)
                .args(args)
                .output()
                .map_err(|e| format!("{program}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{program} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        step(
            "mkfs.xfs",
            &[
                "-q".as_ref(),
                "-m".as_ref(),
                "reflink=1".as_ref(),
                image.as_os_str(),
            ],
        )?;
        let mut mount = CowMount {
            dir,
            mounted: false,
        };
        step(
            "mount",
            &[
                "-o".as_ref(),
                "loop".as_ref(),
                image.as_os_str(),
                at.as_os_str(),
            ],
        )?;
        mount.mounted = true;
        Ok(mount)
    }

    /// Where it is mounted.
    fn path(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for CowMount {
    fn drop(&mut self) {
        if self.mounted {
            let at = self.path();
            let ok = Command::new("umount")
                .arg(&at)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                // Something still holds a file there: detach it now, gone once let go.
                let _ = Command::new("umount").arg("-l").arg(&at).status();
            }
        }
    }
}

/// On a filesystem that clones (XFS with reflink), a world's dependency directory and the
/// lockfile named in `copy` come over as copy-on-write clones (`cloned`, recorded), and a
/// write in place in the world (a file opened for appending) stays in the world: the main
/// checkout's bytes are unchanged and nothing is reported shared.
#[test]
fn on_a_copy_on_write_filesystem_a_worlds_files_are_cloned_and_its_writes_in_place_stay_its_own() {
    let mount = match CowMount::new() {
        Ok(m) => m,
        Err(why) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "an XFS image with reflink cannot be mounted here ({why}): the tests run as root with xfsprogs (./scripts/test installs it)"
            );
            eprintln!("skipped: an XFS image with reflink cannot be mounted here ({why}); run as root with xfsprogs installed");
            return;
        }
    };
    let env = Env::new_in(
        &mount.path(),
        r#"
[project]
name = "cow"
{range}
copy = ["node_modules", "package-lock.json"]

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
"#,
    );
    // The image is small: its free space is no reason to queue the world.
    env.ok(&["settings", "disk_reserve_gib=0"]);
    let repo = env.repo.clone();
    write(&repo.join(".gitignore"), "node_modules/\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignores"]);
    let index = repo.join("node_modules/pkg/index.js");
    write(&index, "module.exports = 1;\n");
    write(&repo.join("node_modules/.package-lock.json"), "{}\n");
    write(
        &repo.join("package-lock.json"),
        "{\"lockfileVersion\": 3}\n",
    );
    let (main_nm, main_lock) = (
        snapshot(&repo.join("node_modules")),
        std::fs::read(repo.join("package-lock.json")).unwrap(),
    );

    let out = env.binky(&["up", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let how = brought_how(&env, "w");
    assert_eq!(
        how,
        vec![
            ("node_modules".to_owned(), "cloned".to_owned()),
            ("package-lock.json".to_owned(), "cloned".to_owned()),
        ]
    );
    let wt = env.worktree("w");
    for f in ["node_modules/pkg/index.js", "package-lock.json"] {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(wt.join(f))
            .unwrap();
        file.write_all(b"// the world's own\n").unwrap();
        assert!(std::fs::read_to_string(wt.join(f))
            .unwrap()
            .ends_with("// the world's own\n"));
    }
    assert_eq!(snapshot(&repo.join("node_modules")), main_nm);
    assert_eq!(
        std::fs::read(repo.join("package-lock.json")).unwrap(),
        main_lock
    );
    env.ok(&["down", "w"]);
    assert_eq!(shared_edits(&env, "w"), Vec::<String>::new());
    // The lockfile edited in the world is the user's change now.
    let out = env.binky(&["remove", "w"]);
    assert!(
        !out.status.success() && stderr(&out).contains("package-lock.json"),
        "{}",
        stderr(&out)
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
    drop(env);
    drop(mount);
}

/// Where only a link is cheap (ext4 here), a dependency file written in place through a
/// link (`>>`) changes for every holder. It does not pass unnoticed: `down` of the world
/// it was written in, then `status`, `up` and `remove` of a world that shares it name the
/// file, the checkout and worlds holding it, who may have written it and the fix; `remove`
/// of a world that shares it but did not change it does not refuse.
#[test]
fn a_dependency_written_in_place_through_a_link_is_named_with_its_holders_and_the_fix() {
    let env = Env::new(
        r#"
[project]
name = "links"
{range}
copy = ["node_modules"]

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
"#,
    );
    let repo = env.repo.clone();
    write(&repo.join(".gitignore"), "node_modules/\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "ignores"]);
    write(
        &repo.join("node_modules/pkg/index.js"),
        "module.exports = 1;\n",
    );
    write(&repo.join("node_modules/pkg/other.js"), "untouched\n");
    env.ok(&["up", "w1"]);
    env.ok(&["up", "w2"]);
    let (w1, w2) = (env.worktree("w1"), env.worktree("w2"));
    let file = "node_modules/pkg/index.js";
    let id = |p: &Path| std::fs::metadata(p).unwrap().ino();
    if id(&w1.join(file)) != id(&repo.join(file)) {
        // Cloned or copied (a filesystem that clones, or another one): nothing is shared.
        panic!("this test needs the worktrees linked (one ext4 filesystem for repo and worktrees)");
    }
    // A debugging edit in w1, written in place.
    run(
        &w1,
        "sh",
        &[
            "-c",
            "echo 'console.log(\"debug\");' >> node_modules/pkg/index.js",
        ],
        &[],
    );
    assert!(
        std::fs::read_to_string(repo.join(file))
            .unwrap()
            .contains("debug"),
        "a link is one file"
    );
    let names_it = |text: &str| {
        text.contains("node_modules/pkg/index.js was changed in place")
            && text.contains("the main checkout and worlds w1, w2 hold that one file")
            && text.contains("written in w1, w2 or the main checkout")
            && text.contains("copy = [{ path = \"node_modules\", mode = \"copy\" }]")
            && !text.contains("other.js")
    };
    // `down` of the world it was written in says it.
    let out = env.binky(&["down", "w1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(names_it(&stderr(&out)), "{}", stderr(&out));
    // w2 shares it: its status says so once it has looked again (asked by w1's finding).
    wait_until(
        "w2's status names the file",
        Duration::from_secs(30),
        || names_it(&env.ok(&["status", "w2"])),
    );
    assert_eq!(shared_edits(&env, "w2"), vec![file.to_owned()]);
    // An `up` of w2 says it too.
    let out = env.binky(&["up", "w2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(names_it(&stderr(&out)), "{}", stderr(&out));
    // w2 never changed it: `remove` does not refuse, and says what it shared.
    let out = env.binky(&["remove", "w2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(names_it(&stderr(&out)), "{}", stderr(&out));
    let out = env.binky(&["remove", "w1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    env.assert_nothing_left(&["w1", "w2"]);
    assert!(!w2.exists());
}
