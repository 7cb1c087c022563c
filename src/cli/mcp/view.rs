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
    // Each condition's first line as an agent reads it (its advice to a person replaced
    // before the lines are joined: binky's advice ends its line), each once.
    let mut stuck: Vec<String> = Vec::new();
    for m in v["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] != "True" && c["status"] != "true")
        .filter_map(|c| c["message"].as_str())
        .filter_map(|m| m.lines().next())
        .filter(|m| !m.is_empty())
        .map(no_self_approval)
    {
        if stuck.len() < 2 && !stuck.contains(&m) {
            stuck.push(m);
        }
    }
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

/// How binky's advice to a person to run `binky approve` begins, wherever binky writes one
/// (the hold condition, `binky exec` and `binky verify` refusals): always at the end of its
/// line, after the command it is about.
const ADVICE: &[&str] = &["; run `binky approve", "ask a person to run `binky approve"];

/// `text` with binky's advice to run `binky approve` (meant for a person at a terminal)
/// replaced by advice for an agent: ask the person. Only the advice goes: a command quoted
/// before it stays whole, whatever it holds (`script -qec "binky approve …"` too), because
/// the advice is found from the end of its line.
pub fn no_self_approval(text: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let Some(i) = ADVICE.iter().filter_map(|a| l.rfind(a)).max() else {
                return l.to_owned();
            };
            let head = l[..i].trim_end().trim_end_matches([';', ',', ':']).trim_end();
            let advice = "a person must approve it (the `approvals` tool says what waits): ask them, never approve it yourself";
            if head.is_empty() {
                advice.to_owned()
            } else {
                format!("{head}; {advice}")
            }
        })
        .collect();
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Every string of `v` through [`no_self_approval`], but the lines meant for the person,
/// the commands themselves (`command`) and what a command or service printed (`stdout`,
/// `stderr`, `body`, `output_tail`: given back as they were).
pub fn for_an_agent(v: &mut Value) {
    match v {
        Value::String(s) if s.contains("binky approve") => *s = no_self_approval(s),
        Value::Array(a) => a.iter_mut().for_each(for_an_agent),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                let verbatim = [
                    "for_the_person",
                    "command",
                    "stdout",
                    "stderr",
                    "body",
                    "output_tail",
                ];
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What a person is told to run goes; the command it is about stays whole, whatever it
    /// holds.
    #[test]
    fn only_the_advice_goes_and_a_command_naming_binky_approve_stays_whole() {
        let cmd = r#"script -qec "binky approve 0123456789ab --yes" /dev/null"#;
        let held = format!(
            "waiting for approval of 2 command(s), first the setup of api: `{cmd}`; run `binky approve 0a1b2c3d4e5f` (or `binky approve --all w` after reading `binky approve --list`)"
        );
        assert_eq!(
            no_self_approval(&held),
            format!("waiting for approval of 2 command(s), first the setup of api: `{cmd}`; a person must approve it (the `approvals` tool says what waits): ask them, never approve it yourself")
        );
        // `binky exec`'s refusal, and `binky verify`'s list with its advice on a line of its own.
        let exec = "`binky approve 0123` waits for a person's approval (approvals are on) before `binky exec` runs it in `w`; ask a person to run `binky approve 99aa` (or to allow a family of commands: `binky approve --exec 'binky*'`)";
        assert_eq!(
            no_self_approval(exec),
            "`binky approve 0123` waits for a person's approval (approvals are on) before `binky exec` runs it in `w`; a person must approve it (the `approvals` tool says what waits): ask them, never approve it yourself"
        );
        let verify = format!("1 verify command(s) of `w` wait for a person's approval (approvals are on):\n  0a1b  {cmd}\nask a person to run `binky approve` (or `binky approve KEY`)\n");
        assert_eq!(
            no_self_approval(&verify),
            format!("1 verify command(s) of `w` wait for a person's approval (approvals are on):\n  0a1b  {cmd}\na person must approve it (the `approvals` tool says what waits): ask them, never approve it yourself\n")
        );
        // A line that only quotes such a command is left as it is.
        let quoted = format!(
            "world `w` waits for a person: 1 new command must be approved before it runs: `{cmd}`"
        );
        assert_eq!(no_self_approval(&quoted), quoted);
        // The command in an answer's `command` field is never touched.
        let mut v = serde_json::json!({"waiting": [{"command": format!("x; run `binky approve 1`"), "what": "binky exec in w"}]});
        for_an_agent(&mut v);
        assert_eq!(v["waiting"][0]["command"], "x; run `binky approve 1`");
    }
}
