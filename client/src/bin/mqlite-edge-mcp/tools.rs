//! mqlite's 14 MCP tools (mqlite-clients.md §3.4): their JSON schemas, and the broker
//! request each turns its arguments into. Arguments are coerced, never validated: a
//! missing or mistyped one is sent as its zero value and the broker's answer decides.

use base64::Engine as _;
use serde_json::{json, Map, Value};

const Q: &str = "/mqlite.v1.QueueService/";
const A: &str = "/mqlite.v1.AdminService/";

#[derive(Clone, Copy)]
enum Kind {
    Text,
    Integer,
    Integers,
}

/// One argument: name, type, required, description.
type Arg = (&'static str, Kind, bool, &'static str);

const QUEUE: Arg = ("queue", Kind::Text, true, "queue name");
const SEQ: Arg = (
    "seq_number",
    Kind::Integer,
    true,
    "the message's seq number",
);
const TOKEN: Arg = (
    "lock_token",
    Kind::Text,
    true,
    "the lock token from receive",
);

struct Tool {
    name: &'static str,
    description: &'static str,
    args: &'static [Arg],
    route: &'static str,
}

const TOOLS: &[Tool] = &[
    Tool { name: "list_queues", description: "List every queue with its configuration.", args: &[], route: "AdminService/ListQueues" },
    Tool { name: "create_queue", description: "Create a queue with default configuration (an existing queue's configuration is reset to defaults).", args: &[("name", Kind::Text, true, "queue name")], route: "AdminService/CreateQueue" },
    Tool { name: "send", description: "Send one text message to a queue or topic.", args: &[QUEUE, ("body", Kind::Text, true, "message body (text)"), ("message_id", Kind::Text, false, "message id for duplicate detection"), ("group_id", Kind::Text, false, "group id (required on group_fifo queues)")], route: "QueueService/Send" },
    Tool { name: "receive", description: "Receive messages with a lock; settle each with complete, abandon, reject or defer. Bodies come back base64-encoded.", args: &[QUEUE, ("max_messages", Kind::Integer, false, "most messages (default 1, at most 256)"), ("wait_time_ms", Kind::Integer, false, "long-poll wait in ms (default 0, at most 20000)")], route: "QueueService/Receive" },
    Tool { name: "complete", description: "Complete (delete) a received message.", args: &[QUEUE, SEQ, TOKEN], route: "QueueService/Complete" },
    Tool { name: "abandon", description: "Give a received message back for redelivery.", args: &[QUEUE, SEQ, TOKEN, ("delay_ms", Kind::Integer, false, "redeliver after this many ms (default 0)")], route: "QueueService/Abandon" },
    Tool { name: "renew", description: "Extend a received message's lock by the queue's lock duration.", args: &[QUEUE, SEQ, TOKEN], route: "QueueService/Renew" },
    Tool { name: "defer", description: "Set a received message aside until receive_deferred names it.", args: &[QUEUE, SEQ, TOKEN], route: "QueueService/Defer" },
    Tool { name: "receive_deferred", description: "Receive deferred messages by seq number (locked again, with new lock tokens).", args: &[QUEUE, ("seq_numbers", Kind::Integers, true, "seq numbers of deferred messages")], route: "QueueService/ReceiveDeferred" },
    Tool { name: "reject", description: "Move a received message to the dead-letter queue.", args: &[QUEUE, SEQ, TOKEN, ("reason", Kind::Text, false, "dead-letter reason")], route: "QueueService/Reject" },
    Tool { name: "peek", description: "Look at messages without locking them. Bodies come back base64-encoded.", args: &[QUEUE, ("state", Kind::Text, false, "active, locked, deferred, scheduled or dead_lettered (default all)"), ("max", Kind::Integer, false, "most messages (default 32, at most 1000)")], route: "QueueService/Peek" },
    Tool { name: "stats", description: "Counts of a queue's messages by state.", args: &[QUEUE], route: "QueueService/Stats" },
    Tool { name: "redrive", description: "Move dead letters back to their queue.", args: &[QUEUE, ("max", Kind::Integer, false, "most messages (default 0 = all)")], route: "AdminService/Redrive" },
    Tool { name: "purge", description: "Delete dead letters (without max: the whole dead-letter queue).", args: &[QUEUE, ("max", Kind::Integer, false, "most messages (default 0 = all)")], route: "AdminService/Purge" },
];

/// `tools/list`'s entries, in mqlite's order.
pub fn list() -> Vec<Value> {
    TOOLS
        .iter()
        .map(|tool| {
            let properties: Map<String, Value> = tool
                .args
                .iter()
                .map(|(name, kind, _, description)| {
                    let schema = match kind {
                        Kind::Text => json!({"type": "string", "description": description}),
                        Kind::Integer => json!({"type": "integer", "description": description}),
                        Kind::Integers => json!({
                            "type": "array", "items": {"type": "integer"}, "description": description
                        }),
                    };
                    ((*name).to_owned(), schema)
                })
                .collect();
            let required: Vec<&str> = tool
                .args
                .iter()
                .filter(|a| a.2)
                .map(|a| a.0)
                .collect();
            let mut schema = json!({"type": "object", "properties": properties});
            if !required.is_empty() {
                schema["required"] = json!(required);
            }
            json!({"name": tool.name, "description": tool.description, "inputSchema": schema})
        })
        .collect()
}

/// A string argument; anything else counts as empty.
fn text(args: &Map<String, Value>, name: &str) -> String {
    args.get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// An integer argument: a JSON number, fractions truncated toward zero; else 0.
fn integer(args: &Map<String, Value>, name: &str) -> i64 {
    match args.get(name) {
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f.trunc() as i64))
            .unwrap_or(0),
        _ => 0,
    }
}

/// Sets `key` to `value` unless it is empty or zero.
fn optional(body: &mut Value, key: &str, value: Value) {
    let empty = value == json!("") || value == json!(0);
    if !empty {
        body[key] = value;
    }
}

/// The route and request body of a call to `name`, or none for an unknown tool.
pub fn request(name: &str, args: &Map<String, Value>) -> Option<(String, Value)> {
    let tool = TOOLS.iter().find(|t| t.name == name)?;
    let route = tool
        .route
        .replace("QueueService/", Q)
        .replace("AdminService/", A);
    let queue = text(args, "queue");
    let settle = || {
        json!({
            "queue": queue,
            "seq_number": integer(args, "seq_number"),
            "lock_token": text(args, "lock_token"),
        })
    };
    let mut body = match name {
        "list_queues" => json!({}),
        "create_queue" => json!({"name": text(args, "name"), "config": {}}),
        "send" => {
            let mut message = json!({});
            let encoded = base64::engine::general_purpose::STANDARD.encode(text(args, "body"));
            optional(&mut message, "body", json!(encoded));
            optional(&mut message, "message_id", json!(text(args, "message_id")));
            optional(&mut message, "group_id", json!(text(args, "group_id")));
            json!({"queue": queue, "messages": [message]})
        }
        "complete" | "renew" | "defer" | "abandon" | "reject" => settle(),
        "receive_deferred" => {
            let seqs: Option<Vec<i64>> =
                args.get("seq_numbers")
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .filter_map(|v| {
                                v.as_i64().or_else(|| v.as_f64().map(|f| f.trunc() as i64))
                            })
                            .collect()
                    });
            json!({"queue": queue, "seq_numbers": seqs})
        }
        _ => json!({"queue": queue}),
    };
    for (arg, key) in [
        ("max_messages", "max_messages"),
        ("wait_time_ms", "wait_time_ms"),
        ("delay_ms", "delay_ms"),
        ("reason", "dead_letter_reason"),
        ("state", "state"),
        ("max", "max"),
    ] {
        if tool.args.iter().any(|a| a.0 == arg) {
            let value = match args.get(arg) {
                Some(Value::String(_)) if arg == "reason" || arg == "state" => {
                    json!(text(args, arg))
                }
                _ if arg == "reason" || arg == "state" => json!(""),
                _ => json!(integer(args, arg)),
            };
            optional(&mut body, key, value);
        }
    }
    Some((route, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn fourteen_tools_in_mqlites_order_with_schemas() {
        let tools = list();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(
            names,
            [
                "list_queues",
                "create_queue",
                "send",
                "receive",
                "complete",
                "abandon",
                "renew",
                "defer",
                "receive_deferred",
                "reject",
                "peek",
                "stats",
                "redrive",
                "purge"
            ]
        );
        assert!(tools[0]["inputSchema"].get("required").is_none());
        assert_eq!(
            tools[8]["inputSchema"]["properties"]["seq_numbers"]["items"]["type"],
            "integer"
        );
        assert_eq!(
            tools[2]["inputSchema"]["required"],
            json!(["queue", "body"])
        );
    }

    #[test]
    fn arguments_become_the_broker_request_coerced_not_validated() {
        let (route, body) = request(
            "send",
            &args(json!({"queue": "q", "body": "hi", "group_id": 5})),
        )
        .unwrap();
        assert_eq!(route, "/mqlite.v1.QueueService/Send");
        assert_eq!(body, json!({"queue": "q", "messages": [{"body": "aGk="}]}));
        let (_, body) = request(
            "abandon",
            &args(json!({"queue": "q", "seq_number": 3.9, "lock_token": "t", "delay_ms": "5"})),
        )
        .unwrap();
        assert_eq!(
            body,
            json!({"queue": "q", "seq_number": 3, "lock_token": "t"})
        );
        let (_, body) = request("reject", &args(json!({"reason": "bad"}))).unwrap();
        assert_eq!(body["dead_letter_reason"], "bad");
        let (_, body) = request(
            "receive_deferred",
            &args(json!({"queue": "q", "seq_numbers": [1, "x", 2]})),
        )
        .unwrap();
        assert_eq!(body["seq_numbers"], json!([1, 2]));
        let (_, body) = request("receive_deferred", &args(json!({"queue": "q"}))).unwrap();
        assert_eq!(body["seq_numbers"], Value::Null);
        let (route, body) = request("purge", &args(json!({"queue": "q"}))).unwrap();
        assert_eq!(
            (route.as_str(), body),
            ("/mqlite.v1.AdminService/Purge", json!({"queue": "q"}))
        );
        assert!(request("nope", &Map::new()).is_none());
    }
}
