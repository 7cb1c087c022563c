//! What waits for a person's approval holds only what needs it: an `exec` answered `held`
//! holds neither the world nor `verify`, and `verify` waits only for its own commands. A
//! command that names `binky approve` is quoted whole in every answer about it.

use serde_json::{json, Value};

use super::{call, code, connect};
use crate::harness::*;

/// A command no person approves in these tests: it names `binky approve`, as the commands
/// that cut the answers about them did.
const SCRIPTED: &str = r#"script -qec "binky approve 0123456789ab --yes" /dev/null"#;

/// A world of one service and two verify commands, the second naming `binky approve`.
fn config() -> String {
    format!(
        r#"
[project]
name = "heldmcp"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true

[agents]
verify = ["test -n \"$API_URL\"", "echo 'binky approve 0123456789ab is for people'"]
"#
    )
}

/// The `waiting` entries of an answer, with the fields these tests read.
fn waiting(v: &Value) -> Vec<(String, String)> {
    v["waiting"]
        .as_array()
        .unwrap_or_else(|| panic!("no waiting list: {v}"))
        .iter()
        .map(|c| {
            (
                c["asked_by"].as_str().unwrap().to_owned(),
                c["command"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_held_exec_holds_only_itself_and_verify_waits_only_for_its_own_commands() {
    let env = Env::new(&config());
    env.ok(&["settings", "approvals=true"]);
    let out = env.binky(&["up", "w", "--no-wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A person approves everything the world runs, its verify commands too.
    env.ok(&["approve", "--all", "w", "--yes"]);
    env.ok(&["wait", "w", "--timeout", "60s"]);
    let client = connect(&env).await;

    // Two commands no person approved: each answered `held`, quoted whole.
    for (command, shown) in [
        (
            json!(["binky", "approve", "0123456789ab"]),
            "`binky approve 0123456789ab`".to_owned(),
        ),
        (
            json!([
                "script",
                "-qec",
                "binky approve 0123456789ab --yes",
                "/dev/null"
            ]),
            "`script -qec 'binky approve 0123456789ab --yes' /dev/null`".to_owned(),
        ),
    ] {
        let (err, x) = call(&client, "exec", json!({"world": "w", "command": command})).await;
        assert!(err, "{x}");
        assert_eq!(code(&x), "held", "{x}");
        let message = x["error"]["message"].as_str().unwrap();
        assert_eq!(
            message,
            format!("{shown} waits for a person's approval (approvals are on): it did not run"),
            "{x}"
        );
    }
    let (err, ap) = call(&client, "approvals", json!({"world": "w"})).await;
    assert!(!err, "{ap}");
    let mut listed = waiting(&ap);
    listed.sort();
    assert_eq!(
        listed,
        vec![
            ("exec".to_owned(), "binky approve 0123456789ab".to_owned()),
            (
                "exec".to_owned(),
                "script -qec 'binky approve 0123456789ab --yes' /dev/null".to_owned()
            ),
        ],
        "{ap}"
    );
    for c in ap["waiting"].as_array().unwrap() {
        let line = c["for_the_person"].as_str().unwrap();
        assert!(
            line.contains(&format!("`{}`", c["command"].as_str().unwrap())),
            "{line}"
        );
    }

    // They hold nothing else: the world is ready, and verify runs its own commands.
    let (err, w) = call(
        &client,
        "wait",
        json!({"world": "w", "timeout_seconds": 30}),
    )
    .await;
    assert!(!err, "{w}");
    assert_eq!(w["state"], "ready", "{w}");
    let (err, v) = call(&client, "verify", json!({"world": "w"})).await;
    assert!(!err, "verify is held by exec commands: {v}");
    assert_eq!(v["results"].as_array().unwrap().len(), 2, "{v}");

    // Its own command's approval taken back: verify waits for that one alone, quoted whole.
    let list: Value = serde_json::from_str(&env.ok(&["approve", "--list", "--json"])).unwrap();
    let echo = "echo 'binky approve 0123456789ab is for people'";
    let key = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == echo)
        .and_then(|c| c["key"].as_str())
        .unwrap_or_else(|| panic!("the verify command is not listed: {list}"))
        .to_owned();
    env.ok(&["approve", "--revoke", &key]);
    let (err, v) = call(&client, "verify", json!({"world": "w"})).await;
    assert!(err, "{v}");
    assert_eq!(code(&v), "held", "{v}");
    assert_eq!(
        waiting(&v),
        vec![("verify".to_owned(), echo.to_owned())],
        "{v}"
    );
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("`{echo}`")) && !message.contains("exec"),
        "{message}"
    );
    let (err, w) = call(
        &client,
        "wait",
        json!({"world": "w", "timeout_seconds": 30}),
    )
    .await;
    assert!(!err && w["state"] == "ready", "{w}");
    client.cancel().await.unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[tokio::test]
async fn a_held_world_whose_command_names_binky_approve_is_told_with_the_command_whole() {
    let env = Env::new(&format!(
        r#"
[project]
name = "heldquote"
{{range}}

[services.api]
cmd = '{SCRIPTED}'
"#
    ));
    env.ok(&["settings", "approvals=true"]);
    let client = connect(&env).await;
    let root = env.repo.display().to_string();
    let (err, up) = call(&client, "up", json!({"world": "w", "root": root})).await;
    assert!(err, "{up}");
    assert_eq!(code(&up), "held", "{up}");
    let message = up["error"]["message"].as_str().unwrap();
    assert!(message.ends_with(&format!(": `{SCRIPTED}`")), "{message}");
    assert_eq!(
        waiting(&up),
        vec![("up".to_owned(), SCRIPTED.to_owned())],
        "{up}"
    );
    // The world's condition, as the summary and `status` give it: the command whole, and
    // advice for an agent where a person's was.
    let advice = "a person must approve it (the `approvals` tool says what waits): ask them, never approve it yourself";
    let summary = up["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("first the cmd of api: `{SCRIPTED}`; {advice}")),
        "{summary}"
    );
    let (err, st) = call(&client, "status", json!({"world": "w"})).await;
    assert!(!err, "{st}");
    let admitted = st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Admitted")
        .unwrap();
    assert!(
        admitted["message"]
            .as_str()
            .unwrap()
            .ends_with(&format!("`{SCRIPTED}`; {advice}")),
        "{admitted}"
    );
    for answer in [&up, &st] {
        assert!(
            !answer.to_string().contains("; run `binky approve"),
            "{answer}"
        );
    }
    // A person reads the same condition with the command to run.
    let status = env.ok(&["status", "w"]);
    assert!(
        status.contains(&format!("`{SCRIPTED}`; run `binky approve ")),
        "{status}"
    );
    client.cancel().await.unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
