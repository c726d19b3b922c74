//! Send and Schedule (docs/semantics.md#send, #scheduling): the whole request is one
//! transaction; dedup, TTL and scheduling are decided in SQL.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::topics::TopicView;
use super::Event;
use super::{hex, require_name, unexpected, Engine, EngineError};
use crate::filter::FilterInput;
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

/// Whether the whole request may be written: name `?1` still has the
/// fingerprint `?2` the copies were routed with; a direct send's queue
/// exists; none of the queues `?4` that a copy without a group id is bound
/// for is `group_fifo`. Clock-free, so [`READ_OUTCOME`] reaches the verdict
/// [`INSERT_MESSAGES`] acted on.
macro_rules! send_ok {
    () => {
        concat!(
            fingerprint!(),
            " = ?2 AND NOT (",
            queue_missing!(),
            ") AND NOT (",
            group_missing!(),
            ")"
        )
    };
}

/// Topic `?1`'s fingerprint: its subscription count and highest revision
/// (migration 0003); `0:0` for a name that is not a topic.
macro_rules! fingerprint {
    () => {
        "(SELECT count(*) || ':' || coalesce(max(revision), 0) FROM subscriptions WHERE topic = ?1)"
    };
}

/// A direct send (fingerprint `0:0`) to a queue `?1` that does not exist.
macro_rules! queue_missing {
    () => {
        "?2 = '0:0' AND NOT EXISTS (SELECT 1 FROM queues WHERE name = ?1)"
    };
}

/// A copy without a group id is bound for a `group_fifo` queue (`?4`).
macro_rules! group_missing {
    () => {
        "EXISTS (SELECT 1 FROM json_each(?4) g JOIN queues gq ON gq.name = g.value
    WHERE gq.ordering_mode = 'group_fifo')"
    };
}

/// The whole Send (docs/semantics.md#send, #ttl) in one statement. `?3` is the JSON
/// array of copies (see [`copies_json`]) — one per message for a direct
/// send, one per accepting subscription for a publish; `first` marks the
/// first copy of its `(queue, key)` in the request. `?5` schedule time
/// (0 = now), `?6` TTL, anchored at the visible time and capped by the queue
/// default (docs/semantics.md#send). Bodies are slices of the blobs `?7`…`?22`, bound last
/// because the program writes them from the request's own bodies
/// (`step_with_blobs`): several, because libSQL refuses a single value over
/// a few MiB (see [`BODY_CHUNK_BYTES`]).
///
/// A copy bound for a queue with a dedup window is inserted only if it is
/// the first of its key and no entry is still in its window; it carries
/// its key and hash, and the `dedup_on_insert` trigger (migration 0004)
/// records the entry with the row's own seq. A duplicate does not refresh
/// `seen_at`: the window is fixed. Returns the new seqs.
pub(super) const INSERT_MESSAGES: Statement = crate::statement!(concat!(
    "INSERT INTO messages (queue, state, visible_at, enqueued_at, expires_at, message_id,
  correlation_id, reply_to, group_id, content_type, subject, properties, body, dedup_key,
  request_hash)
SELECT cp.queue,
  CASE WHEN ?5 > 0 THEN 'scheduled' ELSE 'active' END,
  CASE WHEN ?5 > 0 THEN ?5 ELSE {now} END,
  {now},
  CASE WHEN cp.ttl > 0 THEN (CASE WHEN ?5 > 0 THEN ?5 ELSE {now} END) + cp.ttl ELSE 0 END,
  cp.v ->> 6, cp.v ->> 7, cp.v ->> 8, cp.v ->> 9, cp.v ->> 10, cp.v ->> 11, cp.v ->> 12,
  coalesce(substr(CASE cp.v ->> 4 WHEN 0 THEN ?7 WHEN 1 THEN ?8 WHEN 2 THEN ?9 WHEN 3 THEN ?10 WHEN 4 THEN ?11 WHEN 5 THEN ?12 WHEN 6 THEN ?13 WHEN 7 THEN ?14 WHEN 8 THEN ?15 WHEN 9 THEN ?16 WHEN 10 THEN ?17 WHEN 11 THEN ?18 WHEN 12 THEN ?19 WHEN 13 THEN ?20 WHEN 14 THEN ?21 WHEN 15 THEN ?22 END,
    (cp.v ->> 1) + 1, cp.v ->> 2), x''),
  CASE WHEN cp.window > 0 THEN cp.dkey END,
  CASE WHEN cp.window > 0 THEN cp.v ->> 0 END
FROM (SELECT CAST(j.key AS INTEGER) AS pos, j.value AS v, coalesce(j.value ->> 5, ?1) AS queue,
    coalesce(j.value ->> 6, j.value ->> 0) AS dkey, q.dedup_window_ms AS window, CASE
      WHEN q.default_ttl_ms > 0 AND (?6 <= 0 OR ?6 > q.default_ttl_ms) THEN q.default_ttl_ms
      WHEN ?6 > 0 THEN ?6 ELSE 0 END AS ttl
  FROM json_each(?3) j JOIN queues q ON q.name = coalesce(j.value ->> 5, ?1)) cp
WHERE ",
    send_ok!(),
    "
  AND (cp.window <= 0 OR (cp.v ->> 3 = 1 AND NOT EXISTS (SELECT 1 FROM dedup d
    WHERE d.queue = cp.queue AND d.dedup_key = cp.dkey AND d.seen_at > {now} - cp.window)))
ORDER BY cp.pos
RETURNING id"
));

/// Step 3, what the request needs to answer, as tagged rows (`?3` here is
/// just the distinct `[dedup_key, queue]` pairs, not every copy; a pair
/// without its queue is for `?1`, see [`dedup_keys_json`]):
/// `0` the verdict of `send_ok!` (`ok`, `topic_changed`, `queue_missing`,
/// `group_required`); `1` the final dedup entry of every `(queue, key)` of a
/// queue with a window; `2` the topic's current subscriptions when the
/// routing used a stale view, so the retry needs no extra read; `3` each
/// destination queue someone waits on (`queues.waiters_until`), with the
/// database time, for the wake hint (docs/semantics.md#long-polling).
pub(super) const READ_OUTCOME: Statement = crate::statement!(concat!(
    "SELECT 0, CASE WHEN ",
    fingerprint!(),
    " <> ?2 THEN 'topic_changed' WHEN ",
    queue_missing!(),
    " THEN 'queue_missing' WHEN ",
    group_missing!(),
    " THEN 'group_required' ELSE 'ok' END, NULL, NULL, NULL
UNION ALL
SELECT 1, d.queue, d.dedup_key, d.request_hash, d.seq_number
FROM (SELECT DISTINCT coalesce(j.value ->> 1, ?1) AS queue, j.value ->> 0 AS dkey
    FROM json_each(?3) j) k
  JOIN queues q ON q.name = k.queue AND q.dedup_window_ms > 0
  JOIN dedup d ON d.queue = k.queue AND d.dedup_key = k.dkey
UNION ALL
SELECT 2, subscription, filter, revision, NULL FROM subscriptions WHERE topic = ?1 AND ",
    fingerprint!(),
    " <> ?2
UNION ALL
SELECT 3, q.name, NULL, NULL, {now} FROM queues q
WHERE q.name IN (SELECT DISTINCT coalesce(j.value ->> 1, ?1) FROM json_each(?3) j)
  AND q.waiters_until > {now}"
));

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
    /// The body blob holding the body, and where it starts in it.
    chunk: usize,
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
const OUTCOME_WAITERS: i64 = 3;

/// Adds what the insert just before it added to each queue's
/// `sent_total` (pgmq metrics' `total_messages`, docs/pgmq.md). That
/// insert's rows are the last `changes()` ids AUTOINCREMENT handed out
/// (contiguous: one writer, one statement), so they are one rowid range;
/// one write per queue and request instead of one per message. It must
/// run right after the insert, before any other write changes
/// `changes()`. The unary `+` keeps SQLite from counting through the
/// queue's index, which would read the queue's whole backlog on every Send
/// (measured: 64 more rows per Send 64 of a growing queue).
pub(super) const COUNT_SENT: Statement = crate::statement!(
    "\
UPDATE queues SET sent_total = sent_total + (
  SELECT count(*) FROM messages m
  WHERE m.id > (SELECT seq FROM sqlite_sequence WHERE name = 'messages') - changes()
    AND +m.queue = queues.name)
WHERE changes() > 0 AND name IN (
  SELECT m.queue FROM messages m
  WHERE m.id > (SELECT seq FROM sqlite_sequence WHERE name = 'messages') - changes())"
);

impl<T: Transport> Engine<T> {
    /// Enqueues messages into a queue, or publishes them to a topic's
    /// matching subscriptions (docs/semantics.md#send, #filters). Returns one seq per
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
        super::at_most(
            "scheduled_enqueue_time_ms",
            scheduled,
            super::MAX_INSTANT_MS,
        )?;
        super::at_most("ttl_ms", request.ttl_ms, super::MAX_DURATION_MS)?;
        let cap = self.limits.max_message_bytes;
        let too_large = request.messages.iter().find(|m| m.body.len() > cap);
        if request.messages.is_empty() || too_large.is_some() {
            // docs/http-api.md#rpcs: a scheduled request is time-checked before anything
            // else, even when it has nothing to enqueue (docs/deviations.md D5) or
            // a body over the cap.
            if scheduled > 0 {
                self.check_in_future(scheduled).await?;
            }
            return match too_large {
                Some(big) => Err(EngineError::MessageTooLarge {
                    size: big.body.len(),
                    cap,
                }),
                None => Ok(Vec::new()),
            };
        }
        let Some(prepared) = prepare_all(&request.messages) else {
            // Only reachable with a per-message cap raised far above 1 MiB.
            return Err(EngineError::MessageTooLarge {
                size: request.messages.iter().map(|m| m.body.len()).sum(),
                cap: BODY_CHUNKS * BODY_CHUNK_BYTES,
            });
        };
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

    /// The time check alone, for a request that writes nothing.
    async fn check_in_future(&self, scheduled: i64) -> Result<(), EngineError> {
        let mut program = Program::read();
        let not_future = program.guard(&NOT_FUTURE, vec![scheduled.into()]);
        match self.run(&mut program).await {
            Ok(_) => Ok(()),
            Err(RunError::Rejected(step)) if step == not_future => Err(not_in_future()),
            Err(e) => Err(unexpected(e)),
        }
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
        let ungrouped = ungrouped_queues(&deliveries);
        let insert_args = vec![
            name.into(),
            view.fingerprint.as_str().into(),
            copies_json(&deliveries, name).into(),
            ungrouped.as_str().into(),
            scheduled.into(),
            request.ttl_ms.into(),
        ];
        let outcome_args = vec![
            name.into(),
            view.fingerprint.as_str().into(),
            dedup_keys_json(&deliveries, name).into(),
            ungrouped.into(),
        ];
        // Every body once, in message order, borrowed: a publish's copies
        // slice the same bytes, and no body is copied to encode them.
        let mut bodies = vec![Vec::new(); BODY_CHUNKS];
        for p in prepared {
            if let Some(chunk) = bodies.get_mut(p.chunk) {
                chunk.push(p.message.body.as_slice());
            }
        }
        // A scheduled message is claimable only once it activates.
        let mut program = Program::write_on(name).waking(scheduled == 0);
        let not_future =
            (scheduled > 0).then(|| program.guard(&NOT_FUTURE, vec![scheduled.into()]));
        let inserted = program.step_with_blobs(&INSERT_MESSAGES, insert_args, bodies);
        program.step(&COUNT_SENT, vec![]);
        let outcome = program.step(&READ_OUTCOME, outcome_args);
        let committed = match self.run(&mut program).await {
            Ok(committed) => committed,
            Err(RunError::Rejected(step)) if Some(step) == not_future => {
                return Err(not_in_future())
            }
            Err(e) => return Err(unexpected(e)),
        };

        let mut verdict = String::new();
        let mut entries: HashMap<(&str, &str), (&str, i64)> = HashMap::new();
        let mut subscriptions = Vec::new();
        let mut waiting: HashMap<&str, i64> = HashMap::new();
        for row in committed.rows(outcome) {
            match row.int(0)? {
                OUTCOME_VERDICT => verdict = row.text(1)?.to_owned(),
                OUTCOME_DEDUP => {
                    entries.insert((row.text(1)?, row.text(2)?), (row.text(3)?, row.int(4)?));
                }
                OUTCOME_SUBSCRIPTION => subscriptions.push((
                    row.text(1)?.to_owned(),
                    row.opt_text(2)?.map(str::to_owned),
                    row.int(3)?,
                )),
                OUTCOME_WAITERS => {
                    waiting.insert(row.text(1)?, row.int(4)?);
                }
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
        let mut woken: HashSet<&str> = HashSet::new();
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
            // A scheduled message is not claimable yet: its activation,
            // observed by a later request, wakes the queue instead.
            if new && seq != 0 && scheduled == 0 && woken.insert(d.queue) {
                if let Some(at_ms) = waiting.get(d.queue) {
                    self.note_claimable(d.queue, *at_ms);
                }
            }
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

    /// Counts one copy's outcome (docs/semantics.md#observability): a new row, a duplicate answered
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

/// The number of body blobs a Send binds, and the most bytes one holds.
/// libSQL (sqld 0.24) refuses a value of 8 MiB ("string or blob too big"),
/// so bodies travel in blobs of at most 4 MiB; a body is never split. With
/// bodies capped at 1 MiB, each blob holds more than 3 MiB, so 16 blobs
/// carry more than the 32 MiB a request may hold.
pub(super) const BODY_CHUNKS: usize = 16;
pub(super) const BODY_CHUNK_BYTES: usize = 4 << 20;

/// Dedup key (message_id, else the body's SHA-256) and request hash (the
/// body's SHA-256 only: metadata never takes part, docs/semantics.md#dedup), and where
/// each body sits: blobs are filled in message order up to
/// [`BODY_CHUNK_BYTES`]. `None` when the bodies need more than
/// [`BODY_CHUNKS`] blobs.
fn prepare_all(messages: &[OutgoingMessage]) -> Option<Vec<Prepared<'_>>> {
    let (mut chunk, mut offset) = (0, 0);
    let mut prepared = Vec::with_capacity(messages.len());
    for message in messages {
        let len = message.body.len();
        if offset > 0 && offset + len > BODY_CHUNK_BYTES {
            chunk += 1;
            offset = 0;
        }
        if chunk >= BODY_CHUNKS {
            return None;
        }
        let hash = hex(&Sha256::digest(&message.body));
        let key = message.message_id.clone().unwrap_or_else(|| hash.clone());
        prepared.push(Prepared {
            message,
            key,
            hash,
            chunk,
            offset,
        });
        offset += len;
    }
    Some(prepared)
}

/// The copies as the JSON array [`INSERT_MESSAGES`] reads (`?3`), each
/// `[request_hash, body_offset, body_length, first, body_chunk, queue,
/// message_id, correlation_id, reply_to, group_id, content_type, subject,
/// properties]` without its trailing nulls: a message's request is mostly
/// its copies, and most copies are a hash and four numbers (a Send of 64
/// small messages is 15.1 KB, against 22.5 KB with every field written:
/// `tests/statement_counts.rs`). A
/// copy for the Send's own queue names none (`?1`), and the dedup key is the
/// message id, else the hash, so it is not written apart. Written straight
/// from borrowed fields (no intermediate JSON tree: 10,000 copies would
/// make one of ~130,000 values).
fn copies_json(deliveries: &[Delivery], name: &str) -> String {
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    let mut out = String::from("[");
    for (i, d) in deliveries.iter().enumerate() {
        let first = seen.insert((d.queue, d.prepared.key.as_str()));
        let p = d.prepared;
        let m = p.message;
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        push_json_str(&mut out, &p.hash);
        // Writing to a `String` cannot fail.
        let _ = write!(
            out,
            ",{},{},{},{}",
            p.offset,
            m.body.len(),
            u8::from(first),
            p.chunk
        );
        let properties = properties_json(&m.properties);
        let optional = [
            (d.queue != name).then_some(d.queue),
            m.message_id.as_deref(),
            m.correlation_id.as_deref(),
            m.reply_to.as_deref(),
            m.group_id.as_deref(),
            m.content_type.as_deref(),
            m.subject.as_deref(),
            properties.as_deref(),
        ];
        let written = optional
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |at| at + 1);
        for field in &optional[..written] {
            out.push(',');
            match field {
                Some(text) => push_json_str(&mut out, text),
                None => out.push_str("null"),
            }
        }
        out.push(']');
    }
    out.push(']');
    out
}

/// The distinct `[dedup_key, queue]` pairs of the copies, the only part of
/// them [`READ_OUTCOME`] reads (`?3`; the full copies would travel twice),
/// the queue left out when it is the Send's own (`?1`).
fn dedup_keys_json(deliveries: &[Delivery], name: &str) -> String {
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    let mut out = String::from("[");
    for d in deliveries {
        let key = d.prepared.key.as_str();
        if !seen.insert((d.queue, key)) {
            continue;
        }
        if out.len() > 1 {
            out.push(',');
        }
        out.push('[');
        push_json_str(&mut out, key);
        if d.queue != name {
            out.push(',');
            push_json_str(&mut out, d.queue);
        }
        out.push(']');
    }
    out.push(']');
    out
}

/// `text` as a JSON string, as serde_json writes it. Most are hashes and
/// plain names with nothing to escape: those are copied between quotes
/// without serde_json's own allocation, once for every field of every copy.
fn push_json_str(out: &mut String, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        // Serializing a borrowed string cannot fail.
        out.push_str(&serde_json::to_string(text).unwrap_or_default());
    }
}

/// The queues a copy without a group id is bound for, as a JSON array
/// (`?4`): a `group_fifo` one among them refuses the request.
fn ungrouped_queues(deliveries: &[Delivery]) -> String {
    let mut queues: Vec<&str> = deliveries
        .iter()
        .filter(|d| d.prepared.message.group_id.is_none())
        .map(|d| d.queue)
        .collect();
    queues.sort_unstable();
    queues.dedup();
    serde_json::to_string(&queues).unwrap_or_default()
}

/// Stored properties: a JSON object, NULL when there are none.
fn properties_json(properties: &BTreeMap<String, String>) -> Option<String> {
    (!properties.is_empty()).then(|| serde_json::to_string(properties).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &[u8]) -> OutgoingMessage {
        OutgoingMessage {
            body: body.to_vec(),
            ..OutgoingMessage::default()
        }
    }

    /// A copy is its hash and four numbers, then the optional fields up to
    /// the last one it has; its queue only when it is not the Send's own;
    /// the dedup key never apart (the message id, else the hash).
    #[test]
    fn copies_leave_out_what_the_statement_can_infer() {
        let plain = message(b"hi");
        let mut with_metadata = message(b"hey");
        with_metadata.message_id = Some("m1".into());
        // One of each character JSON escapes, in a field of its own.
        with_metadata.correlation_id = Some("c\"".into());
        with_metadata.reply_to = Some("r\\".into());
        with_metadata.subject = Some("s\n".into());
        let messages = [plain, with_metadata];
        let prepared = prepare_all(&messages).expect("prepared");
        let (h0, h1) = (prepared[0].hash.clone(), prepared[1].hash.clone());
        let deliveries = vec![
            Delivery {
                queue: "q",
                message: 0,
                prepared: &prepared[0],
            },
            Delivery {
                queue: "q",
                message: 0,
                prepared: &prepared[0],
            },
            Delivery {
                queue: "other",
                message: 1,
                prepared: &prepared[1],
            },
        ];
        assert_eq!(
            copies_json(&deliveries, "q"),
            format!(
                r#"[["{h0}",0,2,1,0],["{h0}",0,2,0,0],["{h1}",2,3,1,0,"other","m1","c\"","r\\",null,null,"s\n"]]"#
            )
        );
        assert_eq!(
            dedup_keys_json(&deliveries, "q"),
            format!(r#"[["{h0}"],["m1","other"]]"#)
        );
    }
}
