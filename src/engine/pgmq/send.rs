//! Send and batch send: the messages of one request in one INSERT.

use super::{ids, VisibleAt};
use crate::engine::{unexpected, Engine, EngineError, Event, QUEUE_MISSING};
use crate::store::{Program, RunError, Statement, Transport};

/// The largest total of message and header text one send may carry: the
/// messages travel as one bound JSON array, and libSQL refuses a single
/// value of a few MiB (see the Connect-JSON send's body chunks).
pub const MAX_SEND_TEXT_BYTES: usize = 4 * 1_048_576;

/// One message: its JSON text (stored as the body, §5.3) and its headers'
/// JSON object text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgmqOutgoing {
    pub message: String,
    pub headers: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgmqSend {
    pub queue: String,
    pub messages: Vec<PgmqOutgoing>,
    /// `None`: visible at once.
    pub delay: Option<VisibleAt>,
}

/// Guard: a group_fifo queue needs a group id on every message, which
/// pgmq's messages never carry.
const GROUP_FIFO: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND ordering_mode = 'group_fifo')");

/// Inserts `?2`, a JSON array of `[message, headers]` texts, in order,
/// visible at `coalesce(?4, now + ?3)` (scheduled while in the future) and
/// with the queue's default TTL from then. Returns the new ids, each with
/// its state and whether the queue has waiters to wake (docs/semantics.md#long-polling).
pub(in crate::engine) const INSERT: Statement = crate::statement!(concat!(
    "\
INSERT INTO messages (queue, state, visible_at, enqueued_at, expires_at, body, headers)
SELECT ?1,
  CASE WHEN coalesce(?4, {now} + ?3) > {now} THEN 'scheduled' ELSE 'active' END,
  max(coalesce(?4, {now} + ?3), 0),
  {now},
  CASE WHEN q.default_ttl_ms > 0
    THEN max(coalesce(?4, {now} + ?3), {now}) + q.default_ttl_ms ELSE 0 END,
  CAST(j.value ->> 0 AS BLOB),
  j.value ->> 1
FROM json_each(?2) j JOIN queues q ON q.name = ?1
ORDER BY CAST(j.key AS INTEGER)
RETURNING id, state, ",
    crate::engine::maintenance::waiters!()
));

impl<T: Transport> Engine<T> {
    /// Enqueues the messages; returns their ids in request order.
    pub async fn pgmq_send(&self, request: &PgmqSend) -> Result<Vec<i64>, EngineError> {
        let (relative, absolute) = match request.delay {
            Some(at) => at.params()?,
            None => (0, None),
        };
        let size: usize = request
            .messages
            .iter()
            .map(|m| m.message.len() + m.headers.as_ref().map_or(0, String::len))
            .sum();
        if size > MAX_SEND_TEXT_BYTES {
            return Err(EngineError::InvalidArgument(format!(
                "the messages of one send total {size} bytes, over {MAX_SEND_TEXT_BYTES}"
            )));
        }
        if let Some(m) = request
            .messages
            .iter()
            .find(|m| m.message.len() > self.limits.max_message_bytes)
        {
            return Err(EngineError::MessageTooLarge {
                size: m.message.len(),
                cap: self.limits.max_message_bytes,
            });
        }
        let pairs: Vec<(&str, Option<&str>)> = request
            .messages
            .iter()
            .map(|m| (m.message.as_str(), m.headers.as_deref()))
            .collect();
        let pairs = serde_json::to_string(&pairs).map_err(|e| {
            EngineError::InvalidArgument(format!("messages cannot be encoded: {e}"))
        })?;
        let queue = request.queue.as_str();
        // A delayed message is not claimable yet: nothing to wake.
        let mut program = Program::write_on(queue).waking(request.delay.is_none());
        let missing = program.guard(&QUEUE_MISSING, vec![queue.into()]);
        let grouped = program.guard(&GROUP_FIFO, vec![queue.into()]);
        let insert = program.step(
            &INSERT,
            vec![
                queue.into(),
                pairs.into(),
                relative.into(),
                absolute.map_or(crate::store::hrana::Value::Null, Into::into),
            ],
        );
        program.step(&crate::engine::send::COUNT_SENT, vec![]);
        let committed = match self.run(&mut program).await {
            Ok(committed) => committed,
            Err(RunError::Rejected(step)) if step == missing => {
                return Err(EngineError::QueueNotFound)
            }
            Err(RunError::Rejected(step)) if step == grouped => {
                return Err(EngineError::InvalidArgument(format!(
                    "queue {queue:?} is group_fifo: send through Connect-JSON with a group_id"
                )))
            }
            Err(e) => return Err(unexpected(e)),
        };
        let sent = ids(&committed, insert)?;
        self.note(queue, Event::Enqueued, sent.len() as u64);
        let woken = committed.rows(insert).find(|row| {
            row.text(1).is_ok_and(|s| s == "active") && row.int(2).is_ok_and(|w| w == 1)
        });
        if let Some(row) = woken {
            self.note_claimable(queue, row.int(3)?);
        }
        Ok(sent)
    }
}
