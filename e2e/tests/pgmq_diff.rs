//! Differential test of the pgmq dialect (docs/pgmq.md): the same request
//! sequences against pgmq 1.1.4's reference HTTP adapter
//! (`MQLITE_E2E_PGMQ_URL`, started by scripts/test.sh from PyPI's
//! `pgmq[fastapi]` on Debian's PostgreSQL) and against the Worker in
//! workerd, both with auth on and one shared key. Statuses, JSON shapes,
//! error codes and deterministic values (ids relative to the case's first,
//! counts, `read_ct`, payloads with their numbers' exact values) must
//! agree; timestamps are compared as present-or-null, texts of `detail`
//! not at all, key order and number spelling not at all (the reference
//! stores jsonb, which re-spells both; mqlite returns the text as sent,
//! which tests/pgmq_dialect.rs pins byte for byte). Deliberate differences are in [`ALLOWED`], each with its
//! reason; any other difference fails the run, and so does a missing
//! reference.

use std::time::Duration;

use mqlite_e2e::{Stack, StackOptions, Tools};
use serde_json::{json, Map, Value};

/// One request of a case. In `path` and `body`, `{q}` is the case's queue
/// and `{idN}` the case's N-th sent message id (0-based).
struct Step {
    method: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    /// Credential headers instead of each side's own key; `{key}` is the
    /// key both sides accept.
    headers: Option<&'static [(&'static str, &'static str)]>,
}

const fn step(method: &'static str, path: &'static str, body: Option<&'static str>) -> Step {
    Step {
        method,
        path,
        body,
        headers: None,
    }
}

/// A metrics request (a protected route) under these credential headers.
const fn metrics_as(headers: &'static [(&'static str, &'static str)]) -> Step {
    Step {
        method: "GET",
        path: "/v1/queues/{q}/metrics",
        body: None,
        headers: Some(headers),
    }
}

/// The key both sides accept (`PGMQ_API_KEY` of each).
const DIFF_KEY: &str = "diff-key-0123456789abcdef";

/// Deliberate differences: (case, step index, what is compared instead,
/// why). `status` compares the status only.
const ALLOWED: &[(&str, usize, &str, &str)] = &[
    ("health", 0, "status", "version is this build's"),
    ("health", 1, "status", "same as /health"),
    ("create_and_list", 1, "status", "every queue is durable: is_unlogged is always false (the PUT still echoes the flag)"),
    ("validation", 6, "none", "qty < 0: the reference answers 500 (a database error); here 400 invalid_request"),
    ("validation", 7, "none", "vt < 0: the reference leases into the past; here 400 invalid_request"),
    ("validation", 25, "none", "a fractional delay: the reference reads it as an epoch datetime; here 422 (delay is whole seconds or ISO-8601)"),
];

struct Case {
    name: &'static str,
    steps: &'static [Step],
}

const POST: &str = "POST";

const CASES: &[Case] = &[
    Case {
        name: "health",
        steps: &[
            step("GET", "/health", None),
            step("GET", "/v1/health", None),
            step("GET", "/v1/ready", None),
        ],
    },
    Case {
        name: "create_and_list",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            step("PUT", "/v1/queues/{q}?unlogged=true", None),
            step("GET", "/v1/queues", None),
            step("PUT", "/v1/queues/{q}?unlogged=maybe", None),
        ],
    },
    Case {
        name: "send_read_round_trip",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            step(
                POST,
                "/v1/queues/{q}/messages",
                Some(
                    r#"{"message":{"a":1,"nested":{"list":[1,"two",null,true],"f":1.5}},"headers":{"trace":"t-1","n":2}}"#,
                ),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages",
                Some(r#"{"message":{"b":"ü ✓"},"delay":0}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/batch",
                Some(r#"{"messages":[{"c":1},{"c":2}],"headers":[{"h":1},{"h":2}]}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/batch",
                Some(r#"{"messages":[{"d":1}],"headers":null}"#),
            ),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"vt":30,"qty":2}"#)),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"qty":10}"#)),
            step(POST, "/v1/queues/{q}/read", Some(r#"{}"#)),
            step("GET", "/v1/queues/{q}/metrics", None),
            step(
                POST,
                "/v1/queues/{q}/messages/{id0}/vt",
                Some(r#"{"vt":0}"#),
            ),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"vt":5}"#)),
        ],
    },
    Case {
        name: "pop",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            step(
                POST,
                "/v1/queues/{q}/messages/batch",
                Some(r#"{"messages":[{"p":1},{"p":2},{"p":3}]}"#),
            ),
            step(POST, "/v1/queues/{q}/pop", Some(r#"{}"#)),
            step(POST, "/v1/queues/{q}/pop", Some(r#"{"qty":5}"#)),
            step(POST, "/v1/queues/{q}/pop", Some(r#"{"qty":5}"#)),
            step("GET", "/v1/queues/{q}/metrics", None),
        ],
    },
    Case {
        name: "delete_and_archive",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            step(
                POST,
                "/v1/queues/{q}/messages/batch",
                Some(r#"{"messages":[{"x":0},{"x":1},{"x":2},{"x":3}]}"#),
            ),
            step("DELETE", "/v1/queues/{q}/messages/{id0}", None),
            step("DELETE", "/v1/queues/{q}/messages/{id0}", None),
            step(POST, "/v1/queues/{q}/messages/{id1}/archive", None),
            step(POST, "/v1/queues/{q}/messages/{id1}/archive", None),
            step(
                POST,
                "/v1/queues/{q}/messages/delete",
                Some(r#"{"msg_ids":[{id2},99999999]}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/archive",
                Some(r#"{"msg_ids":[{id3},{id2}]}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/archive",
                Some(r#"{"msg_ids":[]}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/{id3}/vt",
                Some(r#"{"vt":1}"#),
            ),
            step("GET", "/v1/queues/{q}/metrics", None),
        ],
    },
    Case {
        name: "delay_purge_drop",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            step(
                POST,
                "/v1/queues/{q}/messages",
                Some(r#"{"message":{"later":true},"delay":100}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages",
                Some(r#"{"message":{"later":true},"delay":"2099-01-01T00:00:00Z"}"#),
            ),
            step(POST, "/v1/queues/{q}/read", Some(r#"{}"#)),
            step("GET", "/v1/queues/{q}/metrics", None),
            step(POST, "/v1/queues/{q}/purge", None),
            step("GET", "/v1/queues/{q}/metrics", None),
            step("DELETE", "/v1/queues/{q}", None),
            step("DELETE", "/v1/queues/{q}", None),
            step(POST, "/v1/queues/{q}/messages", Some(r#"{"message":{}}"#)),
        ],
    },
    Case {
        name: "read_poll",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            step(
                POST,
                "/v1/queues/{q}/read-poll",
                Some(r#"{"max_poll_seconds":1,"poll_interval_ms":100}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages",
                Some(r#"{"message":{"k":1}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read-poll",
                Some(r#"{"max_poll_seconds":5}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read-poll",
                Some(r#"{"max_poll_seconds":21}"#),
            ),
            step(POST, "/v1/queues/{q}/read-poll", Some(r#"{"qty":101}"#)),
        ],
    },
    Case {
        name: "missing_queue",
        steps: &[
            step(POST, "/v1/queues/{q}/messages", Some(r#"{"message":{}}"#)),
            step(POST, "/v1/queues/{q}/read", Some(r#"{}"#)),
            step(POST, "/v1/queues/{q}/pop", Some(r#"{}"#)),
            step("GET", "/v1/queues/{q}/metrics", None),
            step(POST, "/v1/queues/{q}/purge", None),
            step("DELETE", "/v1/queues/{q}", None),
            step("DELETE", "/v1/queues/{q}/messages/1", None),
            step(POST, "/v1/queues/{q}/messages/1/archive", None),
            step(
                POST,
                "/v1/queues/{q}/messages/delete",
                Some(r#"{"msg_ids":[1]}"#),
            ),
            step(POST, "/v1/queues/{q}/messages/1/vt", Some(r#"{"vt":1}"#)),
        ],
    },
    Case {
        name: "validation",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            step(POST, "/v1/queues/{q}/messages", Some(r#"{"message":[1]}"#)),
            step(POST, "/v1/queues/{q}/messages", Some(r#"{}"#)),
            step(
                POST,
                "/v1/queues/{q}/messages",
                Some(r#"{"message":{},"delay":-1}"#),
            ),
            step(POST, "/v1/queues/{q}/messages", Some("nojson")),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"qty":"x"}"#)),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"qty":-1}"#)),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"vt":-1}"#)),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"conditional":{}}"#)),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"conditional":{"a":1}}"#),
            ),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"qty":101}"#)),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"vt":1.5}"#)),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"qty":0}"#)),
            step(POST, "/v1/queues/{q}/read", None),
            step(POST, "/v1/queues/{q}/pop", Some(r#"{"qty":101}"#)),
            step(
                POST,
                "/v1/queues/{q}/messages/batch",
                Some(r#"{"messages":[1]}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/batch",
                Some(r#"{"messages":[{"a":1}],"headers":[]}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/batch",
                Some(r#"{"messages":[]}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages",
                Some(r#"{"message":{},"headers":[1]}"#),
            ),
            step(POST, "/v1/queues/{q}/messages/abc/archive", None),
            step(POST, "/v1/queues/{q}/messages/1/vt", Some(r#"{}"#)),
            step(POST, "/v1/queues/{q}/messages/delete", Some(r#"{}"#)),
            step(
                "PUT",
                "/v1/queues/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                None,
            ),
            step("GET", "/v1/queues/{q}", None),
            step("GET", "/v1/nothing", None),
            step(
                POST,
                "/v1/queues/{q}/messages",
                Some(r#"{"message":{},"delay":1.5}"#),
            ),
        ],
    },
    Case {
        name: "exact_payloads",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            step(
                POST,
                "/v1/queues/{q}/messages",
                Some(
                    r#"{"message":{"big":1180591620717411303424,"neg":-9223372036854775809,"small":1e-7,"e":2.5e3,"u":"\u00e9\ud83d\ude00\n"},"headers":{"n":123456789012345678901234567890}}"#,
                ),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/batch",
                Some(
                    r#"{"messages":[{"z":1,"a":{"y":[1.50,2]},"z":3},{"x":18446744073709551616}],"headers":[{"b":1,"a":2},{"h":-0.0}]}"#,
                ),
            ),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"qty":1,"vt":30}"#)),
            step(POST, "/v1/queues/{q}/pop", Some(r#"{"qty":5}"#)),
        ],
    },
    Case {
        name: "conditional",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            step(
                POST,
                "/v1/queues/{q}/messages/batch",
                Some(
                    r#"{"messages":[{"k":"a","n":1},{"k":"b","n":2.0},{"k":"a","tags":["x","y"],"deep":{"l":[{"m":1,"o":2}]}},{"k":"c"},{"n":1.0,"k":"a"}]}"#,
                ),
            ),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":2,"conditional":{"k":"a"}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":5,"conditional":{"k":"a"}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":5,"conditional":{"n":2}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":5,"conditional":{"tags":["y"]}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/{id2}/vt",
                Some(r#"{"vt":0}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":5,"conditional":{"deep":{"l":[{"o":2}]},"tags":[]}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/messages/{id2}/vt",
                Some(r#"{"vt":0}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":5,"conditional":{"deep":{"l":{"o":2}}}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":5,"conditional":{"tags":"x"}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":5,"conditional":{"k":"c","x":null}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":5,"conditional":{"k":"c"}}"#),
            ),
            step(
                POST,
                "/v1/queues/{q}/read-poll",
                Some(
                    r#"{"qty":5,"conditional":{"k":"z"},"max_poll_seconds":1,"poll_interval_ms":100}"#,
                ),
            ),
            step(POST, "/v1/queues/{q}/read", Some(r#"{"conditional":[1]}"#)),
            step(
                POST,
                "/v1/queues/{q}/read",
                Some(r#"{"qty":5,"conditional":{}}"#),
            ),
        ],
    },
    Case {
        name: "credentials",
        steps: &[
            step("PUT", "/v1/queues/{q}", None),
            metrics_as(&[("Authorization", "Bearer {key}"), ("X-API-Key", "{key}")]),
            metrics_as(&[("Authorization", "Bearer {key}"), ("X-API-Key", "wrong")]),
            metrics_as(&[("Authorization", "Bearer {key}")]),
            metrics_as(&[("Authorization", "Bearer wrong"), ("X-API-Key", "{key}")]),
            metrics_as(&[("Authorization", "Bearer wrong"), ("X-API-Key", "wrong")]),
            metrics_as(&[("Authorization", "Bearer wrong")]),
            metrics_as(&[("X-API-Key", "{key}")]),
            metrics_as(&[("X-API-Key", "wrong")]),
            metrics_as(&[]),
            metrics_as(&[
                ("Authorization", "Basic dXNlcjpwYXNz"),
                ("X-API-Key", "{key}"),
            ]),
            metrics_as(&[
                ("Authorization", "Basic dXNlcjpwYXNz"),
                ("X-API-Key", "wrong"),
            ]),
            metrics_as(&[("Authorization", "Basic dXNlcjpwYXNz")]),
            metrics_as(&[("Authorization", "bearer   {key}  ")]),
            metrics_as(&[("Authorization", "Bearer "), ("X-API-Key", "{key}")]),
            metrics_as(&[("Authorization", "{key}"), ("X-API-Key", "{key}")]),
            metrics_as(&[("Authorization", "Bearer {key} x")]),
            metrics_as(&[("X-API-Key", "")]),
        ],
    },
];

/// One side under test.
struct Side {
    base: String,
    /// The key sent as `Authorization: Bearer` unless a step has its own.
    token: String,
    /// The value of `{key}` in a step's headers.
    key: &'static str,
}

impl Side {
    fn call(&self, method: &str, path: &str, body: Option<&str>, step: &Step) -> (u16, Value) {
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(60))
            .build();
        let mut request = agent
            .request(method, &format!("{}{path}", self.base))
            .set("Content-Type", "application/json");
        match step.headers {
            Some(headers) => {
                for (name, value) in headers {
                    request = request.set(name, &value.replace("{key}", self.key));
                }
            }
            None => request = request.set("Authorization", &format!("Bearer {}", self.token)),
        }
        let sent = match body {
            Some(b) => request.send_string(b),
            None => request.call(),
        };
        let response = match sent {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(e) => return (0, json!({ "transport_error": e.to_string() })),
        };
        let status = response.status();
        let text = response.into_string().unwrap_or_default();
        let json = if text.is_empty() {
            Value::Null
        } else {
            exact(&text).unwrap_or(Value::String(text))
        };
        (status, json)
    }
}

/// JSON text as a value whose numbers keep their exact value: an integer
/// that fits in 64 bits (whatever its spelling: `2.5e3` is 2500) is a
/// number, any other as `"num:DIGITSeEXP"` in lowest terms (`1.50` and
/// `1.5` are both `num:15e-1`). Key order is not kept (a map is sorted);
/// of a repeated key the last counts, as in jsonb and Python.
fn exact(text: &str) -> Option<Value> {
    use serde_json::value::RawValue;
    use std::collections::BTreeMap;
    let raw = text.trim();
    Some(match raw.as_bytes().first()? {
        b'{' => {
            let map: BTreeMap<String, Box<RawValue>> = serde_json::from_str(raw).ok()?;
            let mut out = Map::new();
            for (k, v) in map {
                out.insert(k, exact(v.get())?);
            }
            Value::Object(out)
        }
        b'[' => {
            let items: Vec<Box<RawValue>> = serde_json::from_str(raw).ok()?;
            Value::Array(
                items
                    .iter()
                    .map(|v| exact(v.get()))
                    .collect::<Option<_>>()?,
            )
        }
        b'-' | b'0'..=b'9' => exact_number(raw)?,
        _ => serde_json::from_str(raw).ok()?,
    })
}

fn exact_number(text: &str) -> Option<Value> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], unsigned[i + 1..].parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits = format!("{whole}{fraction}");
    let mut exponent = exponent - fraction.len() as i64;
    digits = digits.trim_start_matches('0').to_owned();
    while digits.ends_with('0') {
        digits.pop();
        exponent += 1;
    }
    if digits.is_empty() {
        return Some(json!(0));
    }
    let sign = if negative { "-" } else { "" };
    if (0..=18).contains(&exponent) && digits.len() as i64 + exponent <= 18 {
        let n: i64 = format!("{sign}{digits}{}", "0".repeat(exponent as usize))
            .parse()
            .ok()?;
        return Some(json!(n));
    }
    Some(json!(format!("num:{sign}{digits}e{exponent}")))
}

/// The comparable form of an answer: timestamps as present/null, ids
/// relative to the case's first, application error details dropped, 422
/// items as (type, loc), and only this case's queue in a queue list.
fn normalize(value: &Value, first_id: Option<i64>, queue: &str) -> Value {
    fn walk(v: &Value, key: &str, first: Option<i64>, queue: &str) -> Value {
        match v {
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, x) in map {
                    out.insert(k.clone(), walk(x, k, first, queue));
                }
                if out.contains_key("error") {
                    out.remove("detail");
                }
                Value::Object(out)
            }
            Value::Array(items) if key == "queues" => Value::Array(
                items
                    .iter()
                    .filter(|q| q["queue_name"] == queue)
                    .map(|q| walk(q, "", first, queue))
                    .collect(),
            ),
            Value::Array(items) if key == "detail" => Value::Array(
                items
                    .iter()
                    .map(|i| json!({"type": i["type"], "loc": i["loc"]}))
                    .collect(),
            ),
            Value::Array(items) => {
                let mut out: Vec<Value> =
                    items.iter().map(|x| walk(x, key, first, queue)).collect();
                if key == "msg_ids" || key == "messages" {
                    out.sort_by_key(|m| m.get("msg_id").unwrap_or(m).as_i64().unwrap_or(0));
                }
                Value::Array(out)
            }
            Value::String(_)
                if matches!(
                    key,
                    "enqueued_at" | "last_read_at" | "vt" | "created_at" | "scrape_time"
                ) =>
            {
                json!("<timestamp>")
            }
            Value::Number(n) if matches!(key, "msg_id" | "msg_ids") => match (n.as_i64(), first) {
                (Some(id), Some(first)) => json!(id - first),
                _ => v.clone(),
            },
            _ => v.clone(),
        }
    }
    walk(value, "", first_id, queue)
}

/// The first id a send of this answer returned.
fn sent_id(answer: &Value) -> Option<i64> {
    answer["msg_id"]
        .as_i64()
        .or_else(|| answer["msg_ids"][0].as_i64())
}

fn fill(template: &str, queue: &str, first: Option<i64>) -> String {
    let mut out = template.replace("{q}", queue);
    for n in 0..10 {
        let id = first.map_or(n, |f| f + n);
        out = out.replace(&format!("{{id{n}}}"), &id.to_string());
    }
    out
}

fn main() {
    let (Ok(reference), Ok(reference_key)) = (
        std::env::var("MQLITE_E2E_PGMQ_URL"),
        std::env::var("MQLITE_E2E_PGMQ_KEY"),
    ) else {
        eprintln!("pgmq_diff: MQLITE_E2E_PGMQ_URL and MQLITE_E2E_PGMQ_KEY must be set (scripts/test.sh starts pgmq's reference adapter with that key)");
        std::process::exit(1);
    };
    if reference_key != DIFF_KEY {
        eprintln!("pgmq_diff: the reference must run with PGMQ_API_KEY={DIFF_KEY}");
        std::process::exit(1);
    }
    let tools = match Tools::from_env() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("pgmq_diff: {e}");
            std::process::exit(1);
        }
    };
    let stack = match Stack::start(
        &tools,
        StackOptions {
            vars: &[("PGMQ_API_KEY", DIFF_KEY)],
            database_url: None,
        },
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pgmq_diff: cannot start the Worker: {e}");
            std::process::exit(1);
        }
    };
    let sides = [
        Side {
            base: reference.trim_end_matches('/').to_owned(),
            token: reference_key,
            key: DIFF_KEY,
        },
        Side {
            base: stack.base.clone(),
            token: stack.token.clone(),
            key: DIFF_KEY,
        },
    ];
    let run = std::process::id();
    let (mut compared, mut allowed, mut differences) = (0, 0, Vec::new());
    for case in CASES {
        let queue = format!("diff_{}_{run}", case.name);
        let mut first: [Option<i64>; 2] = [None, None];
        for (i, s) in case.steps.iter().enumerate() {
            let mut answers = Vec::new();
            for (side, target) in sides.iter().enumerate() {
                let path = fill(s.path, &queue, first[side]);
                let body = s.body.map(|b| fill(b, &queue, first[side]));
                let (status, json) = target.call(s.method, &path, body.as_deref(), s);
                if first[side].is_none() && status == 201 {
                    first[side] = sent_id(&json);
                }
                answers.push((status, normalize(&json, first[side], &queue)));
            }
            let rule = ALLOWED
                .iter()
                .find(|(c, n, _, _)| *c == case.name && *n == i);
            let same = match rule.map(|r| r.2) {
                Some("none") => true,
                Some("status") => answers[0].0 == answers[1].0,
                _ => answers[0] == answers[1],
            };
            if rule.is_some() {
                allowed += 1;
            } else {
                compared += 1;
            }
            if !same {
                differences.push(format!(
                    "{} step {i} ({} {}):\n  reference: {} {}\n  mqlite:    {} {}",
                    case.name,
                    s.method,
                    s.path,
                    answers[0].0,
                    answers[0].1,
                    answers[1].0,
                    answers[1].1
                ));
            }
        }
    }
    for (case, step, what, why) in ALLOWED {
        println!("pgmq_diff: allowed difference {case}#{step} (compared: {what}): {why}");
    }
    for d in &differences {
        println!("pgmq_diff: DIFFERENCE {d}");
    }
    println!(
        "pgmq_diff: {} cases, {compared} steps identical-compared, {allowed} allow-listed, {} differences",
        CASES.len(),
        differences.len()
    );
    drop(stack);
    if !differences.is_empty() {
        std::process::exit(1);
    }
}
