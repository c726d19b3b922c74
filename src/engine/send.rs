//! Send and Schedule (semantics §4–§7): the whole request is one
//! transaction; dedup, TTL and scheduling are decided in SQL.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::topics::{TopicView, TOPIC_CHANGED, TOPIC_SUBSCRIPTIONS};
use super::{hex, require_name, unexpected, Engine, EngineError, QUEUE_MISSING};
use crate::filter::FilterInput;
use crate::observe::Event;
use crate::store::hrana::Value;
use crate::store::{Program, RunError, StepId, Transport};

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

/// The schedule time is not after the database's `now`.
pub(super) const NOT_FUTURE: &str = "{now} >= ?1";
pub(super) const IS_GROUP_FIFO: &str =
    "EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND ordering_mode = 'group_fifo')";

/// The id the next insert into `messages` receives: AUTOINCREMENT hands out
/// one more than the largest id ever used, which `sqlite_sequence` records.
/// Inside one write transaction nothing else inserts in between.
pub(super) const NEXT_SEQ: &str =
    "(SELECT coalesce(max(seq), 0) + 1 FROM sqlite_sequence WHERE name = 'messages')";

/// Dedup gate, step 1 (queues with a window only): claim `(queue, key)` for
/// the message about to be inserted, unless an entry is still in its window.
/// The claim records the seq the insert will get, which marks it as ours.
/// A duplicate does not refresh `seen_at`: the window is fixed.
pub(super) const RESERVE_DEDUP_KEY: &str = "\
INSERT INTO dedup (queue, dedup_key, request_hash, seq_number, seen_at)
SELECT name, ?2, ?3, (SELECT coalesce(max(seq), 0) + 1 FROM sqlite_sequence WHERE name = 'messages'), {now}
FROM queues WHERE name = ?1 AND dedup_window_ms > 0
ON CONFLICT (queue, dedup_key) DO UPDATE SET
  request_hash = excluded.request_hash,
  seq_number = excluded.seq_number,
  seen_at = excluded.seen_at
WHERE dedup.seen_at <= excluded.seen_at - (SELECT dedup_window_ms FROM queues WHERE name = excluded.queue)";

/// Dedup gate, step 2 / plain insert: inserts unless the queue dedups and
/// the key was not claimed for this very insert. TTL is anchored at the
/// visible time and capped by the queue default (§4c).
pub(super) const INSERT_MESSAGE: &str = "\
INSERT INTO messages (queue, state, visible_at, enqueued_at, expires_at, message_id,
  correlation_id, reply_to, group_id, content_type, subject, properties, body)
SELECT q.name,
  CASE WHEN ?3 > 0 THEN 'scheduled' ELSE 'active' END,
  CASE WHEN ?3 > 0 THEN ?3 ELSE {now} END,
  {now},
  CASE WHEN ttl.ms > 0 THEN (CASE WHEN ?3 > 0 THEN ?3 ELSE {now} END) + ttl.ms ELSE 0 END,
  ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12
FROM queues q, (SELECT CASE
    WHEN default_ttl_ms > 0 AND (?4 <= 0 OR ?4 > default_ttl_ms) THEN default_ttl_ms
    WHEN ?4 > 0 THEN ?4 ELSE 0 END AS ms FROM queues WHERE name = ?1) ttl
WHERE q.name = ?1 AND (q.dedup_window_ms <= 0 OR EXISTS (
  SELECT 1 FROM dedup d WHERE d.queue = ?1 AND d.dedup_key = ?2 AND d.seq_number = NEXT_SEQ))
RETURNING id";

/// Final dedup entries of the request's keys (queues with a window only).
pub(super) const READ_DEDUP_KEYS: &str = "\
SELECT d.dedup_key, d.request_hash, d.seq_number FROM dedup d JOIN queues q ON q.name = d.queue
WHERE d.queue = ?1 AND q.dedup_window_ms > 0 AND d.dedup_key IN (SELECT value FROM json_each(?2))";

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
}

/// Where a Send lands, as evaluated before its transaction.
enum Attempt {
    Sent(Vec<i64>),
    /// The topic's subscriptions changed since the view used: here is the
    /// current one.
    Stale(Arc<TopicView>),
}

impl<T: Transport> Engine<T> {
    /// Enqueues messages into a queue, or publishes them to a topic's
    /// matching subscriptions (semantics §4, §13.1). Returns one seq per
    /// message (0 = dedup conflict in a batch, or no subscription took it).
    /// Checks run in the wire contract's order.
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
                let not_future = program.guard(&self.sql(NOT_FUTURE), vec![scheduled.into()]);
                return match self.run(&mut program).await {
                    Ok(_) => Ok(Vec::new()),
                    Err(RunError::Rejected(step)) if step == not_future => Err(not_in_future()),
                    Err(e) => Err(unexpected(e)),
                };
            }
            return Ok(Vec::new());
        }
        let prepared: Vec<Prepared> = request.messages.iter().map(prepare).collect();
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
        let mut program = Program::write();
        let not_future =
            (scheduled > 0).then(|| program.guard(&self.sql(NOT_FUTURE), vec![scheduled.into()]));
        let current = program.step(TOPIC_SUBSCRIPTIONS, vec![name.into()]);
        let changed = program.guard(
            TOPIC_CHANGED,
            vec![name.into(), view.fingerprint.as_str().into()],
        );
        let mut missing = None;
        let deliveries: Vec<Delivery> = if view.is_topic() {
            self.route(view, prepared, scheduled)
        } else {
            missing = Some(program.guard(QUEUE_MISSING, vec![name.into()]));
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

        let mut targets: Vec<&str> = deliveries.iter().map(|d| d.queue).collect();
        targets.sort_unstable();
        targets.dedup();
        let mut group_guards = Vec::new();
        for queue in &targets {
            let ungrouped = deliveries
                .iter()
                .any(|d| d.queue == *queue && d.prepared.message.group_id.is_none());
            if ungrouped {
                group_guards.push(program.guard(IS_GROUP_FIFO, vec![(*queue).into()]));
            }
        }
        let reserve_sql = self.sql(RESERVE_DEDUP_KEY);
        let insert_sql = self.sql(&INSERT_MESSAGE.replace("NEXT_SEQ", NEXT_SEQ));
        let inserts: Vec<StepId> = deliveries
            .iter()
            .map(|d| {
                let p = d.prepared;
                program.step(
                    reserve_sql.clone(),
                    vec![
                        d.queue.into(),
                        p.key.as_str().into(),
                        p.hash.as_str().into(),
                    ],
                );
                program.step(
                    insert_sql.clone(),
                    insert_args(d.queue, p, scheduled, request.ttl_ms),
                )
            })
            .collect();
        let readbacks: Vec<(&str, StepId)> = targets
            .iter()
            .map(|queue| {
                let keys: Vec<&str> = deliveries
                    .iter()
                    .filter(|d| d.queue == *queue)
                    .map(|d| d.prepared.key.as_str())
                    .collect();
                let keys_json = serde_json::to_string(&keys).unwrap_or_default();
                let step = program.step(READ_DEDUP_KEYS, vec![(*queue).into(), keys_json.into()]);
                (*queue, step)
            })
            .collect();

        let committed = match self.run_keeping(&mut program).await {
            Ok(committed) => committed,
            Err((RunError::Rejected(step), Some(partial))) if step == changed => {
                return Ok(Attempt::Stale(Arc::new(TopicView::from_rows(
                    &partial, current,
                )?)));
            }
            Err((RunError::Rejected(step), _)) if Some(step) == not_future => {
                return Err(not_in_future())
            }
            Err((RunError::Rejected(step), _)) if Some(step) == missing => {
                return Err(EngineError::QueueNotFound)
            }
            Err((RunError::Rejected(step), _)) if group_guards.contains(&step) => {
                return Err(EngineError::GroupRequired)
            }
            Err((e, _)) => return Err(unexpected(e)),
        };

        let mut entries: HashMap<(&str, String), (String, i64)> = HashMap::new();
        for (queue, step) in &readbacks {
            for row in committed.rows(*step) {
                entries.insert(
                    (*queue, row.text(0)?.to_owned()),
                    (row.text(1)?.to_owned(), row.int(2)?),
                );
            }
        }
        // Per message, the seq of its last copy: the only copy of a direct
        // send, the alphabetically last subscription's copy of a publish.
        let mut seqs = vec![0; prepared.len()];
        let mut copies = vec![0usize; prepared.len()];
        let mut inserted_any = vec![false; prepared.len()];
        for (d, insert) in deliveries.iter().zip(&inserts) {
            let seq = match committed.first_row(*insert) {
                Some(row) => row.int(0)?,
                None => match entries.get(&(d.queue, d.prepared.key.clone())) {
                    Some((hash, seq)) if *hash == d.prepared.hash => *seq,
                    _ => 0,
                },
            };
            let inserted = committed.first_row(*insert).is_some();
            self.note_enqueue(d.queue, inserted, seq, scheduled > 0);
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
/// body's SHA-256 only: metadata never takes part, semantics §5).
fn prepare(message: &OutgoingMessage) -> Prepared<'_> {
    let hash = hex(&Sha256::digest(&message.body));
    let key = message.message_id.clone().unwrap_or_else(|| hash.clone());
    Prepared { message, key, hash }
}

fn insert_args(queue: &str, p: &Prepared, scheduled: i64, ttl: i64) -> Vec<Value> {
    let m = p.message;
    vec![
        queue.into(),
        p.key.as_str().into(),
        scheduled.into(),
        ttl.into(),
        m.message_id.as_deref().into(),
        m.correlation_id.as_deref().into(),
        m.reply_to.as_deref().into(),
        m.group_id.as_deref().into(),
        m.content_type.as_deref().into(),
        m.subject.as_deref().into(),
        properties_json(&m.properties).as_deref().into(),
        Value::Blob {
            base64: base64::engine::general_purpose::STANDARD.encode(&m.body),
        },
    ]
}

/// Stored properties: a JSON object, NULL when there are none.
fn properties_json(properties: &BTreeMap<String, String>) -> Option<String> {
    (!properties.is_empty()).then(|| serde_json::to_string(properties).unwrap_or_default())
}
