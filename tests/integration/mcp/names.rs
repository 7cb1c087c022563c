//! World names from a client: a name no world can have (what `binky up` refuses) is refused
//! by every tool that takes one, before anything is asked.

use serde_json::json;

use super::{call, code, config, connect};
use crate::harness::*;

/// A world name no world can have (what `binky up` refuses) is refused by every tool that
/// takes one before anything is asked; one that could be but is not there is not found.
#[tokio::test]
async fn every_tool_refuses_a_world_name_no_world_can_have() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    let client = connect(&env).await;
    for bad in [".hidden", "a/.git", "x.lock", "HEAD", "a..b"] {
        for (tool, mut args) in [
            ("approvals", json!({})),
            ("status", json!({})),
            ("env", json!({})),
            ("logs", json!({})),
            ("events", json!({})),
            ("wait", json!({})),
            ("up", json!({})),
            ("down", json!({})),
            ("reload", json!({})),
            ("remove", json!({})),
            ("verify", json!({})),
            ("apply", json!({})),
            ("exec", json!({"command": ["true"]})),
            ("curl", json!({"service": "api", "path": "/"})),
        ] {
            args["world"] = json!(bad);
            let (err, v) = call(&client, tool, args).await;
            assert!(err, "{tool} {bad}: {v}");
            assert_eq!(code(&v), "invalid_argument", "{tool} {bad}: {v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("invalid world name `{bad}`")),
                "{tool} {bad}: {v}"
            );
        }
    }
    // A name a world could have, but none has: not an empty "nothing waits".
    let (err, v) = call(&client, "approvals", json!({"world": "nope"})).await;
    assert!(err, "{v}");
    assert_eq!(code(&v), "not_found", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("worlds: w"),
        "{v}"
    );
    let (err, v) = call(&client, "approvals", json!({"world": "w"})).await;
    assert!(!err, "{v}");
    client.cancel().await.unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
