//! `binky logs NAME [SVC]`: captured output, per service (and per replica: `api.1`; `SVC`
//! of a replicated service shows every replica's, each line with its replica's name); a
//! shared service's output is its project's shared world's.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::Duration;

use binky_controllers::store;

use super::context::{Ctx, Failure, Kind};
use super::exit;

fn emit(out: &mut impl Write, service: &str, line: &str, prefix: bool, json: bool) {
    let _ = if json {
        writeln!(
            out,
            "{}",
            serde_json::json!({"service": service, "line": line})
        )
    } else if prefix {
        writeln!(out, "{service:>10} | {line}")
    } else {
        writeln!(out, "{line}")
    };
}

/// The logs `binky logs` (and MCP `logs`) read of `world`: one service's (every replica's
/// of a replicated one), or every service's that has output, each with its path; and whether
/// lines are shown with their service's name.
pub fn chosen(
    store: &store::Store,
    logs_dir: &std::path::Path,
    world: &store::World,
    service: Option<&str>,
) -> Result<(Vec<(String, PathBuf)>, bool), Failure> {
    // A shared service logs in the project's shared world, as many replicas as it runs.
    let sources = crate::view::log_sources(store, logs_dir, world)?;
    let names: Vec<String> = sources.iter().map(|(n, _)| n.clone()).collect();
    let instances = |svc: &str| -> Vec<String> {
        let of: Vec<String> = names
            .iter()
            .filter(|n| *n != "hooks" && binky_controllers::replica::service_of(n) == svc)
            .cloned()
            .collect();
        if of.is_empty() {
            vec![svc.to_owned()]
        } else {
            of
        }
    };
    let path_of = |svc: &str| -> PathBuf {
        sources
            .iter()
            .find(|(n, _)| n == svc)
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| binky_controllers::supervisor::log_path(logs_dir, world, svc))
    };
    let selected: Vec<String> = match service {
        // A replicated service: every replica's log, each line with its replica's name.
        Some(s) if instances(s).len() > 1 => instances(s),
        Some(s) if names.iter().any(|n| n == s) || path_of(s).exists() => vec![s.to_owned()],
        Some(s) => {
            return Err(Failure::usage(format!(
                "world `{}` has no service `{s}`; services: {}",
                world.name,
                names[..names.len() - 1].join(", ")
            ))
            .kind(Kind::NoService))
        }
        None => names
            .iter()
            .filter(|n| path_of(n).exists())
            .cloned()
            .collect(),
    };
    let prefix = service.is_none_or(|s| instances(s).len() > 1);
    Ok((
        selected
            .into_iter()
            .map(|s| {
                let p = path_of(&s);
                (s, p)
            })
            .collect(),
        prefix,
    ))
}

/// `binky logs`.
pub async fn run(
    name: Option<String>,
    service: Option<String>,
    follow: bool,
    lines: usize,
    json: bool,
) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    let logs_dir = ctx.home.logs();
    let (selected, prefix) = chosen(&ctx.store, &logs_dir, &world, service.as_deref())?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut offsets: Vec<(String, PathBuf, u64)> = Vec::new();
    for (svc, path) in &selected {
        // Followed, a line still being written comes whole with the rest of it.
        let (history, len) = if follow {
            crate::view::log_tail_to_follow(path, lines)
        } else {
            crate::view::log_tail(path, lines)
        };
        for line in history {
            emit(&mut out, svc, &line, prefix, json);
        }
        offsets.push((svc.clone(), path.clone(), len));
    }
    let _ = out.flush();
    drop(out);
    if !follow {
        if selected.is_empty() && !json {
            eprintln!("binky: no output captured yet for {}", world.name);
        }
        return Ok(exit::OK);
    }
    let mut partial: Vec<String> = vec![String::new(); offsets.len()];
    let mut ticks = 0u32;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for (i, (svc, path, offset)) in offsets.iter_mut().enumerate() {
            let Ok(mut f) = std::fs::File::open(&*path) else {
                continue;
            };
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len < *offset {
                *offset = 0; // rotated or truncated
            }
            if len == *offset {
                continue;
            }
            let _ = f.seek(SeekFrom::Start(*offset));
            let mut buf = Vec::new();
            let _ = f.read_to_end(&mut buf);
            *offset += buf.len() as u64;
            partial[i].push_str(&String::from_utf8_lossy(&buf));
            while let Some(nl) = partial[i].find('\n') {
                let line: String = partial[i].drain(..=nl).collect();
                emit(
                    &mut out,
                    svc,
                    line.trim_end_matches(['\n', '\r']),
                    prefix,
                    json,
                );
            }
        }
        if out.flush().is_err() {
            return Ok(exit::OK); // reader went away (e.g. `| head`)
        }
        ticks += 1;
        if ticks.is_multiple_of(5) {
            // New services' logs appear; a removed world ends the follow.
            if ctx.store.read(|c| store::world(c, world.id))?.is_none() {
                return Ok(exit::OK);
            }
            if service.is_none() {
                for (svc, path) in chosen(&ctx.store, &logs_dir, &world, None)?.0 {
                    if !offsets.iter().any(|(s, _, _)| *s == svc) {
                        offsets.push((svc, path, 0));
                        partial.push(String::new());
                    }
                }
            }
        }
    }
}
