//! `binky hosts [--write | --remove]`: `/etc/hosts` lines for every routed hostname, for
//! the tools that cannot resolve `*.localhost` themselves.

use binky_controllers::route;

use super::context::{Ctx, Failure};
use super::exit;

const BEGIN: &str = "# binky begin (managed by `binky hosts --write`; edit outside this block)";
const END: &str = "# binky end";

/// The hosts file binky edits (`BINKY_HOSTS_FILE` overrides `/etc/hosts`).
fn hosts_file() -> std::path::PathBuf {
    std::env::var_os("BINKY_HOSTS_FILE")
        .map(Into::into)
        .unwrap_or_else(|| "/etc/hosts".into())
}

/// `text` without binky's block.
fn without_block(text: &str) -> String {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("# binky begin") {
            inside = true;
            continue;
        }
        if inside && line.trim() == END {
            inside = false;
            continue;
        }
        if !inside {
            out.push(line);
        }
    }
    let mut s = out.join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// `binky hosts`.
pub fn run(write: bool, remove: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let table = route::load_table(&ctx.store)?;
    let lines: Vec<String> = table
        .routes
        .keys()
        .map(|h| format!("127.0.0.1 {h}"))
        .collect();
    if !write && !remove {
        for l in &lines {
            println!("{l}");
        }
        if lines.is_empty() {
            eprintln!("binky: no world has a URL yet");
        }
        return Ok(exit::OK);
    }
    let path = hosts_file();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut new = without_block(&text);
    if write && !lines.is_empty() {
        new.push_str(BEGIN);
        new.push('\n');
        for l in &lines {
            new.push_str(l);
            new.push('\n');
        }
        new.push_str(END);
        new.push('\n');
    }
    if new == text {
        println!("{} is up to date", path.display());
        return Ok(exit::OK);
    }
    // Whole, with the mode it has: a crash never leaves half a hosts file.
    let mut how = binky_controllers::whole_file::Whole::new().durable();
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(&path) {
        use std::os::unix::fs::PermissionsExt;
        how = how.mode(meta.permissions().mode() & 0o7777);
    }
    if let Err(e) = how.write(&path, new.as_bytes()) {
        return Err(Failure::failed(
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                format!(
                "cannot write {} (permission denied): run `sudo env BINKY_HOME={} binky hosts {}`",
                path.display(),
                ctx.home.root().display(),
                if write { "--write" } else { "--remove" }
            )
            } else {
                format!("cannot write {}: {e}", path.display())
            },
        ));
    }
    if write {
        println!(
            "{}: {} hostname(s) point at 127.0.0.1 (run again after adding worlds)",
            path.display(),
            lines.len()
        );
    } else {
        println!("{}: binky's block removed", path.display());
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_replaced_and_the_rest_kept() {
        let text = format!(
            "127.0.0.1 localhost\n{BEGIN}\n127.0.0.1 old.x.localhost\n{END}\n::1 ip6-localhost\n"
        );
        assert_eq!(
            without_block(&text),
            "127.0.0.1 localhost\n::1 ip6-localhost\n"
        );
        assert_eq!(without_block("a\nb\n"), "a\nb\n");
    }
}
