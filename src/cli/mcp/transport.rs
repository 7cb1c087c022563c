//! The server's stdio: one JSON-RPC message a line each way, and an answer to every line a
//! client sends that rmcp would drop or answer with a bare protocol error.
//!
//! # Guarantees
//! - A line that is not JSON is answered with JSON-RPC's parse error (-32700), without an
//!   `id` (none could be read): MCP 2025-11-25 ("Error Responses": the id is left out when
//!   it could not be read) and JSON-RPC 2.0 both call for an answer, which tells a client
//!   with a broken encoder what went wrong instead of leaving its call to time out. The
//!   answer is a response, which no peer answers in turn: it cannot start a storm.
//! - A `tools/call` whose `params` do not have a `name` string and an `arguments` object
//!   (an array, a string, a number) is answered as a tool result in the one error shape
//!   (`invalid_argument`), like any other bad argument, so the model reads the fix.
//! - Other JSON that is no MCP message is -32600 (invalid request) or, for a known method
//!   with parameters that do not fit, -32602 (invalid params), with the request's id when it
//!   has one. A notification (no id) is never answered.
//! - Each message is written whole under one lock: answers of concurrent calls never
//!   interleave on stdout.

use std::sync::Arc;

use rmcp::model::{ErrorData, RequestId, ServerJsonRpcMessage, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::RoleServer;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use super::errors::ToolError;

type Writer<W> = Arc<Mutex<Option<W>>>;

/// Lines in from `R`, lines out to `W`.
pub struct Lines<R, W> {
    read: BufReader<R>,
    /// The line being read: kept across calls, so a read cancelled by the service's
    /// `select!` resumes where it stopped.
    line: Vec<u8>,
    write: Writer<W>,
}

impl<R, W> Lines<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport over `read` and `write` (stdin and stdout).
    pub fn new(read: R, write: W) -> Self {
        Lines {
            read: BufReader::new(read),
            line: Vec::new(),
            write: Arc::new(Mutex::new(Some(write))),
        }
    }

    /// Write `msg` in a task of its own: a `receive` cancelled meanwhile never leaves half
    /// a line on the channel.
    fn answer(&self, msg: &ServerJsonRpcMessage) {
        if let Some(bytes) = encode(msg) {
            tokio::spawn(write_line(self.write.clone(), bytes));
        }
    }
}

fn encode<T: serde::Serialize>(msg: &T) -> Option<Vec<u8>> {
    let mut bytes = serde_json::to_vec(msg).ok()?;
    bytes.push(b'\n');
    Some(bytes)
}

async fn write_line<W: AsyncWrite + Unpin>(
    write: Writer<W>,
    bytes: Vec<u8>,
) -> std::io::Result<()> {
    let mut w = write.lock().await;
    let Some(w) = w.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the transport is closed",
        ));
    };
    w.write_all(&bytes).await?;
    w.flush().await
}

/// What to do with one line from the client.
#[derive(Debug)]
pub enum Line {
    /// Hand it to the service.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answer it here.
    Answer(Box<ServerJsonRpcMessage>),
    /// Nothing (an empty line, a notification rmcp does not know).
    Skip,
}

/// The id of a request, when it has one that can be read.
fn id_of(v: &Value) -> Option<RequestId> {
    match v.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => serde_json::from_value(id.clone()).ok(),
        _ => None,
    }
}

/// Why a `tools/call`'s params are not a call of a tool (none: they are).
fn bad_call(params: Option<&Value>) -> Option<ToolError> {
    let fix = "send params {\"name\": TOOL, \"arguments\": {…}}: `arguments` is a JSON object of the tool's inputSchema (tools/list shows it)";
    let Some(params) = params.and_then(Value::as_object) else {
        return Some(ToolError::invalid(
            format!(
                "the params of tools/call are {}, not an object with `name` and `arguments`",
                kind(params)
            ),
            fix,
        ));
    };
    let tool = match params.get("name") {
        Some(Value::String(n)) => n.clone(),
        other => {
            return Some(ToolError::invalid(
                format!(
                    "tools/call names no tool: `name` is {}, not a string",
                    kind(other)
                ),
                fix,
            ))
        }
    };
    match params.get("arguments") {
        None | Some(Value::Null) | Some(Value::Object(_)) => None,
        other => {
            let tool = super::errors::shown(&tool);
            Some(ToolError::invalid(
                format!("the arguments of {tool} are {}, not an object", kind(other)),
                format!("pass `arguments` as a JSON object of {tool}'s inputSchema, e.g. {{\"world\": \"my-task\"}} (tools/list shows it)"),
            ))
        }
    }
}

fn kind(v: Option<&Value>) -> &'static str {
    match v {
        None => "missing",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "a boolean",
        Some(Value::Number(_)) => "a number",
        Some(Value::String(_)) => "a string",
        Some(Value::Array(_)) => "an array",
        Some(Value::Object(_)) => "an object",
    }
}

/// Read one line from the client.
pub fn classify(line: &[u8]) -> Line {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Line::Answer(Box::new(ServerJsonRpcMessage::error(
                ErrorData::parse_error(
                    format!(
                    "Parse error: the line is not JSON ({e}); send one JSON-RPC message per line"
                ),
                    None,
                ),
                None,
            )))
        }
    };
    let id = id_of(&v);
    let method = v.get("method").and_then(Value::as_str);
    if let (Some(id), Some("tools/call")) = (&id, method) {
        if let Some(e) = bad_call(v.get("params")) {
            let result = ServerResult::CallToolResult(e.result());
            return Line::Answer(Box::new(ServerJsonRpcMessage::response(result, id.clone())));
        }
    }
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(v.clone()) {
        Ok(m) => Line::Message(Box::new(m)),
        // A notification is never answered, whatever it is.
        Err(_) if id.is_none() && method.is_some() && v.get("id").is_none() => Line::Skip,
        Err(e) => {
            let error = match (method, v.get("jsonrpc").and_then(Value::as_str)) {
                (Some(m), Some("2.0")) if id.is_some() => {
                    ErrorData::invalid_params(format!("Invalid params of `{m}`: {e}"), None)
                }
                _ => ErrorData::invalid_request(
                    format!("Invalid request: not a JSON-RPC 2.0 message of MCP ({e})"),
                    None,
                ),
            };
            Line::Answer(Box::new(ServerJsonRpcMessage::error(error, id)))
        }
    }
}

impl<R, W> rmcp::transport::Transport<RoleServer> for Lines<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let bytes = encode(&item);
        async move {
            match bytes {
                Some(b) => write_line(write, b).await,
                None => Err(std::io::Error::other("cannot encode the message")),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read.read_until(b'\n', &mut self.line).await {
                // The client hung up; a last line without its newline is no message.
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let line = std::mem::take(&mut self.line);
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            match classify(body) {
                Line::Message(m) => return Some(*m),
                Line::Answer(a) => self.answer(&a),
                Line::Skip => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut w = self.write.lock().await;
        if let Some(mut w) = w.take() {
            w.flush().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        match classify(line.as_bytes()) {
            Line::Answer(a) => serde_json::to_value(&*a).unwrap(),
            other => panic!("{line}: not answered here: {other:?}"),
        }
    }

    #[test]
    fn lines_that_are_no_message_are_answered_here() {
        let a = answer("not json");
        assert_eq!(a["error"]["code"], -32700, "{a}");
        assert!(a.get("id").is_none(), "{a}");
        let a = answer("[1, 2]");
        assert_eq!(a["error"]["code"], -32600, "{a}");
        let a = answer(r#"{"jsonrpc":"2.0","id":8}"#);
        assert_eq!(a["error"]["code"], -32600, "{a}");
        assert_eq!(a["id"], 8, "{a}");
        let a = answer(r#"{"jsonrpc":"2.0","id":"x","method":"initialize","params":3}"#);
        assert_eq!(a["error"]["code"], -32602, "{a}");
        assert_eq!(a["id"], "x", "{a}");
        for (params, says) in [
            (r#"{"name":"list","arguments":[1]}"#, "are an array"),
            (r#"{"name":"list","arguments":"x"}"#, "are a string"),
            (r#"{"name":3}"#, "`name` is a number"),
            ("5", "are a number"),
            ("null", "are null"),
        ] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{params}}}"#);
            let a = answer(&line);
            assert_eq!(a["id"], 4, "{a}");
            let r = &a["result"];
            assert_eq!(r["isError"], true, "{a}");
            let c = &r["structuredContent"];
            assert_eq!(c["ok"], false, "{a}");
            assert_eq!(c["error"]["code"], "invalid_argument", "{a}");
            assert!(
                c["error"]["message"].as_str().unwrap().contains(says),
                "{says}: {a}"
            );
        }
    }

    #[test]
    fn messages_go_on_and_notifications_are_never_answered() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list"}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"no/such"}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r",
        ] {
            assert!(
                matches!(classify(line.as_bytes()), Line::Message(_)),
                "{line}"
            );
        }
        for line in [
            "",
            "  ",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}"#,
        ] {
            assert!(matches!(classify(line.as_bytes()), Line::Skip), "{line}");
        }
    }
}
