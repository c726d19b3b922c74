//! `mqlite-edge-mcp`: mqlite's MCP server (mqlite-clients.md §3) for mqlite-edge. JSON-RPC
//! 2.0, one message per line on stdin/stdout, strictly in order; `initialize`, `ping`,
//! `tools/list` and `tools/call` over mqlite's 14 tools, each one broker RPC through
//! the `mqlite-edge-client` crate. Configured by `MQLITE_ENDPOINT` and `MQLITE_TOKEN`.

mod tools;

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

use mqlite_edge_client::Client;
use serde_json::{json, Map, Value};

/// Every tool call's bound, as the reference's HTTP client has it.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// What `initialize` answers when the client names no protocol version.
const DEFAULT_PROTOCOL: &str = "2024-11-05";

fn main() -> ExitCode {
    let endpoint = std::env::var("MQLITE_ENDPOINT").unwrap_or_default();
    let endpoint = match endpoint.trim() {
        "" => "http://127.0.0.1:6754",
        e => e,
    };
    let base = match http_base(endpoint) {
        Ok(base) => base,
        Err(why) => {
            eprintln!("mqlite-edge-mcp: invalid MQLITE_ENDPOINT {endpoint:?}: {why}");
            return ExitCode::from(1);
        }
    };
    let token = std::env::var("MQLITE_TOKEN").unwrap_or_default();
    let client = Client::new(&base, &token);
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some(reply) = answer(&client, line) else {
            continue;
        };
        if writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    ExitCode::SUCCESS
}

/// An `http(s)://` URL with a host, without trailing `/` (no DSNs here).
fn http_base(endpoint: &str) -> Result<String, &'static str> {
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .ok_or("want an http:// or https:// URL")?;
    if rest
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default()
        .is_empty()
    {
        return Err("no host");
    }
    Ok(endpoint.trim_end_matches('/').to_owned())
}

/// The reply to one line, or none: a notification (no `id`), `notifications/initialized`,
/// or a line that is not a request object is never answered.
fn answer(client: &Client, line: &str) -> Option<Value> {
    let Ok(Value::Object(message)) = serde_json::from_str::<Value>(line) else {
        return None;
    };
    let Some(Value::String(method)) = message.get("method") else {
        return None;
    };
    let id = message.get("id")?.clone();
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let outcome = match method.as_str() {
        "notifications/initialized" => return None,
        "initialize" => Ok(initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tools::list() })),
        "tools/call" => call(client, &params),
        other => Err((-32601, format!("method not found: {other}"))),
    };
    Some(match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    })
}

fn initialize(params: &Value) -> Value {
    let version = match params.get("protocolVersion") {
        Some(Value::String(v)) if !v.is_empty() => v.clone(),
        _ => DEFAULT_PROTOCOL.to_owned(),
    };
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "mqlite-edge-mcp", "version": mqlite_edge_client::VERSION},
    })
}

/// A tool result; only params that do not decode are a JSON-RPC error.
fn call(client: &Client, params: &Value) -> Result<Value, (i64, String)> {
    let invalid = || (-32602, "invalid params".to_owned());
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(invalid)?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => return Err(invalid()),
    };
    let (text, is_error) = match tools::request(name, &arguments) {
        None => (format!("unknown tool: {name}"), true),
        Some((route, body)) => match client.post_raw(&route, &body.to_string(), CALL_TIMEOUT) {
            Ok(answer) if answer.status < 300 => (answer.body, false),
            Ok(answer) => (
                format!("error: broker {}: {}", answer.status, answer.body.trim()),
                true,
            ),
            Err(e) => (format!("error: {e}"), true),
        },
    };
    Ok(json!({"content": [{"type": "text", "text": text}], "isError": is_error}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offline() -> Client {
        Client::new("http://127.0.0.1:1", "")
    }

    #[test]
    fn only_http_urls_with_a_host_are_accepted() {
        assert_eq!(http_base(" http://h:1/ ".trim()), Ok("http://h:1".into()));
        assert!(http_base("mqlite://h").is_err());
        assert!(http_base("https://").is_err());
    }

    #[test]
    fn notifications_and_garbage_get_no_reply() {
        let c = offline();
        assert_eq!(answer(&c, r#"{"jsonrpc":"2.0","method":"ping"}"#), None);
        assert_eq!(
            answer(
                &c,
                r#"{"jsonrpc":"2.0","id":1,"method":"notifications/initialized"}"#
            ),
            None
        );
        assert_eq!(answer(&c, "not json"), None);
        assert_eq!(answer(&c, r#"[{"id":1,"method":"ping"}]"#), None);
    }

    #[test]
    fn initialize_echoes_the_protocol_version_and_ids_come_back_verbatim() {
        let c = offline();
        let r = answer(
            &c,
            r#"{"id":"a","method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
        )
        .unwrap();
        assert_eq!(r["id"], "a");
        assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
        let r = answer(&c, r#"{"id":null,"method":"initialize"}"#).unwrap();
        assert_eq!(r["id"], Value::Null);
        assert_eq!(r["result"]["protocolVersion"], DEFAULT_PROTOCOL);
    }

    #[test]
    fn unknown_methods_bad_params_and_unknown_tools() {
        let c = offline();
        let r = answer(&c, r#"{"id":1,"method":"prompts/list"}"#).unwrap();
        assert_eq!(r["error"]["code"], -32601);
        let r = answer(&c, r#"{"id":2,"method":"tools/call","params":{"name":3}}"#).unwrap();
        assert_eq!(r["error"]["code"], -32602);
        let r = answer(
            &c,
            r#"{"id":3,"method":"tools/call","params":{"name":"nope"}}"#,
        )
        .unwrap();
        assert_eq!(r["result"]["isError"], true);
        assert_eq!(r["result"]["content"][0]["text"], "unknown tool: nope");
    }

    #[test]
    fn a_broker_that_does_not_answer_is_a_tool_error() {
        let c = offline();
        let r = answer(
            &c,
            r#"{"id":4,"method":"tools/call","params":{"name":"stats","arguments":{"queue":"q"}}}"#,
        )
        .unwrap();
        assert_eq!(r["result"]["isError"], true);
        assert!(r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("error: "));
    }
}
