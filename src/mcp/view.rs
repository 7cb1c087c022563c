//! What the tools make of `binky status --json`: a world's compact form and one-line
//! summary, whether it is held for a person, log lines shared between services, and text
//! made safe for an agent (never told to approve commands itself).

use serde_json::{json, Value};

/// A world as `list` shows it: name, project, state, services' states, URLs.
pub fn compact(v: &Value) -> Value {
    let mut urls = serde_json::Map::new();
    let mut services = serde_json::Map::new();
    for s in v["services"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().unwrap_or("?");
        services.insert(name.into(), s["state"].clone());
        if let Some(u) = s["url"].as_str() {
            urls.insert(name.into(), json!(u));
        }
    }
    json!({
        "world": v["name"],
        "project": v["project"],
        "state": v["state"],
        "urls": urls,
        "services": services,
        "worktree": v["worktree"]["path"],
    })
}

/// One line about a world: its state, what is not running, where it answers.
pub fn summary(v: &Value) -> String {
    let name = v["name"].as_str().unwrap_or("?");
    let project = v["project"].as_str().unwrap_or("?");
    let state = v["state"].as_str().unwrap_or("?");
    let services = v["services"].as_array().cloned().unwrap_or_default();
    let running = services.iter().filter(|s| s["state"] == "running").count();
    let mut out = format!(
        "{name} ({project}): {state}, {running}/{} services running",
        services.len()
    );
    let others: Vec<String> = services
        .iter()
        .filter(|s| s["state"] != "running")
        .map(|s| {
            format!(
                "{} {}",
                s["name"].as_str().unwrap_or("?"),
                s["state"].as_str().unwrap_or("?")
            )
        })
        .collect();
    if !others.is_empty() {
        out.push_str(&format!(" ({})", others.join(", ")));
    }
    let urls: Vec<String> = services
        .iter()
        .filter_map(|s| Some(format!("{} {}", s["name"].as_str()?, s["url"].as_str()?)))
        .collect();
    if !urls.is_empty() {
        out.push_str(&format!("; {}", urls.join(", ")));
    }
    let stuck: Vec<&str> = v["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] != "True" && c["status"] != "true")
        .filter_map(|c| c["message"].as_str())
        .filter_map(|m| m.lines().next())
        .filter(|m| !m.is_empty())
        .take(2)
        .collect();
    if state != "ready" && state != "stopped" && !stuck.is_empty() {
        out.push_str(&format!("; waiting on: {}", stuck.join("; ")));
    }
    out
}

/// Whether a world waits for a person to approve its commands (its status).
pub fn is_held(status: &Value) -> bool {
    status["state"] == "approval"
        || status["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["reason"] == "AwaitingApproval" && c["status"] != "True")
        })
}

/// `text` with the CLI's advice to run `binky approve` (meant for a person at a terminal)
/// replaced by advice for an agent: ask the person.
pub fn no_self_approval(text: &str) -> String {
    if !text.contains("binky approve") {
        return text.to_owned();
    }
    let lines: Vec<String> = text
        .lines()
        .map(|l| match l.find("binky approve") {
            None => l.to_owned(),
            Some(i) => {
                let head = l[..i].trim_end_matches('`').trim_end();
                let head = head.strip_suffix("run").unwrap_or(head).trim_end();
                let head = head.trim_end_matches([';', ',', '(', ':', '.']).trim_end();
                format!("{head}; a person must approve it (the `approvals` tool says what waits): ask them, never approve it yourself")
            }
        })
        .collect();
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Every string of `v` through [`no_self_approval`], but the lines meant for the person
/// and what a command or service printed (`stdout`, `stderr`, `body`, `output_tail`: given
/// back as they were).
pub fn for_an_agent(v: &mut Value) {
    match v {
        Value::String(s) if s.contains("binky approve") => *s = no_self_approval(s),
        Value::Array(a) => a.iter_mut().for_each(for_an_agent),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                let verbatim = ["for_the_person", "stdout", "stderr", "body", "output_tail"];
                if !verbatim.contains(&k.as_str()) {
                    for_an_agent(x);
                }
            }
        }
        _ => {}
    }
}

/// The answer about a world after a command: name, project, state, summary, URLs.
pub fn about(status: &Value) -> Value {
    let c = compact(status);
    json!({
        "world": status["name"],
        "project": status["project"],
        "state": status["state"],
        "summary": summary(status),
        "urls": c["urls"],
    })
}

/// A count of worlds by state: `3 worlds: 2 ready, 1 stopped`.
pub fn worlds_summary(worlds: &[Value]) -> String {
    if worlds.is_empty() {
        return "no worlds yet (`up` makes one)".into();
    }
    let mut states: Vec<(String, usize)> = Vec::new();
    for w in worlds {
        let s = w["state"].as_str().unwrap_or("?").to_owned();
        match states.iter_mut().find(|(x, _)| *x == s) {
            Some((_, n)) => *n += 1,
            None => states.push((s, 1)),
        }
    }
    format!(
        "{} world{}: {}",
        worlds.len(),
        if worlds.len() == 1 { "" } else { "s" },
        states
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The newest `limit` lines of several services' logs in total, shared out evenly (a
/// service with fewer leaves its share to the others); each service's lines in order.
pub fn newest(lines: Vec<Value>, limit: usize) -> Vec<Value> {
    let mut order: Vec<String> = Vec::new();
    let mut per: Vec<Vec<Value>> = Vec::new();
    for l in lines {
        let s = l["service"].as_str().unwrap_or("").to_owned();
        match order.iter().position(|x| *x == s) {
            Some(i) => per[i].push(l),
            None => {
                order.push(s);
                per.push(vec![l]);
            }
        }
    }
    let mut take = vec![0usize; per.len()];
    let mut left = limit;
    while left > 0 {
        let mut moved = false;
        for (i, p) in per.iter().enumerate() {
            if left > 0 && take[i] < p.len() {
                take[i] += 1;
                left -= 1;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    per.into_iter()
        .zip(take)
        .flat_map(|(p, n)| {
            let skip = p.len() - n;
            p.into_iter().skip(skip)
        })
        .collect()
}
