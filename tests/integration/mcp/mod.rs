//! `binky mcp`: rmcp's own client over the real `binky mcp` process, driving real worlds;
//! and `binky mcp install` for each client, into a temp HOME. Every structured answer is
//! checked against its tool's `outputSchema` (a small validator of the keywords binky's
//! schemas use: type, properties, required, anyOf, const, items, additionalProperties).

mod args;
mod edges;
mod env;
mod failures;
mod guards;
mod held;
mod inspector;
mod install;
mod names;
mod projects;
mod tools;

use std::path::Path;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use crate::harness::*;

/// A project with two services (`web` depends on `api`) and one verify command.
pub(crate) fn config() -> String {
    format!(
        r#"
[project]
name = "mcp"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true

[services.web]
cmd = "{SERVE}"
url = true
depends_on = ["api"]
env = {{ API = "${{api.url}}" }}

[agents]
verify = ["test -n \"$API_URL\" && echo api at $API_PORT"]
"#
    )
}

/// `binky mcp` in the test's repository, with the test's home.
pub(crate) async fn connect(env: &Env) -> RunningService<RoleClient, ()> {
    connect_in(env, &env.repo).await
}

/// `binky mcp` started in `dir`, with the test's home.
pub(crate) async fn connect_in(env: &Env, dir: &Path) -> RunningService<RoleClient, ()> {
    let cmd = tokio::process::Command::new(binky_bin()).configure(|c| {
        c.arg("mcp")
            .current_dir(dir)
            .env("BINKY_HOME", &env.home)
            .env_remove("BINKY_WORKTREE_ROOT");
    });
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

/// Call a tool: (is it an error, its structured content). Every answer is structured, has
/// `ok`, `ok: false` exactly when it is an error (then with `error: {code, message, fix}`),
/// and fits the tool's outputSchema.
pub(crate) async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> (bool, Value) {
    let args = args.as_object().unwrap().clone();
    let r = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap();
    let content = r
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("{tool}: no structured content: {r:?}"));
    let err = r.is_error == Some(true);
    assert_eq!(content["ok"], !err, "{tool}: ok is not !isError: {content}");
    if err {
        for k in ["code", "message", "fix"] {
            assert!(
                content["error"][k].as_str().is_some_and(|s| !s.is_empty()),
                "{tool}: error without {k}: {content}"
            );
        }
    }
    let tools = client.list_all_tools().await.unwrap();
    let schema = tools
        .iter()
        .find(|t| t.name == tool)
        .and_then(|t| t.output_schema.clone())
        .unwrap_or_else(|| panic!("{tool} has no outputSchema"));
    let schema = Value::Object((*schema).clone());
    if let Err(e) = validate(&schema, &content, "$") {
        panic!("{tool}: the answer does not fit its outputSchema: {e}\n{content}");
    }
    (err, content)
}

/// The error code of an error answer.
pub(crate) fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

fn type_fits(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        _ => false,
    }
}

/// Whether `v` fits `schema` (the keywords binky's output schemas use).
pub(crate) fn validate(schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    match &schema["type"] {
        Value::String(t) if !type_fits(t, v) => return Err(format!("{at}: not {t}: {v}")),
        Value::Array(ts) if !ts.iter().any(|t| type_fits(t.as_str().unwrap_or(""), v)) => {
            return Err(format!("{at}: none of {ts:?}: {v}"))
        }
        _ => {}
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            return Err(format!("{at}: not {c}"));
        }
    }
    if let Some(o) = v.as_object() {
        for r in schema["required"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap();
            if !o.contains_key(r) {
                return Err(format!("{at}: `{r}` is missing"));
            }
        }
        for (k, x) in o {
            if let Some(s) = schema["properties"].get(k) {
                validate(s, x, &format!("{at}.{k}"))?;
            } else if let Some(s) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                validate(s, x, &format!("{at}.{k}"))?;
            }
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            validate(items, x, &format!("{at}[{i}]"))?;
        }
    }
    if let Some(any) = schema["anyOf"].as_array() {
        let errs: Vec<String> = any
            .iter()
            .filter_map(|s| validate(s, v, at).err())
            .collect();
        if errs.len() == any.len() {
            return Err(format!("{at}: fits no anyOf branch: {}", errs.join("; ")));
        }
    }
    Ok(())
}

#[test]
fn the_schema_validator_can_fail() {
    let s = serde_json::json!({
        "type": "object",
        "properties": { "ok": {"type": "boolean"}, "n": {"type": "integer"} },
        "required": ["ok"],
        "anyOf": [
            { "properties": { "ok": { "const": true } }, "required": ["n"] },
            { "properties": { "ok": { "const": false } }, "required": ["error"] },
        ],
    });
    assert!(validate(&s, &serde_json::json!({"ok": true, "n": 1}), "$").is_ok());
    assert!(validate(&s, &serde_json::json!({"ok": true}), "$").is_err());
    assert!(validate(&s, &serde_json::json!({"ok": true, "n": "1"}), "$").is_err());
    assert!(validate(&s, &serde_json::json!({"ok": false}), "$").is_err());
    assert!(validate(&s, &serde_json::json!({"n": 1}), "$").is_err());
}
