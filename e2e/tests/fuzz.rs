//! Fuzz every route of the live Worker through workerd (issue 9 item 7):
//! random and mutated JSON, wrong types, huge numbers, deep nesting, invalid
//! UTF-8, truncated and oversize bodies, odd headers, methods and paths.
//!
//! Every answer must be a non-5xx (no database fault is injected here) and
//! every error a contract envelope: on the Connect-JSON routes exactly
//! `{"code","message"}` with the status the error table gives that code; on
//! the pgmq routes `{"error","detail"}` with the status of the pgmq error
//! table, or FastAPI's `{"detail":…}` for a 422, 404 or 405 (the only 5xx
//! allowed is the documented `501 not_supported` of a `conditional` read). The Worker's log must show no
//! panic, and the isolate must serve afterwards.
//!
//! Seeded (`MQLITE_FUZZ_SEED`, printed first and on failure), bounded by
//! `MQLITE_FUZZ_CASES` (default 3000) and three minutes. Cases are made
//! from the seed alone; `MQLITE_FUZZ_THREADS=1` also replays their order.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mqlite_e2e::rng::Rng;
use mqlite_e2e::{Stack, StackOptions, Tools};
use serde_json::{json, Map, Value};

/// The request cap on the fuzzed Worker: small, so oversize bodies are cheap.
const MAX_REQUEST_BYTES: usize = 262_144;
const MAX_MESSAGE_BYTES: usize = 65_536;
const TIME_LIMIT: Duration = Duration::from_secs(180);

/// The wire error table: the status of every error code (written from the spec, not
/// taken from the code under test).
fn status_of(code: &str) -> Option<u16> {
    Some(match code {
        "invalid_argument" | "group_required" => 400,
        "unauthenticated" => 401,
        "permission_denied" => 403,
        "not_found" => 404,
        "unimplemented" => 405,
        "already_exists" | "name_conflict" | "key_conflict" | "lock_lost" | "queue_changed"
        | "queue_not_empty" => 409,
        "message_too_large" => 413,
        "canceled" => 499,
        "internal" => 500,
        "outcome_unknown" | "unavailable" => 503,
        _ => return None,
    })
}

/// The pgmq dialect's error table (docs/pgmq.md, "Errors"), written from
/// the contract, not taken from the code under test.
fn pgmq_status_of(code: &str) -> Option<u16> {
    Some(match code {
        "invalid_request" | "poll_limit_exceeded" => 400,
        "unauthorized" => 401,
        "queue_not_found" | "message_not_found" => 404,
        "payload_too_large" => 413,
        "send_failed" | "internal_error" => 500,
        "not_supported" => 501,
        "dependency_unavailable" | "outcome_unknown" => 503,
        _ => return None,
    })
}

/// Every route of the pgmq dialect, as `pgmq:METHOD PATH`, with a request
/// that is valid or nearly so.
fn pgmq_routes() -> Vec<(&'static str, Value)> {
    vec![
        ("pgmq:PUT /v1/queues/fzp", json!({})),
        ("pgmq:GET /v1/queues", json!({})),
        ("pgmq:DELETE /v1/queues/fzp2", json!({})),
        ("pgmq:POST /v1/queues/fzp2/purge", json!({})),
        ("pgmq:GET /v1/metrics", json!({})),
        ("pgmq:GET /v1/queues/fzp/metrics", json!({})),
        (
            "pgmq:POST /v1/queues/fzp/messages",
            json!({"message":{"a":1},"headers":{"h":"v"},"delay":0}),
        ),
        (
            "pgmq:POST /v1/queues/fzp/messages/batch",
            json!({"messages":[{"a":1},{"b":[2]}],"headers":[{},{}],"delay":0}),
        ),
        ("pgmq:POST /v1/queues/fzp/read", json!({"vt":30,"qty":2})),
        (
            "pgmq:POST /v1/queues/fzp/read-poll",
            json!({"vt":30,"qty":1,"max_poll_seconds":1,"poll_interval_ms":100}),
        ),
        ("pgmq:POST /v1/queues/fzp/pop", json!({"qty":1})),
        (
            "pgmq:POST /v1/queues/fzp/messages/delete",
            json!({"msg_ids":[1,2]}),
        ),
        (
            "pgmq:POST /v1/queues/fzp/messages/archive",
            json!({"msg_ids":[1]}),
        ),
        ("pgmq:DELETE /v1/queues/fzp/messages/1", json!({})),
        ("pgmq:POST /v1/queues/fzp/messages/1/archive", json!({})),
        ("pgmq:POST /v1/queues/fzp/messages/1/vt", json!({"vt":10})),
        ("pgmq:GET /health", json!({})),
        ("pgmq:GET /v1/ready", json!({})),
    ]
}

const KEY_ID: &str = "0123456789abcdef0123456789abcdef";

/// Every RPC of the Connect-JSON dialect with a request that is valid or nearly so.
fn routes() -> Vec<(&'static str, Value)> {
    let token =
        json!({"queue":"fz","seq_number":1,"lock_token":"00112233445566778899aabbccddeeff"});
    let with = |extra: Value| {
        let mut v = token.clone();
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        v
    };
    vec![
        (
            "QueueService/Send",
            json!({"queue":"fz","messages":[{"body":"aGk=","message_id":"a",
            "group_id":"g","correlation_id":"c","subject":"s","content_type":"text/plain",
            "properties":{"k":"v"},"ttl_ms":60000}]}),
        ),
        (
            "QueueService/Receive",
            json!({"queue":"fz","max_messages":2,"wait_time_ms":0,
            "receive_attempt_id":"r1"}),
        ),
        ("QueueService/Complete", token.clone()),
        (
            "QueueService/CompleteBatch",
            json!({"queue":"fz","messages":[
            {"seq_number":1,"lock_token":"00112233445566778899aabbccddeeff"}]}),
        ),
        (
            "QueueService/RenewBatch",
            json!({"queue":"fz","messages":[
            {"seq_number":1,"lock_token":"00112233445566778899aabbccddeeff"}]}),
        ),
        ("QueueService/Abandon", with(json!({"delay_ms":10}))),
        ("QueueService/Reject", with(json!({"reason":"r"}))),
        ("QueueService/Defer", token.clone()),
        (
            "QueueService/ReceiveDeferred",
            json!({"queue":"fz","seq_numbers":[1,2]}),
        ),
        ("QueueService/Renew", token.clone()),
        (
            "QueueService/Schedule",
            json!({"queue":"fz","messages":[{"body":"aGk="}],
            "scheduled_enqueue_time_ms":4102444800000i64}),
        ),
        ("QueueService/Cancel", json!({"queue":"fz","seq_number":1})),
        (
            "QueueService/Peek",
            json!({"queue":"fz","max":5,"state":"active"}),
        ),
        ("QueueService/Stats", json!({"queue":"fz"})),
        (
            "AdminService/CreateQueue",
            json!({"name":"fz2","config":{"lock_duration_ms":30000,
            "ordering_mode":"group_fifo","kind":"queue","max_delivery_count":3}}),
        ),
        (
            "AdminService/Subscribe",
            json!({"topic":"fzt","name":"fzs",
            "filter":{"expr":"subject = 'a'"}}),
        ),
        ("AdminService/ListQueues", json!({})),
        ("AdminService/ListSubscriptions", json!({"topic":"fzt"})),
        (
            "AdminService/TestFilter",
            json!({"expr":"subject = 'a' AND properties.k = 'v'",
            "message":{"subject":"a","properties":{"k":"v"},"body":"aGk="}}),
        ),
        (
            "AdminService/Redrive",
            json!({"queue":"fz","max":1,"older_than_ms":0}),
        ),
        ("AdminService/Purge", json!({"queue":"fz2","max":1})),
        ("AdminService/Status", json!({})),
        (
            "AdminService/DeleteQueue",
            json!({"name":"fz3","generation":1}),
        ),
        ("AdminService/Observe", json!({})),
        (
            "AuthService/CreateKey",
            json!({"id":KEY_ID,"name":"k","permissions":["send"],
            "expires_at_ms":4102444800000i64}),
        ),
        ("AuthService/ListKeys", json!({"limit":5,"sort":"id"})),
        ("AuthService/RevokeKey", json!({"id":KEY_ID})),
    ]
}

const ODD_PATHS: &[&str] = &[
    "/",
    "/healthz",
    "/metrics",
    "/ui",
    "/ui/x",
    "/mqlite.v1.QueueService/",
    "/mqlite.v1.QueueService/Send/",
    "/mqlite.v1.QueueService/send",
    "/mqlite.v1.NopeService/Send",
    "//mqlite.v1.QueueService/Send",
    "/mqlite.v1.QueueService/Send?x=1",
    "/mqlite.v1.QueueService/Send%00",
    "/%2e%2e/%2e%2e/etc/passwd",
    "/mqlite.v1.AuthService/CreateKey/../ListKeys",
];

/// Methods other than POST. An unregistered method (`FOO`) never reaches
/// the Worker: workerd itself answers it `501`.
const METHODS: &[&str] = &["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"];

/// One generated request.
#[derive(Debug)]
struct Case {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Case {
    fn describe(&self) -> String {
        let preview: String = String::from_utf8_lossy(&self.body)
            .chars()
            .take(300)
            .collect();
        format!(
            "{} {} headers {:?} body ({} bytes) {preview:?}",
            self.method,
            self.path,
            self.headers,
            self.body.len()
        )
    }
}

fn random_scalar(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(""),
        3 => json!("fz"),
        4 => json!(-1),
        5 => json!(0),
        6 => json!(i64::MAX),
        7 => json!(i64::MIN),
        8 => json!(u64::MAX),
        9 => json!(1.5),
        10 => json!("\u{0}\u{202e}é😀"),
        _ => json!("x".repeat(1 + rng.below(5000))),
    }
}

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    if depth == 0 || rng.one_in(3) {
        return random_scalar(rng);
    }
    if rng.one_in(2) {
        Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth - 1))
                .collect(),
        )
    } else {
        let keys = [
            "queue",
            "messages",
            "body",
            "seq_number",
            "lock_token",
            "name",
            "zz",
        ];
        let mut map = Map::new();
        for _ in 0..rng.below(4) {
            map.insert(rng.pick(&keys).to_string(), random_value(rng, depth - 1));
        }
        Value::Object(map)
    }
}

/// Replaces, removes or adds one member somewhere in `value`.
fn mutate(rng: &mut Rng, value: &mut Value) {
    match value {
        Value::Object(map) if !map.is_empty() && rng.one_in(3) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = rng.pick(&keys).clone();
            match rng.below(3) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    map.insert(key, random_value(rng, 2));
                }
                _ => {
                    map.insert(format!("{key}_unknown"), random_value(rng, 1));
                }
            }
        }
        Value::Object(map) if !map.is_empty() => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = rng.pick(&keys).clone();
            if let Some(child) = map.get_mut(&key) {
                mutate(rng, child);
            }
        }
        Value::Array(items) if !items.is_empty() && !rng.one_in(4) => {
            let i = rng.below(items.len());
            mutate(rng, &mut items[i]);
        }
        Value::Array(items) if rng.one_in(2) => {
            let copy = items.first().cloned().unwrap_or(Value::Null);
            items.extend(std::iter::repeat_n(copy, 1 + rng.below(600)));
        }
        other => *other = random_value(rng, 2),
    }
}

/// Text-level damage JSON values cannot express.
fn damage_text(rng: &mut Rng, text: String) -> Vec<u8> {
    let huge = [
        "1e999",
        "-1e999",
        "123456789012345678901234567890",
        "-0",
        "1.0",
        "0x10",
        "NaN",
    ];
    match rng.below(5) {
        // A number token replaced by one no integer holds.
        0 => {
            let at = text.find(|c: char| c.is_ascii_digit());
            match at {
                Some(i) => {
                    let end = text[i..]
                        .find(|c: char| !c.is_ascii_digit())
                        .map_or(text.len(), |e| i + e);
                    format!("{}{}{}", &text[..i], rng.pick(&huge), &text[end..]).into_bytes()
                }
                None => text.into_bytes(),
            }
        }
        // Invalid UTF-8 inside a string.
        1 => {
            let mut bytes = text.into_bytes();
            if let Some(i) = bytes.iter().position(|b| *b == b'"') {
                bytes.splice(i + 1..i + 1, [0xff, 0xc3, 0x28, 0xed, 0xa0, 0x80]);
            }
            bytes
        }
        // Truncated.
        2 => {
            let mut bytes = text.into_bytes();
            bytes.truncate(rng.below(bytes.len().max(1)));
            bytes
        }
        // A duplicated member, or trailing data.
        3 => {
            if rng.one_in(2) {
                text.replacen('{', "{\"queue\":\"dup\",", 1).into_bytes()
            } else {
                format!("{text} {{}}").into_bytes()
            }
        }
        _ => {
            let mut bytes = text.into_bytes();
            let i = rng.below(bytes.len().max(1));
            if i < bytes.len() {
                bytes[i] = (rng.next_u64() & 0xff) as u8;
            }
            bytes
        }
    }
}

fn deep(rng: &mut Rng) -> Vec<u8> {
    let n = *rng.pick(&[64, 129, 1_000, 10_000, 100_000]);
    if rng.one_in(2) {
        format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes()
    } else {
        let mut s = "{\"queue\":".repeat(n);
        s.push_str("\"fz\"");
        s.push_str(&"}".repeat(n));
        s.into_bytes()
    }
}

/// A long poll only waits when the queue is empty: keep fuzzed waits short
/// so the run stays bounded (the types and ranges are still fuzzed).
fn bound_wait(value: &mut Value) {
    if let Some(w) = value.get_mut("max_poll_seconds") {
        if w.as_i64().is_some_and(|n| n > 1) || w.as_u64().is_some_and(|n| n > 1) {
            *w = json!(1);
        }
    }
    if let Some(w) = value.get_mut("wait_time_ms") {
        if w.as_i64().is_some_and(|n| n > 100) || w.as_u64().is_some_and(|n| n > 100) {
            *w = json!(100);
        }
    }
}

fn generate(rng: &mut Rng, routes: &[(&'static str, Value)], admin: &str) -> Case {
    let (rpc, template) = rng.pick(routes);
    let (route_method, route_path) = match rpc.strip_prefix("pgmq:") {
        Some(route) => route.split_once(' ').unwrap_or(("GET", route)),
        None => ("POST", ""),
    };
    let path = if rng.one_in(12) {
        if rng.one_in(5) {
            format!("/{}", "a".repeat(1 + rng.below(8000)))
        } else {
            rng.pick(ODD_PATHS).to_string()
        }
    } else if route_path.is_empty() {
        format!("/mqlite.v1.{rpc}")
    } else {
        route_path.to_owned()
    };
    let method = if rng.one_in(10) {
        rng.pick(METHODS).to_string()
    } else {
        route_method.into()
    };
    let body = match rng.below(20) {
        0..=2 => {
            let mut v = template.clone();
            bound_wait(&mut v);
            v.to_string().into_bytes()
        }
        3..=10 => {
            let mut v = template.clone();
            for _ in 0..1 + rng.below(3) {
                mutate(rng, &mut v);
            }
            bound_wait(&mut v);
            v.to_string().into_bytes()
        }
        11..=12 => random_value(rng, 4).to_string().into_bytes(),
        13 => deep(rng),
        14..=15 => {
            let mut v = template.clone();
            bound_wait(&mut v);
            damage_text(rng, v.to_string())
        }
        16 => Vec::new(),
        17 => (0..rng.below(512))
            .map(|_| (rng.next_u64() & 0xff) as u8)
            .collect(),
        18 => {
            // A message body over the per-message cap, or a request over
            // the request cap.
            let size = if rng.one_in(2) {
                MAX_MESSAGE_BYTES + 1 + rng.below(10)
            } else {
                MAX_REQUEST_BYTES + 1 + rng.below(1000)
            };
            let body = "A".repeat(size.div_ceil(3) * 4);
            json!({"queue":"fz","messages":[{"body": body}]})
                .to_string()
                .into_bytes()
        }
        _ => {
            let mut v = template.clone();
            mutate(rng, &mut v);
            bound_wait(&mut v);
            damage_text(rng, v.to_string())
        }
    };
    let mut headers = Vec::new();
    let auth = match rng.below(20) {
        0 => None,
        1 => Some("Bearer ".to_owned()),
        2 => Some(format!("bearer {admin}")),
        3 => Some("Basic YWRtaW46YWRtaW4=".to_owned()),
        4 => Some(format!(
            "Bearer mqk_{:016x}{:016x}{:016x}{:016x}",
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64()
        )),
        5 => Some(format!("Bearer {admin} extra")),
        6 => Some(format!("Bearer {}", "x".repeat(1 + rng.below(6000)))),
        _ => Some(format!("Bearer {admin}")),
    };
    if let Some(a) = auth {
        // The pgmq dialect also takes the credential in X-API-Key.
        match a.strip_prefix("Bearer ") {
            Some(key) if !route_path.is_empty() && rng.one_in(3) => {
                headers.push(("X-API-Key".to_owned(), key.to_owned()))
            }
            _ => headers.push(("Authorization".to_owned(), a)),
        }
    }
    if rng.one_in(30) {
        headers.push(("Authorization".to_owned(), "Bearer second".to_owned()));
    }
    let content_types = [
        "application/json",
        "text/plain",
        "application/json; charset=latin1",
        "multipart/form-data; boundary=x",
        "application/connect+json",
    ];
    if !rng.one_in(5) {
        headers.push((
            "Content-Type".to_owned(),
            rng.pick(&content_types).to_string(),
        ));
    }
    if rng.one_in(8) {
        let odd = [
            ("Origin", "http://evil.example"),
            ("Connect-Protocol-Version", "1"),
            ("Accept", "application/x-nope"),
            ("X-Forwarded-For", "10.0.0.1, 10.0.0.2"),
            ("Connect-Timeout-Ms", "-5"),
            ("Access-Control-Request-Method", "DELETE"),
            ("Range", "bytes=0-1"),
        ];
        let (n, v) = rng.pick(&odd);
        headers.push((n.to_string(), v.to_string()));
    }
    Case {
        method,
        path,
        headers,
        body,
    }
}

struct Answer {
    status: u16,
    text: String,
}

fn send(stack: &Stack, case: &Case) -> Answer {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    let mut request = agent.request(&case.method, &format!("{}{}", stack.base, case.path));
    for (n, v) in &case.headers {
        request = request.set(n, v);
    }
    let result = if case.method == "HEAD" {
        request.call()
    } else {
        request.send_bytes(&case.body)
    };
    match result {
        Ok(r) | Err(ureq::Error::Status(_, r)) => {
            let status = r.status();
            Answer {
                status,
                text: r.into_string().unwrap_or_default(),
            }
        }
        Err(e) => Answer {
            status: 0,
            text: e.to_string(),
        },
    }
}

/// What is wrong with an answer, if anything.
fn judge(case: &Case, answer: &Answer) -> Option<String> {
    if answer.status == 0 {
        return Some(format!("no HTTP answer: {}", answer.text));
    }
    let pgmq_path = case.path.starts_with("/v1/") || case.path == "/health";
    if pgmq_path {
        return judge_pgmq(case, answer);
    }
    if answer.status >= 500 {
        return Some(format!("{} {}", answer.status, answer.text));
    }
    let rpc = case.method == "POST" && case.path.starts_with("/mqlite.v1.");
    if answer.status == 200 && rpc {
        return match serde_json::from_str::<Value>(&answer.text) {
            Ok(Value::Object(_)) => None,
            _ => Some(format!("200 without a JSON object: {:?}", answer.text)),
        };
    }
    if answer.status < 400 || case.method == "HEAD" {
        return None;
    }
    let (body, keys) = match error_body(answer) {
        Ok(parsed) => parsed,
        Err(problem) => return Some(problem),
    };
    let code = body["code"].as_str().unwrap_or("");
    if keys != 2 || !body["message"].is_string() {
        return Some(format!(
            "not an envelope: {} {}",
            answer.status, answer.text
        ));
    }
    match status_of(code) {
        Some(s) if s == answer.status => None,
        _ => Some(format!(
            "code {code:?} with status {}: {}",
            answer.status, answer.text
        )),
    }
}

/// An error answer's JSON body and its number of members.
fn error_body(answer: &Answer) -> Result<(Value, usize), String> {
    let body: Value = serde_json::from_str(&answer.text)
        .map_err(|_| format!("{} not JSON: {:?}", answer.status, answer.text))?;
    let keys = body.as_object().map_or(0, |o| o.len());
    Ok((body, keys))
}

/// A pgmq route's answer: a success, or an error in one of its shapes.
fn judge_pgmq(case: &Case, answer: &Answer) -> Option<String> {
    if answer.status >= 500 && case.method == "HEAD" {
        return Some(format!("{} to HEAD", answer.status));
    }
    // A HEAD answer has no body to judge.
    if answer.status < 400 || case.method == "HEAD" {
        return None;
    }
    let (body, keys) = match error_body(answer) {
        Ok(parsed) => parsed,
        Err(problem) => return Some(problem),
    };
    if keys == 1 && matches!(answer.status, 404 | 405 | 422) {
        let framework = body["detail"].is_string() && answer.status != 422;
        let validation = body["detail"].is_array() && answer.status == 422;
        return (!framework && !validation)
            .then(|| format!("not a pgmq envelope: {} {}", answer.status, answer.text));
    }
    let code = body["error"].as_str().unwrap_or("");
    if keys != 2 || !body["detail"].is_string() {
        return Some(format!(
            "not a pgmq envelope: {} {}",
            answer.status, answer.text
        ));
    }
    // The one deliberate 5xx: a read's non-empty `conditional` (docs/pgmq.md).
    let read = case.path.ends_with("/read") || case.path.ends_with("/read-poll");
    if answer.status >= 500 && !(code == "not_supported" && read) {
        return Some(format!("{} {}", answer.status, answer.text));
    }
    match pgmq_status_of(code) {
        Some(s) if s == answer.status => None,
        _ => Some(format!(
            "pgmq code {code:?} with status {}: {}",
            answer.status, answer.text
        )),
    }
}

fn main() {
    let tools = match Tools::from_env() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("fuzz: {e}");
            std::process::exit(1);
        }
    };
    let seed = Rng::seed_from_env("MQLITE_FUZZ_SEED");
    let cases: u64 = std::env::var("MQLITE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000);
    let threads: u64 = std::env::var("MQLITE_FUZZ_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(4);
    println!(
        "fuzz: {cases} cases on {threads} threads, seed {seed} \
         (replay with MQLITE_FUZZ_SEED={seed} MQLITE_FUZZ_THREADS=1)"
    );
    let request_cap = MAX_REQUEST_BYTES.to_string();
    let message_cap = MAX_MESSAGE_BYTES.to_string();
    let stack = match Stack::start(
        &tools,
        StackOptions {
            vars: &[
                ("MQLITE_MAX_REQUEST_BYTES", &request_cap),
                ("MQLITE_MAX_MESSAGE_BYTES", &message_cap),
                ("MQLITE_METRICS", "on"),
            ],
            database_url: None,
        },
    ) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("fuzz: cannot start the stack: {e}");
            std::process::exit(1);
        }
    };
    for (rpc, body) in [
        ("AdminService/CreateQueue", json!({"name":"fz","config":{}})),
        (
            "AdminService/Subscribe",
            json!({"topic":"fzt","name":"fzs"}),
        ),
        (
            "QueueService/Send",
            json!({"queue":"fz","messages":[{"body":"aGk="}]}),
        ),
    ] {
        let r = stack.rpc(rpc, &body);
        if r.status != 200 {
            eprintln!("fuzz: setup {rpc}: {} {}", r.status, r.text);
            std::process::exit(1);
        }
    }
    let queue = stack.raw("PUT", "/v1/queues/fzp", Some(&stack.token), b"");
    if queue.status != 201 {
        eprintln!(
            "fuzz: setup PUT /v1/queues/fzp: {} {}",
            queue.status, queue.text
        );
        std::process::exit(1);
    }
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let by_status: Arc<Mutex<std::collections::BTreeMap<u16, u64>>> = Arc::default();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (stack, next, stop) = (stack.clone(), next.clone(), stop.clone());
            let (failures, by_status) = (failures.clone(), by_status.clone());
            let admin = stack.token.clone();
            std::thread::spawn(move || {
                let mut routes = routes();
                routes.extend(pgmq_routes());
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= cases || stop.load(Ordering::SeqCst) || started.elapsed() > TIME_LIMIT {
                        return;
                    }
                    // Each case from the seed and its index alone.
                    let mut rng = Rng::new(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let case = generate(&mut rng, &routes, &admin);
                    let answer = send(&stack, &case);
                    *by_status
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .entry(answer.status)
                        .or_default() += 1;
                    if let Some(problem) = judge(&case, &answer) {
                        let mut f = failures
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        f.push(format!("case {i}: {problem}\n      {}", case.describe()));
                        if f.len() >= 10 {
                            stop.store(true, Ordering::SeqCst);
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    let ran = next.load(Ordering::SeqCst).min(cases);
    let elapsed = started.elapsed();
    let mut problems = failures
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let log = stack.worker_log();
    if log.contains("panicked") || log.contains("RuntimeError") {
        let line = log
            .lines()
            .find(|l| l.contains("panicked") || l.contains("RuntimeError"))
            .unwrap_or("");
        problems.push(format!("the Worker's log shows a panic: {line}"));
    }
    let health = stack.raw("GET", "/healthz", None, b"");
    let stats = stack.rpc("QueueService/Stats", &json!({"queue":"fz"}));
    if health.status != 200 || stats.status != 200 {
        problems.push(format!(
            "the isolate does not serve after the run: {health:?} {stats:?}"
        ));
    }
    println!(
        "fuzz: {ran} cases in {:.1} s, answers by status {:?}",
        elapsed.as_secs_f64(),
        by_status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    );
    if problems.is_empty() {
        println!("fuzz: ok");
    } else {
        println!("fuzz: FAILED (seed {seed}):");
        for p in &problems {
            println!("    {p}");
        }
        std::process::exit(1);
    }
}
