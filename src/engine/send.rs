//! Send and Schedule (semantics §4–§7): the whole request is one
//! transaction; dedup, TTL and scheduling are decided in SQL.

use std::collections::HashMap;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::{hex, require_name, unexpected, Engine, EngineError, QUEUE_MISSING};
use crate::store::hrana::Value;
use crate::store::{Program, RunError, Transport};

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
    /// The properties as a JSON object text; `None` when there are none.
    pub properties: Option<String>,
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

struct Prepared<'a> {
    message: &'a OutgoingMessage,
    key: String,
    hash: String,
}

impl<T: Transport> Engine<T> {
    /// Enqueues messages; returns one seq per message (0 = dedup conflict in
    /// a batch). Checks run in the wire contract's order.
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

        let mut program = Program::write();
        let not_future =
            (scheduled > 0).then(|| program.guard(&self.sql(NOT_FUTURE), vec![scheduled.into()]));
        if request.messages.is_empty() {
            // Validation before work (decisions.md #5): the time check still runs.
            if not_future.is_some() {
                self.run_send(&program, not_future, None, None).await?;
            }
            return Ok(Vec::new());
        }
        let queue = request.queue.as_str();
        let missing = program.guard(QUEUE_MISSING, vec![queue.into()]);
        let group = request
            .messages
            .iter()
            .any(|m| m.group_id.is_none())
            .then(|| program.guard(IS_GROUP_FIFO, vec![queue.into()]));

        let prepared: Vec<Prepared> = request.messages.iter().map(prepare).collect();
        let reserve_sql = self.sql(RESERVE_DEDUP_KEY);
        let insert_sql = self.sql(&INSERT_MESSAGE.replace("NEXT_SEQ", NEXT_SEQ));
        let inserts: Vec<_> = prepared
            .iter()
            .map(|p| {
                program.step(
                    reserve_sql.clone(),
                    vec![queue.into(), p.key.as_str().into(), p.hash.as_str().into()],
                );
                program.step(
                    insert_sql.clone(),
                    insert_args(queue, p, scheduled, request.ttl_ms),
                )
            })
            .collect();
        let keys: Vec<&str> = prepared.iter().map(|p| p.key.as_str()).collect();
        let keys_json = serde_json::to_string(&keys).unwrap_or_default();
        let readback = program.step(READ_DEDUP_KEYS, vec![queue.into(), keys_json.into()]);

        let committed = self
            .run_send(&program, not_future, Some(missing), group)
            .await?;
        let mut entries: HashMap<String, (String, i64)> = HashMap::new();
        for row in committed.rows(readback) {
            entries.insert(
                row.text(0)?.to_owned(),
                (row.text(1)?.to_owned(), row.int(2)?),
            );
        }
        let mut seqs = Vec::with_capacity(prepared.len());
        for (p, insert) in prepared.iter().zip(&inserts) {
            let seq = match committed.first_row(*insert) {
                Some(row) => row.int(0)?,
                None => match entries.get(p.key.as_str()) {
                    Some((hash, seq)) if *hash == p.hash => *seq,
                    _ => 0,
                },
            };
            seqs.push(seq);
        }
        if seqs.len() == 1 && seqs[0] == 0 {
            return Err(EngineError::DedupConflict);
        }
        Ok(seqs)
    }

    async fn run_send(
        &self,
        program: &Program,
        not_future: Option<crate::store::StepId>,
        missing: Option<crate::store::StepId>,
        group: Option<crate::store::StepId>,
    ) -> Result<crate::store::Committed, EngineError> {
        match self.store.run(program).await {
            Ok(committed) => Ok(committed),
            Err(RunError::Rejected(step)) if Some(step) == not_future => {
                Err(EngineError::InvalidArgument(
                    "scheduled time must be in the future (use Send for immediate delivery)".into(),
                ))
            }
            Err(RunError::Rejected(step)) if Some(step) == missing => {
                Err(EngineError::QueueNotFound)
            }
            Err(RunError::Rejected(step)) if Some(step) == group => Err(EngineError::GroupRequired),
            Err(e) => Err(unexpected(e)),
        }
    }
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
        m.properties.as_deref().into(),
        Value::Blob {
            base64: base64::engine::general_purpose::STANDARD.encode(&m.body),
        },
    ]
}
