//! Every tool's `outputSchema`: an object with `ok`; when `ok` is true, the tool's own
//! fields; when false, `error: {code, message, fix}` (and whatever else the tool adds).

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{json, Value};

/// `{code, message, fix}`.
fn error() -> Value {
    json!({
        "type": "object",
        "properties": {
            "code": { "type": "string" },
            "message": { "type": "string" },
            "fix": { "type": "string" },
        },
        "required": ["code", "message", "fix"],
    })
}

/// The schema of a tool whose success carries `properties`, `required` of them always.
pub fn output(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut props = properties.as_object().cloned().unwrap_or_default();
    props.insert("ok".into(), json!({ "type": "boolean" }));
    props.insert("error".into(), error());
    let v = json!({
        "type": "object",
        "properties": props,
        "required": ["ok"],
        "anyOf": [
            { "properties": { "ok": { "const": true } }, "required": required },
            { "properties": { "ok": { "const": false } }, "required": ["error"] },
        ],
    });
    match v {
        Value::Object(o) => Arc::new(o),
        _ => unreachable!("built as an object"),
    }
}

fn s() -> Value {
    json!({ "type": "string" })
}
fn obj() -> Value {
    json!({ "type": "object" })
}
fn int() -> Value {
    json!({ "type": "integer" })
}
fn arr(items: Value) -> Value {
    json!({ "type": "array", "items": items })
}
fn strings() -> Value {
    json!({ "type": "object", "additionalProperties": { "type": "string" } })
}

/// One world in `list`'s compact form.
fn compact_world() -> Value {
    json!({
        "type": "object",
        "properties": {
            "world": s(), "project": s(), "state": s(), "urls": strings(),
            "services": strings(), "worktree": { "type": ["string", "null"] },
        },
        "required": ["world", "project", "state", "urls"],
    })
}

pub fn list() -> Arc<JsonObject> {
    output(
        json!({ "worlds": arr(compact_world()), "summary": s() }),
        &["worlds", "summary"],
    )
}

pub fn status() -> Arc<JsonObject> {
    output(
        json!({
            "summary": s(), "world": s(), "project": s(), "state": s(),
            "name": s(), "services": { "type": ["array", "object"] },
            "conditions": arr(obj()),
            "worlds": arr(obj()), "daemon": { "type": ["object", "null"] },
            "urls": strings(),
        }),
        &["summary"],
    )
}

/// `up`, `down`, `reload`, `wait`: the world and its state afterwards.
pub fn lifecycle() -> Arc<JsonObject> {
    output(
        json!({
            "world": s(), "project": s(), "state": s(), "summary": s(),
            "urls": strings(), "output": s(), "created": { "type": "boolean" },
            "status": obj(),
        }),
        &["world", "state", "summary"],
    )
}

pub fn env() -> Arc<JsonObject> {
    output(
        json!({ "env": strings(), "urls": strings(), "world": s() }),
        &["env", "urls"],
    )
}

pub fn logs() -> Arc<JsonObject> {
    let line = json!({
        "type": "object",
        "properties": { "service": s(), "line": s() },
        "required": ["line"],
    });
    output(
        json!({ "lines": arr(line), "returned": int(), "limit": int(), "note": s() }),
        &["lines", "returned", "limit", "note"],
    )
}

pub fn events() -> Arc<JsonObject> {
    output(
        json!({ "project": s(), "removed": { "type": "boolean" }, "events": arr(obj()) }),
        &["events"],
    )
}

pub fn verify() -> Arc<JsonObject> {
    output(
        json!({ "world": s(), "results": arr(obj()) }),
        &["world", "results"],
    )
}

pub fn curl() -> Arc<JsonObject> {
    output(
        json!({
            "status": { "type": ["integer", "null"] }, "body": s(),
            "json": {},
        }),
        &["status", "body"],
    )
}

pub fn exec() -> Arc<JsonObject> {
    output(
        json!({
            "exit_code": int(), "stdout": s(), "stderr": s(),
            "truncated": { "type": "boolean" }, "seconds": { "type": "number" },
        }),
        &["exit_code", "stdout", "stderr", "truncated", "seconds"],
    )
}

pub fn check() -> Arc<JsonObject> {
    output(
        json!({
            "file": s(), "errors": int(), "warnings": int(), "findings": arr(obj()),
        }),
        &["file", "errors", "warnings", "findings"],
    )
}

pub fn apply() -> Arc<JsonObject> {
    let world = json!({
        "type": "object",
        "properties": {
            "world": s(), "state": s(), "plan": { "type": ["object", "string", "null"] },
            "error": { "type": ["string", "null"] },
        },
        "required": ["world", "state"],
    });
    output(
        json!({ "worlds": arr(world), "dry_run": { "type": "boolean" } }),
        &["worlds", "dry_run"],
    )
}

pub fn approvals() -> Arc<JsonObject> {
    let item = json!({
        "type": "object",
        "properties": {
            "project": s(), "worlds": arr(s()), "what": s(), "command": s(), "key": s(),
            "for_the_person": s(),
            "asked_by": { "type": "string", "enum": ["up", "verify", "exec"] },
        },
        "required": ["project", "worlds", "what", "command", "for_the_person", "asked_by"],
    });
    output(
        json!({
            "approvals_on": { "type": "boolean" }, "waiting": arr(item), "message": s(),
        }),
        &["approvals_on", "waiting", "message"],
    )
}

pub fn remove() -> Arc<JsonObject> {
    output(
        json!({ "world": s(), "project": s(), "output": s() }),
        &["world", "output"],
    )
}
