//! The pgmq dialect's wire (docs/pgmq.md): request bodies validated as the
//! reference adapter validates them, into engine requests; engine results
//! into its JSON shapes; and its own error table.

mod error;
pub mod time;
pub mod validate;

pub use error::{PgmqCode, PgmqError};

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::engine::pgmq::{
    PgmqMessage, PgmqMetrics, PgmqOutgoing, PgmqQueue, PgmqRead, PgmqSend, VisibleAt,
};
use validate::{body_object, Fields, IntOrInstant};

/// Caps of the dialect (`PGMQ_API_MAX_*`): requests over them are refused,
/// never clamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub max_qty: i64,
    pub max_batch: usize,
    pub max_poll_seconds: i64,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_qty: 100,
            max_batch: 1000,
            max_poll_seconds: 20,
        }
    }
}

/// Where a request's visibility lands: `delay`/`vt` integers are seconds.
fn visible_at(value: IntOrInstant) -> VisibleAt {
    match value {
        IntOrInstant::Int(s) => VisibleAt::AfterSeconds(s),
        IntOrInstant::AtMs(ms) => VisibleAt::AtMs(ms),
    }
}

/// A payload as stored: exactly the text the client sent.
fn object_text(raw: &RawValue) -> String {
    raw.get().to_owned()
}

/// The name rule: at most 47 characters (pgmq's), answered as pgmq does.
pub fn check_queue_name(name: &str) -> Result<(), PgmqError> {
    crate::engine::pgmq::check_name(name).map_err(|e| match e {
        crate::engine::EngineError::InvalidArgument(m) => {
            PgmqError::new(PgmqCode::InvalidQueueName, m)
        }
        other => other.into(),
    })
}

/// `POST /v1/queues/{queue}/messages`.
pub fn send(queue: &str, body: &[u8]) -> Result<PgmqSend, PgmqError> {
    let object = body_object(body)?;
    let mut fields = Fields::new(&object);
    let message = fields.dict("message", true);
    let headers = fields.dict("headers", false);
    let delay = fields.int_or_instant("delay", false, true);
    fields.finish()?;
    let message = message.map(object_text).unwrap_or_default();
    Ok(PgmqSend {
        queue: queue.to_owned(),
        messages: vec![PgmqOutgoing {
            message,
            headers: headers.map(object_text),
        }],
        delay: delay.map(visible_at),
    })
}

/// `POST /v1/queues/{queue}/messages/batch`.
pub fn send_batch(queue: &str, body: &[u8], caps: Caps) -> Result<PgmqSend, PgmqError> {
    let object = body_object(body)?;
    let mut fields = Fields::new(&object);
    let messages = fields.dict_list("messages", true);
    let headers = fields.dict_list("headers", false);
    let delay = fields.int_or_instant("delay", false, true);
    fields.finish()?;
    let messages = messages.unwrap_or_default();
    if messages.len() > caps.max_batch {
        return Err(PgmqError::invalid(format!(
            "batch length exceeds {}",
            caps.max_batch
        )));
    }
    if headers.as_ref().is_some_and(|h| h.len() != messages.len()) {
        return Err(PgmqError::invalid(
            "headers list must match messages list length",
        ));
    }
    let mut headers = headers.map(|h| h.into_iter());
    let messages = messages
        .into_iter()
        .map(|m| PgmqOutgoing {
            message: object_text(m),
            headers: headers.as_mut().and_then(Iterator::next).map(object_text),
        })
        .collect();
    Ok(PgmqSend {
        queue: queue.to_owned(),
        messages,
        delay: delay.map(visible_at),
    })
}

/// How a read-like route reads its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    Read,
    Poll,
    Pop,
}

/// `read`, `read-poll` and `pop` bodies.
pub fn read(queue: &str, body: &[u8], kind: ReadKind, caps: Caps) -> Result<PgmqRead, PgmqError> {
    let object = body_object(body)?;
    let mut fields = Fields::new(&object);
    let qty = fields.int("qty", 1, false);
    let (vt, conditional) = if kind == ReadKind::Pop {
        (0, None)
    } else {
        (fields.int("vt", 0, true), fields.dict("conditional", false))
    };
    let (max_poll_seconds, poll_interval_ms) = if kind == ReadKind::Poll {
        (
            fields.int("max_poll_seconds", 5, false),
            fields.int("poll_interval_ms", 100, false),
        )
    } else {
        (0, 0)
    };
    fields.finish()?;
    if qty > caps.max_qty {
        return Err(PgmqError::invalid(format!("qty exceeds {}", caps.max_qty)));
    }
    if qty < 0 {
        return Err(PgmqError::invalid(format!(
            "qty must be at least 0 (got {qty})"
        )));
    }
    if max_poll_seconds > caps.max_poll_seconds {
        return Err(PgmqError::new(
            PgmqCode::PollLimitExceeded,
            format!("max_poll_seconds exceeds {}", caps.max_poll_seconds),
        ));
    }
    if vt < 0 {
        return Err(PgmqError::invalid(format!(
            "vt must be at least 0 (got {vt})"
        )));
    }
    Ok(PgmqRead {
        queue: queue.to_owned(),
        qty,
        vt_seconds: vt,
        pop: kind == ReadKind::Pop,
        conditional: conditional.map(object_text).filter(|c| !is_empty_object(c)),
        max_poll_ms: max_poll_seconds.max(0) as u64 * 1000,
        poll_interval_ms: poll_interval_ms.max(1) as u64,
    })
}

/// `{"msg_ids":[…]}` of batch delete and archive.
pub fn msg_ids(body: &[u8]) -> Result<Vec<i64>, PgmqError> {
    let object = body_object(body)?;
    let mut fields = Fields::new(&object);
    let ids = fields.int_list("msg_ids");
    fields.finish()?;
    Ok(ids.unwrap_or_default())
}

/// `{"vt": seconds or ISO-8601}` of set_vt.
pub fn set_vt(body: &[u8]) -> Result<VisibleAt, PgmqError> {
    let object = body_object(body)?;
    let mut fields = Fields::new(&object);
    let vt = fields.int_or_instant("vt", true, false);
    fields.finish()?;
    vt.map(visible_at)
        .ok_or_else(|| PgmqError::invalid("vt is required"))
}

/// Whether a condition selects every message (`{}` contains nothing).
fn is_empty_object(text: &str) -> bool {
    text.strip_prefix('{')
        .is_some_and(|rest| rest.trim_start().starts_with('}'))
}

/// A message body as pgmq's `message`, spliced in as stored: the body
/// itself when it is JSON (what a pgmq send stored is exactly the text the
/// client sent), or the body as a JSON string when it is not (§5.3).
fn payload(body: &[u8]) -> std::borrow::Cow<'_, str> {
    match serde_json::from_slice::<&RawValue>(body) {
        Ok(raw) => raw.get().into(),
        Err(_) => Value::String(String::from_utf8_lossy(body).into_owned())
            .to_string()
            .into(),
    }
}

/// A message in pgmq's shape, `message` and `headers` as stored.
pub fn message_json(m: &PgmqMessage) -> String {
    let mut out = json!({
        "msg_id": m.msg_id,
        "read_ct": m.read_ct,
        "enqueued_at": time::format_ms(m.enqueued_at_ms),
        "last_read_at": m.last_read_at_ms.map(time::format_ms),
        "vt": time::format_ms(m.vt_ms),
    })
    .to_string();
    let headers = m
        .headers
        .as_deref()
        .and_then(|h| serde_json::from_str::<&RawValue>(h).ok())
        .map_or("null", RawValue::get);
    out.pop();
    for (name, text) in [("message", &*payload(&m.body)), ("headers", headers)] {
        out.push_str(",\"");
        out.push_str(name);
        out.push_str("\":");
        out.push_str(text);
    }
    out.push('}');
    out
}

/// `{"messages":[…]}`.
pub fn messages_json(messages: &[PgmqMessage]) -> String {
    let list: Vec<String> = messages.iter().map(message_json).collect();
    format!("{{\"messages\":[{}]}}", list.join(","))
}

/// A queue as the list shows it (never partitioned; always logged).
pub fn queues_json(queues: &[PgmqQueue]) -> String {
    let list: Vec<Value> = queues
        .iter()
        .map(|q| {
            json!({
                "queue_name": q.name,
                "is_partitioned": false,
                "is_unlogged": false,
                "created_at": time::format_ms(q.created_at_ms),
            })
        })
        .collect();
    json!({ "queues": list }).to_string()
}

/// One queue's metrics; ages in whole seconds, rounded as pgmq's `::int`.
pub fn metrics_json(m: &PgmqMetrics) -> Value {
    let seconds = |ms: Option<i64>| ms.map(|ms| (ms + 500) / 1000);
    json!({
        "queue_name": m.queue_name,
        "queue_length": m.queue_length,
        "newest_msg_age_sec": seconds(m.newest_age_ms),
        "oldest_msg_age_sec": seconds(m.oldest_age_ms),
        "total_messages": m.total_messages,
        "scrape_time": time::format_ms(m.scrape_time_ms),
        "queue_visible_length": m.queue_visible_length,
    })
}
