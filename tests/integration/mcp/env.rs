//! One name, one value: what the `env` tool and `binky env` give is what `exec`, `verify`
//! and the services' commands get, and `env` says which URL goes through the proxy.

use serde_json::json;

use super::{call, connect};
use crate::harness::*;

#[tokio::test]
async fn env_gives_each_name_the_value_exec_verify_and_the_services_get() {
    let env = Env::new(&format!(
        r#"
[project]
name = "onevalue"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true

[services.web]
cmd = "{SERVE}"
url = true
env = {{ API_URL = "${{api.url}}" }}

[agents]
verify = ["echo \"verify API_URL=$API_URL WEB_URL=$WEB_URL\""]
"#
    ));
    env.ok(&["up", "w"]);
    let direct = format!("http://localhost:{}", env.port_of("w", "api"));
    // The service that declares API_URL gets the direct address.
    let served = served_env(env.port_of("w", "web"));
    assert_eq!(served["API_URL"], direct.as_str());
    let client = connect(&env).await;
    let (err, e) = call(&client, "env", json!({"world": "w"})).await;
    assert!(!err, "{e}");
    assert_eq!(e["env"]["API_URL"], direct.as_str(), "{e}");
    // A name no service sets keeps the proxy URL; `urls` gives each through the proxy.
    let web_url = e["env"]["WEB_URL"].as_str().unwrap().to_owned();
    assert!(
        web_url.starts_with("http://web.w.onevalue.localhost"),
        "{e}"
    );
    assert_eq!(e["urls"]["web"], web_url.as_str(), "{e}");
    assert!(
        e["urls"]["api"]
            .as_str()
            .unwrap()
            .starts_with("http://api.w.onevalue.localhost"),
        "{e}"
    );
    // `binky env` gives the same.
    assert_eq!(serde_json::Value::Object(env.env_of("w")), e["env"]);
    // exec and verify see those values.
    let (err, x) = call(
        &client,
        "exec",
        json!({"world": "w", "command": ["sh", "-c", "echo \"API_URL=$API_URL WEB_URL=$WEB_URL\""]}),
    )
    .await;
    assert!(!err, "{x}");
    assert_eq!(
        x["stdout"],
        format!("API_URL={direct} WEB_URL={web_url}\n"),
        "{x}"
    );
    let (err, v) = call(&client, "verify", json!({"world": "w"})).await;
    assert!(!err, "{v}");
    assert_eq!(
        v["results"][0]["output_tail"],
        format!("verify API_URL={direct} WEB_URL={web_url}"),
        "{v}"
    );
    client.cancel().await.unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
