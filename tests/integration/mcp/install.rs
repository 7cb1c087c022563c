//! `binky mcp install` for each client into a temp HOME: Claude's file at the repository's
//! top from a subdirectory, BINKY_HOME carried when not the default, Codex's comments kept,
//! a file it cannot read refused and named, and `--rules` written once.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::harness::*;

/// `binky mcp install ARGS` with HOME at `home` and BINKY_HOME `binky_home` (none: unset),
/// in `dir`.
fn install(home: &Path, binky_home: Option<&Path>, dir: &Path, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(binky_bin());
    cmd.args(["mcp", "install"])
        .args(args)
        .current_dir(dir)
        .env("HOME", home);
    match binky_home {
        Some(h) => cmd.env("BINKY_HOME", h),
        None => cmd.env_remove("BINKY_HOME"),
    };
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        format!("{}{}", stdout(&out), stderr(&out)),
    )
}

#[test]
fn mcp_install_writes_at_the_repository_top_carries_binky_home_and_keeps_comments() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let repo = tmp.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    binky_testkit::git::init_repo(&repo);
    let sub = repo.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    // The paths as getcwd reports them.
    let (home, repo) = (home.canonicalize().unwrap(), repo.canonicalize().unwrap());
    let sub = repo.join("src/deep");
    let custom = tmp.path().canonicalize().unwrap().join("custom-binky-home");
    let exe = Path::new(binky_bin()).canonicalize().unwrap();
    let exe = exe.to_str().unwrap();

    // Dry runs name the file and write nothing.
    for (client, file) in [
        ("claude", repo.join(".mcp.json")),
        ("cursor", home.join(".cursor/mcp.json")),
        ("codex", home.join(".codex/config.toml")),
    ] {
        let (ok, out) = install(
            &home,
            None,
            &sub,
            &["--client", client, "--dry-run", "--rules"],
        );
        assert!(ok, "{client}: {out}");
        assert!(
            out.contains(&format!("would write {}:", file.display())),
            "{client}: {out}"
        );
        assert!(out.contains(exe), "{client}: {out}");
        assert!(
            !out.contains("BINKY_HOME"),
            "the default home is not written: {out}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&home).unwrap().count(),
        0,
        "dry run wrote"
    );
    assert!(!repo.join(".mcp.json").exists() && !repo.join("CLAUDE.md").exists());

    // Claude, from a subdirectory: at the top, with the custom home; rules in CLAUDE.md.
    std::fs::write(repo.join("CLAUDE.md"), "# Project\n\nBuild with make.\n").unwrap();
    for _ in 0..2 {
        let (ok, out) = install(
            &home,
            Some(&custom),
            &sub,
            &["--client", "claude", "--rules"],
        );
        assert!(ok, "{out}");
    }
    assert!(!sub.join(".mcp.json").exists());
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(v["mcpServers"]["binky"]["command"], exe, "{v}");
    assert_eq!(v["mcpServers"]["binky"]["args"], json!(["mcp"]), "{v}");
    assert_eq!(
        v["mcpServers"]["binky"]["env"]["BINKY_HOME"],
        custom.display().to_string(),
        "{v}"
    );
    let rules = std::fs::read_to_string(repo.join("CLAUDE.md")).unwrap();
    assert!(
        rules.starts_with("# Project\n\nBuild with make.\n\n<!-- binky:rules start"),
        "{rules}"
    );
    assert_eq!(
        rules.matches("binky:rules start").count(),
        1,
        "twice is once: {rules}"
    );
    assert!(rules.contains("never approve commands yourself"), "{rules}");
    // The same home as the default: not written.
    let default = home.join(".binky");
    let (ok, _) = install(&home, Some(&default), &sub, &["--client", "claude"]);
    assert!(ok);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join(".mcp.json")).unwrap()).unwrap();
    assert!(v["mcpServers"]["binky"].get("env").is_none(), "{v}");

    // Cursor: merged into an existing file, its other server and keys kept; twice is once.
    let cursor = home.join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::write(
        &cursor,
        r#"{"mcpServers": {"other": {"command": "/usr/bin/other", "args": ["serve"]}}, "keep": 1}"#,
    )
    .unwrap();
    for _ in 0..2 {
        let (ok, out) = install(&home, None, &repo, &["--client", "cursor", "--rules"]);
        assert!(ok, "{out}");
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&cursor).unwrap()).unwrap();
    assert_eq!(v["keep"], 1, "{v}");
    assert_eq!(v["mcpServers"]["other"]["command"], "/usr/bin/other", "{v}");
    assert_eq!(v["mcpServers"]["binky"]["command"], exe, "{v}");
    let agents = std::fs::read_to_string(repo.join("AGENTS.md")).unwrap();
    assert_eq!(agents.matches("binky:rules start").count(), 1, "{agents}");

    // Codex: a [mcp_servers.binky] table next to the others, every comment kept.
    let codex = home.join(".codex/config.toml");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    let before = "# my codex\nmodel = \"o3\" # the best one\n\n# a server of mine\n[mcp_servers.other]\ncommand = \"/usr/bin/other\"\n";
    std::fs::write(&codex, before).unwrap();
    for _ in 0..2 {
        let (ok, out) = install(&home, Some(&custom), &repo, &["--client", "codex"]);
        assert!(ok, "{out}");
    }
    let text = std::fs::read_to_string(&codex).unwrap();
    assert!(text.starts_with(before), "{text}");
    assert_eq!(text.matches("[mcp_servers.binky]").count(), 1, "{text}");
    let t: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(
        t["mcp_servers"]["binky"]["command"].as_str(),
        Some(exe),
        "{text}"
    );
    assert_eq!(
        t["mcp_servers"]["binky"]["env"]["BINKY_HOME"].as_str(),
        Some(custom.to_str().unwrap()),
        "{text}"
    );

    // Files it cannot read as their format are named and left alone.
    std::fs::write(&cursor, "{ not json").unwrap();
    let (ok, out) = install(&home, None, &repo, &["--client", "cursor"]);
    assert!(
        !ok && out.contains("nothing was written") && out.contains(&cursor.display().to_string()),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), "{ not json");
    std::fs::write(&codex, "model = \n").unwrap();
    let (ok, out) = install(&home, None, &repo, &["--client", "codex"]);
    assert!(!ok && out.contains(&codex.display().to_string()), "{out}");
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), "model = \n");

    // Claude outside a repository: refused, saying where to run it.
    let (ok, out) = install(&home, None, &home, &["--client", "claude"]);
    assert!(!ok && out.contains("not inside a git repository"), "{out}");
}

#[test]
fn mcp_install_in_a_worlds_worktree_writes_to_the_main_checkout_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let repo = tmp.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    binky_testkit::git::init_repo(&repo);
    std::fs::write(repo.join("README"), "a project\n").unwrap();
    binky_testkit::git::commit_all(&repo, "init");
    let (home, repo) = (home.canonicalize().unwrap(), repo.canonicalize().unwrap());
    // A world's worktree is a linked worktree of the repository, beside it.
    let wt = tmp
        .path()
        .canonicalize()
        .unwrap()
        .join("project.worktrees/task");
    git_in(
        &repo,
        &["worktree", "add", "-q", "-b", "task", wt.to_str().unwrap()],
    );
    let sub = wt.join("src");
    std::fs::create_dir_all(&sub).unwrap();

    let (ok, out) = install(&home, None, &sub, &["--client", "claude", "--dry-run"]);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "would write {}:",
            repo.join(".mcp.json").display()
        )),
        "{out}"
    );
    assert!(!repo.join(".mcp.json").exists());
    let (ok, out) = install(&home, None, &sub, &["--client", "claude", "--rules"]);
    assert!(ok, "{out}");
    assert!(
        out.contains(&wt.display().to_string())
            && out.contains(&format!("main checkout {}", repo.display())),
        "it says where it wrote instead: {out}"
    );
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(v["mcpServers"]["binky"]["args"], json!(["mcp"]), "{v}");
    assert!(std::fs::read_to_string(repo.join("CLAUDE.md"))
        .unwrap()
        .contains("binky:rules start"));
    for f in [".mcp.json", "CLAUDE.md"] {
        assert!(!wt.join(f).exists(), "{f} written in the worktree");
        assert!(!sub.join(f).exists(), "{f} written in the worktree");
    }
    assert_eq!(
        git_in(&wt, &["status", "--porcelain", "--untracked-files=all"]),
        "",
        "the worktree is dirty"
    );
}
