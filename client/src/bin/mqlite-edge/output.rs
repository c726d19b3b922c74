//! What the command line prints (mqlite-clients.md §2.5): `ok:` lines or sorted JSON
//! objects for mutations, wire message objects as bare JSON arrays, and mqlite's text
//! lines. Every write error is returned, so a result is acknowledged only once printed.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mqlite_edge_client::types::{Message, QueueInfo, Stats, Status, Subscription};
use serde::Serialize;
use serde_json::Value;

use crate::text::go_quote;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// A mutation's result: `ok: k=v …` or a JSON object with these keys (sorted).
pub fn ok(out: &mut dyn Write, format: Format, pairs: &[(&str, Value)]) -> io::Result<()> {
    match format {
        Format::Text => {
            let line: String = pairs
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!(" {k}={s}"),
                    v => format!(" {k}={v}"),
                })
                .collect();
            writeln!(out, "ok:{line}")
        }
        Format::Json => {
            let object: serde_json::Map<String, Value> = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect::<std::collections::BTreeMap<_, _>>()
                .into_iter()
                .collect();
            json(out, &object)
        }
    }
}

/// Pretty JSON (2-space indent) and a newline.
pub fn json(out: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

/// Received messages (receive, receive-deferred): `lock_token` already removed by the
/// caller where the messages are settled by the command.
pub fn received(out: &mut dyn Write, format: Format, messages: &[Message]) -> io::Result<()> {
    match format {
        Format::Json => json(out, &messages),
        Format::Text if messages.is_empty() => writeln!(out, "(no messages)"),
        Format::Text => {
            for m in messages {
                let mut line = format!("seq={} deliveries={}", m.seq_number, m.delivery_count);
                for (label, value) in [
                    ("message-id", &m.message_id),
                    ("group", &m.group_id),
                    ("reply-to", &m.reply_to),
                    ("lock-token", &m.lock_token),
                ] {
                    if !value.is_empty() {
                        line.push_str(&format!(" {label}={value}"));
                    }
                }
                writeln!(out, "{line} body={}", go_quote(&m.body))?;
            }
            Ok(())
        }
    }
}

pub fn peeked(out: &mut dyn Write, format: Format, messages: &[Message]) -> io::Result<()> {
    match format {
        Format::Json => json(out, &messages),
        Format::Text if messages.is_empty() => writeln!(out, "(empty)"),
        Format::Text => messages.iter().try_for_each(|m| {
            writeln!(
                out,
                "seq={} state={} deliveries={} body={}",
                m.seq_number,
                m.state,
                m.delivery_count,
                go_quote(&m.body)
            )
        }),
    }
}

pub fn stats(out: &mut dyn Write, format: Format, s: &Stats) -> io::Result<()> {
    match format {
        Format::Json => json(out, s),
        Format::Text => {
            writeln!(
            out,
            "queue={} active={} locked={} deferred={} scheduled={} dead={} total={} oldest={}ms",
            s.queue, s.active, s.locked, s.deferred, s.scheduled, s.dead_lettered, s.total,
            s.oldest_message_age_ms
        )
        }
    }
}

pub fn queues(out: &mut dyn Write, format: Format, queues: &[QueueInfo]) -> io::Result<()> {
    match format {
        Format::Json => json(out, &queues),
        Format::Text if queues.is_empty() => writeln!(out, "(no queues)"),
        Format::Text => queues.iter().try_for_each(|q| {
            writeln!(
                out,
                "{:<24} kind={:<12} lock={}ms maxdc={} ttl={}ms dedup={}ms",
                q.name,
                q.kind,
                q.lock_duration_ms,
                q.max_delivery_count,
                q.default_ttl_ms,
                q.dedup_window_ms
            )
        }),
    }
}

pub fn subscriptions(out: &mut dyn Write, format: Format, subs: &[Subscription]) -> io::Result<()> {
    match format {
        Format::Json => json(out, &subs),
        Format::Text if subs.is_empty() => writeln!(out, "(no subscriptions)"),
        Format::Text => subs.iter().try_for_each(|s| {
            let expr = if s.expr.is_empty() {
                "(match all)"
            } else {
                &s.expr
            };
            writeln!(out, "{:<20} topic={:<20} filter={expr}", s.name, s.topic)
        }),
    }
}

/// Go's duration text of whole seconds (`1h2m3s`, `0s`).
fn go_seconds(ms: i64) -> String {
    let total = (ms + 500) / 1000;
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

pub fn status(out: &mut dyn Write, format: Format, s: &Status) -> io::Result<()> {
    if format == Format::Json {
        return json(out, s);
    }
    let mut lines: Vec<(&str, String)> = vec![];
    if !s.version.is_empty() {
        lines.push(("version:", s.version.clone()));
    }
    lines.push(("backend:", s.backend.clone()));
    lines.push(("location:", s.location.clone()));
    lines.push(("schema:", s.schema_version.clone()));
    lines.push(("ping:", format!("{} ms", s.ping_ms)));
    if !s.remote {
        lines.push(("size:", format!("{} bytes", s.db_size_bytes)));
    }
    lines.push(("queues:", s.queues.to_string()));
    lines.push(("subscriptions:", s.subscriptions.to_string()));
    if s.uptime_ms > 0 {
        lines.push(("uptime:", go_seconds(s.uptime_ms)));
        lines.push(("auth:", s.auth.to_string()));
    }
    if !s.writes.is_empty() {
        lines.push(("writes:", s.writes.clone()));
    }
    lines
        .iter()
        .try_for_each(|(label, value)| writeln!(out, "{label:<16}{value}"))
}

/// A spinner on stderr while a call runs, only when stderr is a terminal and the call
/// takes longer than a moment; cleared when dropped.
pub struct Progress {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    pub fn start(label: String) -> Progress {
        let done = Arc::new(AtomicBool::new(false));
        let thread = io::stderr().is_terminal().then(|| {
            let done = done.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                let frames = ['|', '/', '-', '\\'];
                let mut shown = false;
                for frame in frames.iter().cycle() {
                    if done.load(Ordering::SeqCst) {
                        break;
                    }
                    eprint!("\r{frame} {label}");
                    shown = true;
                    std::thread::sleep(Duration::from_millis(120));
                }
                if shown {
                    eprint!("\r\x1b[2K");
                }
            })
        });
        Progress { done, thread }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut out = vec![];
        f(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn ok_lines_keep_their_order_and_json_sorts_keys() {
        let pairs = [("queue", Value::from("q")), ("seq", Value::from(3))];
        assert_eq!(text(|o| ok(o, Format::Text, &pairs)), "ok: queue=q seq=3\n");
        let pairs = [("queue", Value::from("q")), ("at", Value::from("t"))];
        assert_eq!(
            text(|o| ok(o, Format::Json, &pairs)),
            "{\n  \"at\": \"t\",\n  \"queue\": \"q\"\n}\n"
        );
    }

    #[test]
    fn received_text_shows_only_non_empty_members() {
        let m = Message {
            seq_number: 4,
            delivery_count: 1,
            group_id: "g".into(),
            body: b"x\n".to_vec(),
            ..Message::default()
        };
        assert_eq!(
            text(|o| received(o, Format::Text, &[m])),
            "seq=4 deliveries=1 group=g body=\"x\\n\"\n"
        );
        assert_eq!(text(|o| received(o, Format::Text, &[])), "(no messages)\n");
        assert_eq!(text(|o| received(o, Format::Json, &[])), "[]\n");
    }

    #[test]
    fn uptime_is_go_duration_text() {
        assert_eq!(go_seconds(3_723_400), "1h2m3s");
        assert_eq!(go_seconds(61_000), "1m1s");
        assert_eq!(go_seconds(400), "0s");
    }

    #[test]
    fn list_pads_names_and_kinds() {
        let q = QueueInfo {
            name: "orders".into(),
            kind: "queue".into(),
            lock_duration_ms: 30_000,
            max_delivery_count: 10,
            ..QueueInfo::default()
        };
        assert_eq!(
            text(|o| queues(o, Format::Text, &[q])),
            format!(
                "{:<24} kind={:<12} lock=30000ms maxdc=10 ttl=0ms dedup=0ms\n",
                "orders", "queue"
            )
        );
    }
}
