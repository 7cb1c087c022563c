//! External adapters: the example `binky-adapter-filestore` through the `Adapter` trait and
//! through a whole world, and adapters that hang, fail, or answer nonsense.

use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use binky::adapters::external::External;
use binky::adapters::{Adapter, AdapterConfig, AdapterError, Registry, Slice};

use crate::harness::*;

/// `examples/adapters`, where the filestore adapter lives.
fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/adapters")
}

/// This test's PATH with `examples/adapters` first.
fn path_with_examples() -> String {
    let rest = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(examples()).chain(std::env::split_paths(&rest));
    std::env::join_paths(dirs).unwrap().into_string().unwrap()
}

fn filestore() -> External {
    External::at("filestore", examples().join("binky-adapter-filestore"))
}

/// The filestore's config with its root in `root`.
fn rooted(root: &Path) -> AdapterConfig {
    AdapterConfig {
        admin_url: None,
        options: BTreeMap::from([("root".to_owned(), root.display().to_string())]),
        buckets: Vec::new(),
        ..AdapterConfig::default()
    }
}

fn slice(name: &str) -> Slice {
    Slice {
        name: name.to_owned(),
        secret: "s3cret".to_owned(),
    }
}

fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// A tiny `sh` adapter named `name` in `dir`, running `body` for every verb.
fn script(dir: &Path, name: &str, body: &str) -> External {
    let path = dir.join(format!("binky-adapter-{name}"));
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    External::at(name, path)
}

/// The error's text, insisting it is an `External` one.
fn external_error(e: AdapterError) -> String {
    assert!(
        matches!(e, AdapterError::External { .. }),
        "not an External error: {e:?}"
    );
    e.to_string()
}

#[test]
fn filestore_slice_is_a_directory_from_provision_to_teardown() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, cfg, s) = (filestore(), rooted(tmp.path()), slice("bk_acme_w_files"));
    let dir = tmp.path().join("bk_acme_w_files");
    block(async {
        a.provision(&s, &cfg).await.unwrap();
        assert!(dir.is_dir(), "provision made no directory");

        let addr = a.resolve(&s, &cfg).await.unwrap();
        assert_eq!(addr.url, format!("file://{}", dir.display()));
        let path = addr.url.strip_prefix("file://").unwrap();
        assert!(Path::new(path).is_dir(), "{} is not a directory", addr.url);
        // An extra field of the answer is a token: `${files.path}`.
        assert_eq!(
            addr.tokens.get("path").map(String::as_str),
            Some(dir.to_str().unwrap())
        );

        a.teardown(&s, &cfg).await.unwrap();
        assert!(!dir.exists(), "teardown left {}", dir.display());
        assert!(a.list(&cfg).await.unwrap().is_empty());
    });
}

#[test]
fn filestore_provision_and_teardown_can_repeat() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, cfg, s) = (filestore(), rooted(tmp.path()), slice("bk_acme_w_files"));
    let dir = tmp.path().join("bk_acme_w_files");
    block(async {
        a.provision(&s, &cfg).await.unwrap();
        std::fs::write(dir.join("kept.txt"), "data").unwrap();
        a.provision(&s, &cfg).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("kept.txt")).unwrap(),
            "data",
            "a second provision lost the slice's data"
        );
        a.teardown(&s, &cfg).await.unwrap();
        a.teardown(&s, &cfg).await.unwrap();
        assert!(!dir.exists());
    });
}

#[test]
fn filestore_can_clone_and_the_clone_has_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, cfg) = (filestore(), rooted(tmp.path()));
    let (golden, copy) = (slice("bk_acme_golden"), slice("bk_acme_w_files"));
    block(async {
        assert!(a.capabilities(&cfg).await.unwrap().clone);
        a.provision(&golden, &cfg).await.unwrap();
        let src = tmp.path().join("bk_acme_golden");
        std::fs::create_dir(src.join("sub")).unwrap();
        std::fs::write(src.join("sub/seed.txt"), "seeded").unwrap();

        a.clone_slice(&golden, &copy, &cfg).await.unwrap();
        let dest = tmp.path().join("bk_acme_w_files");
        assert_eq!(
            std::fs::read_to_string(dest.join("sub/seed.txt")).unwrap(),
            "seeded"
        );
        // The copy is its own: writing to it leaves the golden slice alone.
        std::fs::write(dest.join("sub/seed.txt"), "changed").unwrap();
        assert_eq!(
            std::fs::read_to_string(src.join("sub/seed.txt")).unwrap(),
            "seeded"
        );
        // Cloning over an existing slice is refused with the adapter's words.
        let err = external_error(a.clone_slice(&golden, &copy, &cfg).await.unwrap_err());
        assert!(err.contains("already exists"), "{err}");
    });
}

#[test]
fn the_request_has_binky_012s_shape_plus_the_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let seen = tmp.path().join("seen");
    std::fs::create_dir(&seen).unwrap();
    let a = script(
        tmp.path(),
        "echo",
        &format!(
            "cat > '{}/'\"$1\".json\nif [ \"$1\" = resolve ]; then echo '{{\"ok\": true, \"address\": \"x://y\"}}'; else echo '{{\"ok\": true}}'; fi",
            seen.display()
        ),
    );
    let cfg = AdapterConfig {
        admin_url: Some("x://admin".into()),
        options: BTreeMap::from([
            ("root".to_owned(), "/r".to_owned()),
            ("admin_url".to_owned(), "shadowed".to_owned()),
        ]),
        buckets: vec!["b1".into()],
        ..AdapterConfig::default()
    };
    block(async {
        let s = slice("bk_p_w_svc");
        a.provision(&s, &cfg).await.unwrap();
        a.resolve(&s, &cfg).await.unwrap();
        a.capabilities(&cfg).await.unwrap();
        a.clone_slice(&slice("bk_src"), &s, &cfg).await.unwrap();
    });
    let read = |verb: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(seen.join(format!("{verb}.json"))).unwrap())
            .unwrap()
    };
    let config = serde_json::json!({"root": "/r", "admin_url": "x://admin", "buckets": ["b1"]});
    assert_eq!(
        read("provision"),
        serde_json::json!({"slice": "bk_p_w_svc", "secret": "s3cret", "config": config})
    );
    assert_eq!(read("resolve")["slice"], "bk_p_w_svc");
    assert_eq!(
        read("capabilities"),
        serde_json::json!({ "config": config })
    );
    assert_eq!(
        read("clone"),
        serde_json::json!({"source": "bk_src", "dest": "bk_p_w_svc", "secret": "s3cret", "config": config})
    );
}

#[test]
fn a_hanging_adapter_times_out_and_its_whole_group_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let pids = tmp.path().join("pids");
    let a = script(
        tmp.path(),
        "hang",
        &format!("sleep 1000 &\necho $$ $! > '{}'\nwait", pids.display()),
    )
    .with_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err = block(a.provision(&slice("bk_x"), &AdapterConfig::default())).unwrap_err();
    let took = started.elapsed();
    let err = external_error(err);
    assert!(err.contains("did not answer within 500 ms"), "{err}");
    assert!(err.contains("binky-adapter-hang provision"), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let text = std::fs::read_to_string(&pids).unwrap();
    let pids: Vec<u32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{text}");
    wait_until(
        "the adapter's sh and its sleep are gone",
        Duration::from_secs(5),
        || pids.iter().all(|p| !alive(*p)),
    );
}

#[test]
fn a_failing_adapter_shows_its_exit_status_and_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let a = script(
        tmp.path(),
        "fail",
        "echo 'starting' \necho 'cannot create bucket: quota exceeded' >&2\nexit 3",
    );
    let err =
        external_error(block(a.provision(&slice("bk_x"), &AdapterConfig::default())).unwrap_err());
    assert!(err.contains("exit 3"), "{err}");
    assert!(
        err.contains("cannot create bucket: quota exceeded"),
        "{err}"
    );
    assert!(err.starts_with("binky-adapter-fail provision:"), "{err}");
}

#[test]
fn garbage_on_stdout_is_reported_as_not_json_and_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let a = script(tmp.path(), "garbage", "echo 'Provisioning bk_x... done!'");
    let err =
        external_error(block(a.provision(&slice("bk_x"), &AdapterConfig::default())).unwrap_err());
    assert!(err.contains("not JSON"), "{err}");
    assert!(err.contains("Provisioning bk_x... done!"), "{err}");

    let silent = script(tmp.path(), "silent", "exit 0");
    let err = external_error(
        block(silent.teardown(&slice("bk_x"), &AdapterConfig::default())).unwrap_err(),
    );
    assert!(err.contains("answered nothing"), "{err}");

    let list = script(tmp.path(), "list", "echo '[1, 2]'");
    let err = external_error(
        block(list.provision(&slice("bk_x"), &AdapterConfig::default())).unwrap_err(),
    );
    assert!(err.contains("not an object"), "{err}");
}

#[test]
fn an_ok_false_answer_carries_the_adapters_error() {
    let tmp = tempfile::tempdir().unwrap();
    let a = script(
        tmp.path(),
        "boom",
        r#"echo '{"ok": false, "error": "boom"}'"#,
    );
    let err = block(a.provision(&slice("bk_x"), &AdapterConfig::default())).unwrap_err();
    assert!(!err.transient(), "an adapter's own failure is not retried");
    assert_eq!(external_error(err), "binky-adapter-boom provision: boom");
}

#[test]
fn resolve_without_an_address_says_what_resolve_must_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let a = script(tmp.path(), "noaddr", r#"echo '{"ok": true}'"#);
    let err =
        external_error(block(a.resolve(&slice("bk_x"), &AdapterConfig::default())).unwrap_err());
    assert!(err.contains("no \"address\""), "{err}");
    assert!(err.contains("resolve must answer"), "{err}");
}

#[test]
fn an_adapter_that_never_reads_stdin_still_answers() {
    // binky 0.1.2's SDK answers `capabilities` without reading the request.
    let tmp = tempfile::tempdir().unwrap();
    let a = script(
        tmp.path(),
        "deaf",
        r#"echo '{"ok": true, "capabilities": {"clone": false}}'"#,
    );
    let caps = block(a.capabilities(&AdapterConfig::default())).unwrap();
    assert!(!caps.clone);
}

#[test]
fn a_background_process_holding_stdout_does_not_hold_the_call() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("bg");
    let a = script(
        tmp.path(),
        "bg",
        &format!(
            "sleep 1000 &\necho $! > '{}'\necho '{{\"ok\": true}}'",
            pid_file.display()
        ),
    );
    let started = Instant::now();
    let res = block(a.provision(&slice("bk_x"), &AdapterConfig::default()));
    let took = started.elapsed();
    let bg: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    signal(bg, 9);
    res.unwrap();
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_missing_adapter_is_not_found_and_names_the_executable() {
    let err = match Registry::default().get("nosuch") {
        Ok(_) => panic!("found an adapter `nosuch`"),
        Err(e) => e,
    };
    assert!(matches!(err, AdapterError::NotFound { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("binky-adapter-nosuch"), "{msg}");
    assert!(msg.contains("postgres"), "{msg}");

    // One that disappears after it was found fails its call, naming the path.
    let tmp = tempfile::tempdir().unwrap();
    let gone = tmp.path().join("binky-adapter-gone");
    let err = external_error(
        block(External::at("gone", &gone).provision(&slice("bk_x"), &AdapterConfig::default()))
            .unwrap_err(),
    );
    assert!(err.contains(&gone.display().to_string()), "{err}");
}

#[test]
fn find_takes_only_executable_files_with_safe_names_from_path() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    // Not executable in `a`, executable in `b`: `b`'s is the one.
    std::fs::write(a.join("binky-adapter-x"), "#!/bin/sh\n").unwrap();
    script(&b, "x", "true");
    std::fs::create_dir(a.join("binky-adapter-dir")).unwrap();
    let path = std::env::join_paths([&a, &b]).unwrap();
    let found = External::find_in("x", &path).expect("binky-adapter-x in b");
    assert_eq!(found.path(), b.join("binky-adapter-x"));
    assert!(External::find_in("dir", &path).is_none());
    assert!(External::find_in("../a/binky-adapter-x", &path).is_none());
    let filestore = std::env::join_paths([examples()]).unwrap();
    assert!(External::find_in("filestore", &filestore).is_some());
}

#[test]
fn a_world_gets_a_filestore_directory_and_remove_deletes_it() {
    let files = tempfile::tempdir().unwrap();
    let root = files.path().join("store");
    let env = Env::new(&format!(
        r#"
[project]
name = "xa"
{{range}}

[services.files]
adapter = "filestore"
options = {{ root = "{root}" }}

[services.app]
cmd = "{SERVE}"
url = "app"
depends_on = ["files"]
env = {{ FILES = "${{files.url}}", FILES_DIR = "${{files.path}}" }}
"#,
        root = root.display()
    ));
    // The daemon looks adapters up on the PATH it was started with: every call carries it.
    let path = std::env::join_paths(std::iter::once(examples()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let path = path.to_str().unwrap();
    let run = |args: &[&str]| -> String {
        let out = env.binky_env(args, &[("PATH", path)]);
        assert!(
            out.status.success(),
            "binky {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            out.status.code(),
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    };

    run(&["up", "w"]);
    let dir = root.join(env.slice_name("xa", "w", "files"));
    assert!(dir.is_dir(), "{} was not made", dir.display());
    let vars: serde_json::Value = serde_json::from_str(&run(&["env", "w", "--json"])).unwrap();
    let port: u16 = vars["env"]["APP_PORT"].as_str().unwrap().parse().unwrap();
    let seen = served_env(port);
    assert_eq!(seen["FILES"], format!("file://{}", dir.display()));
    assert_eq!(seen["FILES_DIR"], dir.display().to_string());

    run(&["remove", "w"]);
    assert!(!dir.exists(), "remove left {}", dir.display());
    env.assert_nothing_left(&["w"]);
}

/// A repository whose only service is a filestore slice under `root`.
fn files_only(project: &str, root: &Path) -> Env {
    Env::new(&format!(
        r#"
[project]
name = "{project}"
{{range}}

[services.files]
adapter = "filestore"
options = {{ root = "{root}" }}
"#,
        root = root.display()
    ))
}

// Regression tests for two bugs the end-to-end test found (fixed in src/slices.rs and src/cli/wait.rs).

#[test]
fn an_adapter_on_the_path_of_binky_up_is_found_by_a_daemon_started_without_it() {
    let files = tempfile::tempdir().unwrap();
    let root = files.path().join("store");
    let env = files_only("xb", &root);
    // The daemon starts from a command whose PATH lacks the adapter.
    env.ok(&["daemon", "start"]);
    let path = path_with_examples();
    let out = env.binky_env(&["up", "w"], &[("PATH", &path)]);
    assert!(
        out.status.success(),
        "binky up found the adapter, its daemon did not:\n{}",
        stderr(&out)
    );
    let dir = root.join(env.slice_name("xb", "w", "files"));
    assert!(dir.is_dir());
    let out = env.binky_env(&["remove", "w"], &[("PATH", &path)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!dir.exists());
}

#[test]
fn up_returns_only_once_the_slice_exists() {
    let files = tempfile::tempdir().unwrap();
    let root = files.path().join("store");
    let env = files_only("xc", &root);
    let path = path_with_examples();
    for _ in 0..5 {
        let out = env.binky_env(&["up", "w"], &[("PATH", &path)]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            root.join(env.slice_name("xc", "w", "files")).is_dir(),
            "binky up returned before the slice was made:\n{}",
            stdout(&out)
        );
        let out = env.binky_env(&["remove", "w"], &[("PATH", &path)]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
}

#[test]
fn an_external_adapters_provision_runs_once_per_world_as_in_binky_012() {
    let files = tempfile::tempdir().unwrap();
    let dir = files.path();
    // Not idempotent, as adapters written for 0.1.2 may be: a second provision fails.
    script(
        dir,
        "once",
        &format!(
            r#"cat > /dev/null
d="{d}"
case "$1" in
  provision) echo provision >> "$d/calls"
    if mkdir "$d/slice" 2>/dev/null; then echo '{{"ok": true}}'; else echo '{{"ok": false, "error": "File exists"}}'; fi ;;
  resolve) echo '{{"ok": true, "address": "file://{d}/slice"}}' ;;
  teardown) echo teardown >> "$d/calls"; rm -rf "$d/slice"; echo '{{"ok": true}}' ;;
  capabilities) echo '{{"ok": true, "capabilities": {{"clone": false}}}}' ;;
  *) echo '{{"ok": false, "error": "no such verb"}}' ;;
esac"#,
            d = dir.display()
        ),
    );
    let env = Env::new(
        r#"
[project]
name = "once"
{range}

[services.files]
adapter = "once"
migrate = "true"
"#,
    );
    let rest = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&rest)),
    )
    .unwrap()
    .into_string()
    .unwrap();
    let calls = || std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
    for _ in 0..3 {
        let out = env.binky_env(&["up", "w"], &[("PATH", &path)]);
        assert!(
            out.status.success(),
            "{}\ncalls:\n{}",
            stderr(&out),
            calls()
        );
    }
    let out = env.binky_env(&["reload", "w"], &[("PATH", &path)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        calls(),
        "provision\n",
        "provision ran again on up or reload"
    );
    let out = env.binky_env(&["remove", "w"], &[("PATH", &path)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(calls(), "provision\nteardown\n");
    assert!(!dir.join("slice").exists());
}
