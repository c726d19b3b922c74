//! Send and Schedule (semantics §4–§7): the whole request is one
//! transaction; dedup, TTL and scheduling are decided in SQL.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::topics::TopicView;
use super::{hex, require_name, unexpected, Engine, EngineError};
use crate::filter::FilterInput;
use crate::observe::Event;
use crate::store::hrana::Value;
use crate::store::{Program, RunError, Statement, Transport};

/// One message to enqueue. Empty strings are already `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutgoingMessage {
    pub body: Vec<u8>,
    pub message_id: Option<String>,
    pub correlation_id: Option<String>,
    pub reply_to: Option<String>,
    pub group_id: Option<String>,
    pub content_type: Option<String>,
    pub subject: Option<String>,
    pub properties: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendRequest {
    pub queue: String,
    pub messages: Vec<OutgoingMessage>,
    /// 0 = immediate; otherwise an epoch-ms instant that must be in the future.
    pub scheduled_enqueue_time_ms: i64,
    /// `<= 0` = none; capped by the queue's `default_ttl_ms`.
    pub ttl_ms: i64,
}

/// Guard: the schedule time `?1` is not after the database's `now`.
pub(super) const NOT_FUTURE: Statement = crate::guard!("{now} >= ?1");

/// The request's copies, one JSON array `?3` of
/// `[queue, dedup_key, request_hash, message_id, correlation_id, reply_to,
/// group_id, content_type, subject, properties, body_offset, body_length]`
/// (a direct send has one copy per message, a publish one per accepting
/// subscription), numbered by position, with `nth` counting the earlier
/// copies of the same `(queue, key)` in the request (only the first of them
/// can be new).
macro_rules! copies {
    () => {
        "cp AS (SELECT CAST(j.key AS INTEGER) AS pos, j.value AS v, j.value ->> 0 AS queue,
    j.value ->> 1 AS dkey,
    row_number() OVER (PARTITION BY j.value ->> 0, j.value ->> 1 ORDER BY CAST(j.key AS INTEGER)) AS nth
  FROM json_each(?3) j)"
    };
}

/// Whether the whole request may be written: name `?1` still has the
/// fingerprint `?2` the copies were routed with; a direct send's queue
/// exists; no copy lacks a group id in a `group_fifo` queue. Clock-free, so
/// every statement of the transaction reaches the same verdict.
macro_rules! send_ok {
    () => {
        "((SELECT count(*) || ':' || coalesce(max(revision), 0) FROM subscriptions WHERE topic = ?1) = ?2
  AND (?2 <> '0:0' OR EXISTS (SELECT 1 FROM queues WHERE name = ?1))
  AND NOT EXISTS (SELECT 1 FROM json_each(?3) g JOIN queues gq ON gq.name = g.value ->> 0
    WHERE gq.ordering_mode = 'group_fifo' AND g.value ->> 6 IS NULL))"
    };
}

/// Step 1, dedup gate (semantics §5): for each copy bound for a queue with
/// a window, claim `(queue, key)` unless an entry is still in its window or
/// an earlier copy of the request claimed it. A claim records the seq the
/// copy's insert will get: copies are inserted in request order from the
/// next AUTOINCREMENT value, so the seq of a new copy is that value plus the
/// number of new copies before it. A duplicate does not refresh `seen_at`:
/// the window is fixed.
pub(super) const RESERVE_DEDUP_KEYS: Statement = crate::statement!(concat!(
    "WITH ",
    copies!(),
    ",
p AS (SELECT cp.pos, cp.queue, cp.dkey, cp.v ->> 2 AS hash, q.dedup_window_ms AS window,
    CASE WHEN q.dedup_window_ms <= 0 THEN 1 WHEN cp.nth > 1 THEN 0
      WHEN EXISTS (SELECT 1 FROM dedup d WHERE d.queue = cp.queue AND d.dedup_key = cp.dkey
        AND d.seen_at > {now} - q.dedup_window_ms) THEN 0
      ELSE 1 END AS fresh
  FROM cp JOIN queues q ON q.name = cp.queue WHERE ",
    send_ok!(),
    "),
s AS (SELECT *, (SELECT coalesce(max(seq), 0) + 1 FROM sqlite_sequence WHERE name = 'messages')
    + sum(fresh) OVER (ORDER BY pos) - 1 AS seq FROM p)
INSERT INTO dedup (queue, dedup_key, request_hash, seq_number, seen_at)
SELECT queue, dkey, hash, seq, {now} FROM s WHERE window > 0 AND fresh = 1
ON CONFLICT (queue, dedup_key) DO UPDATE SET
  request_hash = excluded.request_hash, seq_number = excluded.seq_number, seen_at = excluded.seen_at"
));

/// Step 2: insert every new copy in request order: all copies of a queue
/// without a window, and in a queue with one the first copy of each key
/// whose claim step 1 just wrote (its seq is not below the next seq).
/// Bodies are slices of the one blob `?4`; `?5` schedule time (0 = now),
/// `?6` TTL. TTL is anchored at the visible time and capped by the queue
/// default (§4c). Returns the new seqs.
pub(super) const INSERT_MESSAGES: Statement = crate::statement!(concat!(
    "WITH ",
    copies!(),
    ",
nextseq(next) AS MATERIALIZED (SELECT coalesce(max(seq), 0) + 1 FROM sqlite_sequence WHERE name = 'messages')
INSERT INTO messages (queue, state, visible_at, enqueued_at, expires_at, message_id,
  correlation_id, reply_to, group_id, content_type, subject, properties, body)
SELECT cp.queue,
  CASE WHEN ?5 > 0 THEN 'scheduled' ELSE 'active' END,
  CASE WHEN ?5 > 0 THEN ?5 ELSE {now} END,
  {now},
  CASE WHEN cp.ttl > 0 THEN (CASE WHEN ?5 > 0 THEN ?5 ELSE {now} END) + cp.ttl ELSE 0 END,
  cp.v ->> 3, cp.v ->> 4, cp.v ->> 5, cp.v ->> 6, cp.v ->> 7, cp.v ->> 8, cp.v ->> 9,
  coalesce(substr(?4, (cp.v ->> 10) + 1, cp.v ->> 11), x'')
FROM (SELECT cp.*, q.dedup_window_ms AS window, CASE
    WHEN q.default_ttl_ms > 0 AND (?6 <= 0 OR ?6 > q.default_ttl_ms) THEN q.default_ttl_ms
    WHEN ?6 > 0 THEN ?6 ELSE 0 END AS ttl
  FROM cp JOIN queues q ON q.name = cp.queue) cp
WHERE ",
    send_ok!(),
    "
  AND (cp.window <= 0 OR (cp.nth = 1 AND EXISTS (SELECT 1 FROM dedup d
    WHERE d.queue = cp.queue AND d.dedup_key = cp.dkey AND d.seq_number >= (SELECT next FROM nextseq))))
ORDER BY cp.pos
RETURNING id"
));

/// Step 3, what the request needs to answer, as tagged rows:
/// `0` the verdict of [`send_ok!`] (`ok`, `topic_changed`, `queue_missing`,
/// `group_required`); `1` the final dedup entry of every `(queue, key)` of a
/// queue with a window; `2` the topic's current subscriptions when the
/// routing used a stale view, so the retry needs no extra read.
pub(super) const READ_OUTCOME: Statement = crate::statement!(
    "SELECT 0, CASE
    WHEN (SELECT count(*) || ':' || coalesce(max(revision), 0) FROM subscriptions WHERE topic = ?1) <> ?2
      THEN 'topic_changed'
    WHEN ?2 = '0:0' AND NOT EXISTS (SELECT 1 FROM queues WHERE name = ?1) THEN 'queue_missing'
    WHEN EXISTS (SELECT 1 FROM json_each(?3) g JOIN queues gq ON gq.name = g.value ->> 0
      WHERE gq.ordering_mode = 'group_fifo' AND g.value ->> 6 IS NULL) THEN 'group_required'
    ELSE 'ok' END, NULL, NULL, NULL
UNION ALL
SELECT 1, d.queue, d.dedup_key, d.request_hash, d.seq_number
FROM (SELECT DISTINCT j.value ->> 0 AS queue, j.value ->> 1 AS dkey FROM json_each(?3) j) k
  JOIN queues q ON q.name = k.queue AND q.dedup_window_ms > 0
  JOIN dedup d ON d.queue = k.queue AND d.dedup_key = k.dkey
UNION ALL
SELECT 2, subscription, filter, revision, NULL FROM subscriptions
WHERE topic = ?1 AND (SELECT count(*) || ':' || coalesce(max(revision), 0) FROM subscriptions WHERE topic = ?1) <> ?2"
);

/// One copy to insert: a message bound for one queue.
struct Delivery<'a> {
    queue: &'a str,
    message: usize,
    prepared: &'a Prepared<'a>,
}

struct Prepared<'a> {
    message: &'a OutgoingMessage,
    key: String,
    hash: String,
    /// Where the body starts in the request's body blob.
    offset: usize,
}

/// Where a Send lands, as evaluated before its transaction.
enum Attempt {
    Sent(Vec<i64>),
    /// The topic's subscriptions changed since the view used: here is the
    /// current one.
    Stale(Arc<TopicView>),
}

/// The verdict row of [`READ_OUTCOME`].
const OUTCOME_VERDICT: i64 = 0;
const OUTCOME_DEDUP: i64 = 1;
const OUTCOME_SUBSCRIPTION: i64 = 2;

impl<T: Transport> Engine<T> {
    /// Enqueues messages into a queue, or publishes them to a topic's
    /// matching subscriptions (semantics §4, §13.1). Returns one seq per
    /// message (0 = dedup conflict in a batch, or no subscription took it).
    /// Checks run in the wire contract's order. Whatever the batch size,
    /// the transaction is the same five statements (six for a schedule).
    pub async fn send(&self, request: &SendRequest) -> Result<Vec<i64>, EngineError> {
        require_name(&request.queue)?;
        let scheduled = request.scheduled_enqueue_time_ms;
        if scheduled < 0 {
            return Err(EngineError::InvalidArgument(format!(
                "scheduled_enqueue_time_ms must be a future epoch-ms instant (got {scheduled})"
            )));
        }
        let cap = self.limits.max_message_bytes;
        if let Some(big) = request.messages.iter().find(|m| m.body.len() > cap) {
            return Err(EngineError::MessageTooLarge {
                size: big.body.len(),
                cap,
            });
        }
        if request.messages.is_empty() {
            // Validation before work (decisions.md #5): the time check still runs.
            if scheduled > 0 {
                let mut program = Program::write();
                let not_future = program.guard(&NOT_FUTURE, vec![scheduled.into()]);
                return match self.run(&mut program).await {
                    Ok(_) => Ok(Vec::new()),
                    Err(RunError::Rejected(step)) if step == not_future => Err(not_in_future()),
                    Err(e) => Err(unexpected(e)),
                };
            }
            return Ok(Vec::new());
        }
        let prepared = prepare_all(&request.messages);
        let mut view = self.topics.get(&request.queue);
        // A cold or stale view costs one more attempt; a topic changing on
        // every attempt is contention, reported like any other.
        for _ in 0..3 {
            match self.try_send(request, &prepared, &view).await? {
                Attempt::Sent(seqs) => return Ok(seqs),
                Attempt::Stale(fresh) => {
                    self.topics.put(&request.queue, fresh.clone());
                    view = fresh;
                }
            }
        }
        Err(EngineError::Store(crate::store::StoreError::Unavailable(
            "the topic's subscriptions kept changing during the publish".into(),
        )))
    }

    async fn try_send(
        &self,
        request: &SendRequest,
        prepared: &[Prepared<'_>],
        view: &TopicView,
    ) -> Result<Attempt, EngineError> {
        let name = request.queue.as_str();
        let scheduled = request.scheduled_enqueue_time_ms;
        let deliveries: Vec<Delivery> = if view.is_topic() {
            self.route(view, prepared, scheduled)
        } else {
            prepared
                .iter()
                .enumerate()
                .map(|(message, p)| Delivery {
                    queue: name,
                    message,
                    prepared: p,
                })
                .collect()
        };
        let copies = copies_json(&deliveries);
        let key = || -> Vec<Value> {
            vec![
                name.into(),
                view.fingerprint.as_str().into(),
                copies.as_str().into(),
            ]
        };
        let mut insert_args = key();
        insert_args.extend([
            Value::Blob {
                base64: bodies_base64(&request.messages),
            },
            scheduled.into(),
            request.ttl_ms.into(),
        ]);
        let mut program = Program::write();
        let not_future =
            (scheduled > 0).then(|| program.guard(&NOT_FUTURE, vec![scheduled.into()]));
        program.step(&RESERVE_DEDUP_KEYS, key());
        let inserted = program.step(&INSERT_MESSAGES, insert_args);
        let outcome = program.step(&READ_OUTCOME, key());
        let committed = match self.run(&mut program).await {
            Ok(committed) => committed,
            Err(RunError::Rejected(step)) if Some(step) == not_future => {
                return Err(not_in_future())
            }
            Err(e) => return Err(unexpected(e)),
        };

        let mut verdict = String::new();
        let mut entries: HashMap<(&str, &str), (String, i64)> = HashMap::new();
        let mut subscriptions = Vec::new();
        for row in committed.rows(outcome) {
            match row.int(0)? {
                OUTCOME_VERDICT => verdict = row.text(1)?.to_owned(),
                OUTCOME_DEDUP => {
                    let queue = row.text(1)?;
                    let key = row.text(2)?;
                    // Borrow the names from the request, not the row.
                    if let Some(d) = deliveries
                        .iter()
                        .find(|d| d.queue == queue && d.prepared.key == key)
                    {
                        entries.insert(
                            (d.queue, d.prepared.key.as_str()),
                            (row.text(3)?.to_owned(), row.int(4)?),
                        );
                    }
                }
                OUTCOME_SUBSCRIPTION => subscriptions.push((
                    row.text(1)?.to_owned(),
                    row.opt_text(2)?.map(str::to_owned),
                    row.int(3)?,
                )),
                _ => {}
            }
        }
        match verdict.as_str() {
            "ok" => {}
            "topic_changed" => return Ok(Attempt::Stale(Arc::new(TopicView::new(subscriptions)))),
            "queue_missing" => return Err(EngineError::QueueNotFound),
            "group_required" => return Err(EngineError::GroupRequired),
            other => {
                return Err(EngineError::Store(crate::store::StoreError::Failed(
                    format!("unexpected send verdict {other:?}"),
                )))
            }
        }
        let mut new_seqs = Vec::new();
        for row in committed.rows(inserted) {
            new_seqs.push(row.int(0)?);
        }
        new_seqs.sort_unstable();
        let mut new_seqs = new_seqs.into_iter().peekable();

        // Per message, the seq of its last copy: the only copy of a direct
        // send, the alphabetically last subscription's copy of a publish.
        let mut seqs = vec![0; prepared.len()];
        let mut copies = vec![0usize; prepared.len()];
        let mut inserted_any = vec![false; prepared.len()];
        let mut claimed: HashSet<(&str, &str)> = HashSet::new();
        for d in &deliveries {
            let key = (d.queue, d.prepared.key.as_str());
            let first = claimed.insert(key);
            let (seq, new) = match entries.get(&key) {
                // A queue with a dedup window: the entry decides.
                Some((hash, seq)) => {
                    let new = first && new_seqs.peek() == Some(seq);
                    if new {
                        new_seqs.next();
                    }
                    (if *hash == d.prepared.hash { *seq } else { 0 }, new)
                }
                None => (new_seqs.next().unwrap_or(0), true),
            };
            self.note_enqueue(d.queue, new, seq, scheduled > 0);
            seqs[d.message] = seq;
            copies[d.message] += 1;
            inserted_any[d.message] |= seq != 0;
        }
        // A lone message that every copy refused as a dedup conflict.
        if prepared.len() == 1 && copies[0] > 0 && !inserted_any[0] {
            return Err(EngineError::DedupConflict);
        }
        Ok(Attempt::Sent(seqs))
    }

    /// Counts one copy's outcome (§19): a new row, a duplicate answered
    /// with the original seq, or a dedup conflict.
    fn note_enqueue(&self, queue: &str, inserted: bool, seq: i64, scheduled: bool) {
        if inserted {
            self.note(queue, Event::Enqueued, 1);
            if scheduled {
                self.note(queue, Event::Scheduled, 1);
            }
        } else if seq != 0 {
            self.note(queue, Event::Deduplicated, 1);
        } else {
            self.note(queue, Event::DedupConflict, 1);
        }
    }

    /// The copies a publish makes: each message to every subscription (in
    /// name order) whose filter accepts it; a filter error routes nothing.
    fn route<'a>(
        &self,
        view: &'a TopicView,
        prepared: &'a [Prepared<'a>],
        scheduled: i64,
    ) -> Vec<Delivery<'a>> {
        let enqueued_at_ms = self.publish_time_ms();
        let visible_at_ms = if scheduled > 0 {
            scheduled
        } else {
            enqueued_at_ms
        };
        let mut deliveries = Vec::new();
        for (message, p) in prepared.iter().enumerate() {
            let m = p.message;
            let input = FilterInput {
                subject: m.subject.as_deref().unwrap_or_default(),
                group_id: m.group_id.as_deref().unwrap_or_default(),
                correlation_id: m.correlation_id.as_deref().unwrap_or_default(),
                reply_to: m.reply_to.as_deref().unwrap_or_default(),
                message_id: m.message_id.as_deref().unwrap_or_default(),
                content_type: m.content_type.as_deref().unwrap_or_default(),
                properties: &m.properties,
                body: &m.body,
                enqueued_at_ms,
                visible_at_ms,
                now_ms: enqueued_at_ms,
            };
            for subscription in &view.subscriptions {
                match subscription.accepts(&input) {
                    Ok(true) => deliveries.push(Delivery {
                        queue: &subscription.name,
                        message,
                        prepared: p,
                    }),
                    Ok(false) => {}
                    Err(_) => self.note_filter_failure(),
                }
            }
        }
        deliveries
    }
}

fn not_in_future() -> EngineError {
    EngineError::InvalidArgument(
        "scheduled time must be in the future (use Send for immediate delivery)".into(),
    )
}

/// Dedup key (message_id, else the body's SHA-256) and request hash (the
/// body's SHA-256 only: metadata never takes part, semantics §5), and where
/// each body sits in the request's body blob.
fn prepare_all(messages: &[OutgoingMessage]) -> Vec<Prepared<'_>> {
    let mut offset = 0;
    messages
        .iter()
        .map(|message| {
            let hash = hex(&Sha256::digest(&message.body));
            let key = message.message_id.clone().unwrap_or_else(|| hash.clone());
            let prepared = Prepared {
                message,
                key,
                hash,
                offset,
            };
            offset += message.body.len();
            prepared
        })
        .collect()
}

/// Every body once, in message order, as one base64 blob: a publish's
/// copies slice the same bytes, and no body is held twice while encoding.
fn bodies_base64(messages: &[OutgoingMessage]) -> String {
    let total: usize = messages.iter().map(|m| m.body.len()).sum();
    let mut encoder = base64::write::EncoderStringWriter::from_consumer(
        String::with_capacity(total.div_ceil(3) * 4),
        &base64::engine::general_purpose::STANDARD,
    );
    for message in messages {
        // Writing into a String cannot fail.
        let _ = std::io::Write::write_all(&mut encoder, &message.body);
    }
    encoder.into_inner()
}

/// The copies as the JSON array the send statements read (`?3`).
fn copies_json(deliveries: &[Delivery]) -> String {
    let copies: Vec<serde_json::Value> = deliveries
        .iter()
        .map(|d| {
            let p = d.prepared;
            let m = p.message;
            serde_json::json!([
                d.queue,
                p.key,
                p.hash,
                m.message_id,
                m.correlation_id,
                m.reply_to,
                m.group_id,
                m.content_type,
                m.subject,
                properties_json(&m.properties),
                p.offset,
                m.body.len(),
            ])
        })
        .collect();
    serde_json::Value::Array(copies).to_string()
}

/// Stored properties: a JSON object, NULL when there are none.
fn properties_json(properties: &BTreeMap<String, String>) -> Option<String> {
    (!properties.is_empty()).then(|| serde_json::to_string(properties).unwrap_or_default())
}
