//! `binky mcp install --client C [--dry-run] [--rules]`: register `binky mcp` in an MCP
//! client's config, and optionally tell agents how to use their world in the repository's
//! CLAUDE.md or AGENTS.md.
//!
//! # Guarantees
//! - Claude Code's `.mcp.json` (and `--rules`' CLAUDE.md or AGENTS.md) goes to the top of
//!   the repository's main checkout, wherever in the repository the command runs: run in a
//!   world's worktree (a linked git worktree), it leaves that worktree clean and says where
//!   it wrote.
//! - A `BINKY_HOME` that is not the default (`~/.binky`) is written as the server's `env`,
//!   so the client's server sees the worlds the person's shell sees.
//! - Codex's `config.toml` is edited in place (`toml_edit`): other tables, keys and comments
//!   are kept. A file that is not valid JSON or TOML is refused, named, and left alone.
//! - The rules block sits between two marker comments: running again replaces it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::own_binary;
use crate::failure::{exit, Failure, Kind};

/// The MCP clients `binky mcp install` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum McpClient {
    /// Claude Code, project scope (`.mcp.json` at the top of the repository's main checkout).
    Claude,
    /// Cursor (`~/.cursor/mcp.json`).
    Cursor,
    /// OpenAI Codex (`~/.codex/config.toml`).
    Codex,
}

/// The rules block's first and last lines.
const RULES_START: &str = "<!-- binky:rules start (written by `binky mcp install --rules`; edit outside this block, it is replaced) -->";
const RULES_END: &str = "<!-- binky:rules end -->";

/// What agents are told about their world.
const RULES: &str = "\
## Your binky world

This repository runs under binky: every git worktree gets its own world (its own ports,
database, environment and URLs). Use the `binky` MCP tools:

- `list` first; `up` your world (its name is your branch's), then `wait` until it is ready.
- Use only your world's URLs and ports (`env`, `status`): never hard-coded ports, never
  another world's.
- Run tests and scripts with `exec` (or `verify`) in your world; read `logs` and `events`
  when something fails.
- If a tool answers `held`, stop and ask the person: never approve commands yourself.
- `remove` only worlds you made, with your work committed; otherwise ask the person.
";

/// `binky mcp install`.
pub fn install(client: McpClient, dry_run: bool, rules: bool) -> Result<i32, Failure> {
    let exe = own_binary()?.to_string_lossy().into_owned();
    let home = binky_home()?;
    // In a linked worktree (a world's), the files go to the main checkout, and that is said.
    let checkout = match client {
        McpClient::Claude => Some(checkout()?),
        _ if rules => Some(checkout()?),
        _ => None,
    };
    if let Some(c) = checkout.as_ref().filter(|c| c.top != c.main) {
        println!(
            "you are in the worktree {}: writing to the repository's main checkout {} instead, so this worktree stays clean",
            c.top.display(),
            c.main.display()
        );
    }
    let main = checkout.map(|c| c.main);
    let path = config_path(client, main.as_deref())?;
    let existing = read(&path)?;
    let merged = match client {
        McpClient::Claude | McpClient::Cursor => merge_json(existing.as_deref(), &exe, home.as_deref()),
        McpClient::Codex => merge_toml(existing.as_deref(), &exe, home.as_deref()),
    }
    .map_err(|e| {
        Failure::usage(format!(
            "{} is not valid ({e}); fix it or move it away, then run this again (nothing was written)",
            path.display()
        ))
    })?;
    let rules_file = if let (true, Some(top)) = (rules, &main) {
        let file = top.join(match client {
            McpClient::Claude => "CLAUDE.md",
            _ => "AGENTS.md",
        });
        let text = with_rules(read(&file)?.as_deref());
        Some((file, text))
    } else {
        None
    };
    if dry_run {
        println!("would write {}:", path.display());
        print!("{merged}");
        if let Some((file, text)) = &rules_file {
            println!("would write {}:", file.display());
            print!("{text}");
        }
        return Ok(exit::OK);
    }
    crate::paths::write_atomically(&path, &merged)
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))?;
    let env = home
        .as_deref()
        .map(|h| format!(" with BINKY_HOME={h}"))
        .unwrap_or_default();
    println!(
        "wrote {}: server `binky` runs `{exe} mcp`{env}; restart the client to pick it up",
        path.display()
    );
    if let Some((file, text)) = rules_file {
        crate::paths::write_atomically(&file, &text)
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", file.display())))?;
        println!("wrote the rules for agents into {}", file.display());
    }
    Ok(exit::OK)
}

fn read(path: &Path) -> Result<Option<String>, Failure> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Failure::failed(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// `BINKY_HOME` as an absolute path, when it is set and not the default `~/.binky`.
fn binky_home() -> Result<Option<String>, Failure> {
    if std::env::var_os("BINKY_HOME").is_none_or(|h| h.is_empty()) {
        return Ok(None);
    }
    let home = crate::paths::Home::from_env().map_err(Failure::usage)?;
    let default = binky_platform::user::home().map(|h| h.join(".binky"));
    let same = |a: &Path, b: &Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    };
    if default.is_some_and(|d| same(&d, home.root())) {
        return Ok(None);
    }
    Ok(Some(home.root().to_string_lossy().into_owned()))
}

/// Where the command runs in its repository.
struct Checkout {
    /// The top of the worktree the current directory is in.
    top: PathBuf,
    /// The top of the repository's main checkout (the parent of `git rev-parse
    /// --git-common-dir`, as binky names a project's repository); `top` in a bare
    /// repository's worktree, which has no main checkout.
    main: PathBuf,
}

fn checkout() -> Result<Checkout, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::failed(format!("cannot read the current directory: {e}")))?;
    let args = [
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--git-common-dir",
    ];
    let out = crate::git::text(&cwd, &args).map_err(|e| {
        Failure::usage(format!(
            "{} is not inside a git repository ({}); run `binky mcp install` inside the repository whose agents use binky",
            cwd.display(),
            e.trim()
        ))
        .kind(Kind::NotInRepository)
    })?;
    let mut lines = out.lines();
    let top = PathBuf::from(lines.next().unwrap_or_default());
    let common = PathBuf::from(lines.next().unwrap_or_default());
    let main = match (common.file_name(), common.parent()) {
        (Some(n), Some(parent)) if n == ".git" => parent.to_path_buf(),
        _ => top.clone(),
    };
    Ok(Checkout { top, main })
}

/// The config file `client` reads MCP servers from (`main`: the repository's main
/// checkout, for Claude's).
fn config_path(client: McpClient, main: Option<&Path>) -> Result<PathBuf, Failure> {
    if client == McpClient::Claude {
        let main = main.ok_or_else(|| Failure::failed("no repository to write .mcp.json in"))?;
        return Ok(main.join(".mcp.json"));
    }
    let home = binky_platform::user::home().ok_or_else(|| {
        Failure::usage(format!(
            "{} is not set; set it to your home directory",
            binky_platform::user::HOME_VAR
        ))
    })?;
    Ok(match client {
        McpClient::Cursor => home.join(".cursor").join("mcp.json"),
        _ => home.join(".codex").join("config.toml"),
    })
}

/// `{"mcpServers": {"binky": {"command": EXE, "args": ["mcp"], "env"?}}}` merged into
/// `existing` (other keys and servers kept).
pub fn merge_json(existing: Option<&str>, exe: &str, home: Option<&str>) -> Result<String, String> {
    let mut doc = match existing.filter(|s| !s.trim().is_empty()) {
        Some(s) => serde_json::from_str::<Value>(s).map_err(|e| e.to_string())?,
        None => json!({}),
    };
    let root = doc
        .as_object_mut()
        .ok_or("its top level is not a JSON object")?;
    let servers = root
        .entry("mcpServers")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("`mcpServers` is not an object")?;
    let mut server = json!({ "command": exe, "args": ["mcp"] });
    if let Some(h) = home {
        server["env"] = json!({ "BINKY_HOME": h });
    }
    servers.insert("binky".into(), server);
    let mut out = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    out.push('\n');
    Ok(out)
}

/// A `[mcp_servers.binky]` table (`command`, `args = ["mcp"]`, `env` with BINKY_HOME when
/// given) merged into `existing`, everything else (comments too) kept as it was.
pub fn merge_toml(existing: Option<&str>, exe: &str, home: Option<&str>) -> Result<String, String> {
    use toml_edit::{value, Array, DocumentMut, InlineTable, Item, Table};
    let mut doc: DocumentMut = existing
        .unwrap_or("")
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string().trim().to_owned())?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or("`mcp_servers` is not a table")?;
    let mut binky = Table::new();
    binky["command"] = value(exe);
    let mut args = Array::new();
    args.push("mcp");
    binky["args"] = value(args);
    if let Some(h) = home {
        let mut env = InlineTable::new();
        env.insert("BINKY_HOME", h.into());
        binky["env"] = value(env);
    }
    // Keep the comments above an existing table.
    if let Some(old) = servers.get("binky").and_then(Item::as_table) {
        binky.decor_mut().clone_from(old.decor());
    }
    servers.insert("binky", Item::Table(binky));
    Ok(doc.to_string())
}

/// `existing` with the rules block added at its end, or the block it has replaced.
pub fn with_rules(existing: Option<&str>) -> String {
    let block = format!("{RULES_START}\n{RULES}{RULES_END}\n");
    let text = existing.unwrap_or("");
    if let (Some(a), Some(b)) = (text.find(RULES_START), text.find(RULES_END)) {
        if a < b {
            let end = b + RULES_END.len();
            let end = if text[end..].starts_with('\n') {
                end + 1
            } else {
                end
            };
            return format!("{}{block}{}", &text[..a], &text[end..]);
        }
    }
    if text.trim().is_empty() {
        return block;
    }
    let sep = if text.ends_with("\n\n") {
        ""
    } else if text.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    format!("{text}{sep}{block}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_json_merge_keeps_other_servers_and_keys() {
        let before = r#"{"theme": "dark", "mcpServers": {"other": {"command": "x"}}}"#;
        let out = merge_json(Some(before), "/bin/binky", None).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["theme"], "dark");
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        assert_eq!(v["mcpServers"]["binky"]["command"], "/bin/binky");
        assert_eq!(v["mcpServers"]["binky"]["args"], json!(["mcp"]));
        assert!(v["mcpServers"]["binky"].get("env").is_none());
        // Idempotent.
        assert_eq!(merge_json(Some(&out), "/bin/binky", None).unwrap(), out);
        let with = merge_json(Some(&out), "/bin/binky", Some("/h")).unwrap();
        let v: Value = serde_json::from_str(&with).unwrap();
        assert_eq!(v["mcpServers"]["binky"]["env"]["BINKY_HOME"], "/h");
        assert!(merge_json(Some("[1]"), "/bin/binky", None).is_err());
        assert!(merge_json(Some("{"), "/bin/binky", None).is_err());
    }

    #[test]
    fn mcp_toml_merge_keeps_other_tables_and_comments() {
        let before = "# my settings\nmodel = \"o3\" # the model\n\n# other server\n[mcp_servers.other]\ncommand = \"y\"\n";
        let out = merge_toml(Some(before), "/bin/binky", Some("/h")).unwrap();
        assert!(out.starts_with(before), "{out}");
        let v: toml::Table = toml::from_str(&out).unwrap();
        assert_eq!(v["model"].as_str(), Some("o3"));
        assert_eq!(v["mcp_servers"]["other"]["command"].as_str(), Some("y"));
        assert_eq!(
            v["mcp_servers"]["binky"]["command"].as_str(),
            Some("/bin/binky")
        );
        assert_eq!(
            v["mcp_servers"]["binky"]["env"]["BINKY_HOME"].as_str(),
            Some("/h")
        );
        assert!(out.contains("[mcp_servers.binky]"), "{out}");
        // Idempotent.
        assert_eq!(
            merge_toml(Some(&out), "/bin/binky", Some("/h")).unwrap(),
            out
        );
        assert!(merge_toml(Some("mcp_servers = 3"), "/bin/binky", None).is_err());
        assert!(merge_toml(Some("a = "), "/bin/binky", None).is_err());
    }

    #[test]
    fn rules_block_is_added_once_and_replaced() {
        let once = with_rules(Some("# Project\n\nBuild with make.\n"));
        assert!(
            once.starts_with("# Project\n\nBuild with make.\n\n"),
            "{once}"
        );
        assert_eq!(with_rules(Some(&once)), once);
        let edited = once.replace("never approve", "NEVER approve");
        assert_eq!(with_rules(Some(&edited)), once);
        let after = format!("{once}\nMore text.\n");
        assert_eq!(with_rules(Some(&after)), after);
        assert_eq!(with_rules(None).matches(RULES_START).count(), 1);
    }
}
