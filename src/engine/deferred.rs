//! ReceiveDeferred (docs/semantics.md#deferred) and Cancel (docs/semantics.md#scheduling).

use super::receive::{claim_tokens, read_received, ReceivedMessage, LOCK_PICKED};
use super::Event;
use super::{require_name, unexpected, Engine, EngineError, QUEUE_EXISTS};
use const_format::str_replace;

use crate::store::Statement;
use crate::store::{Program, Transport};

/// T15: lock the requested deferred rows of this queue whose TTL has not
/// run out, each at its first position in the request (a repeated seq is
/// skipped: it is already locked). No ordering rule, no max-delivery check.
/// `?2` seqs, `?3` tokens (one per request position).
const CLAIM_DEFERRED_TEMPLATE: &str = "\
WITH picked AS MATERIALIZED (
  SELECT min(CAST(j.key AS INTEGER)) AS n, m.id FROM json_each(?2) j CROSS JOIN messages m ON m.id = j.value
  WHERE m.queue = ?1 AND m.state = 'deferred' AND (m.expires_at = 0 OR m.expires_at > {now})
  GROUP BY m.id)
LOCK_PICKED";

/// T4: only a never-delivered scheduled send that is not yet due; a due one
/// already counts as active (lazy activation), a backoff-parked redelivery
/// (count ≥ 1) is never cancellable.
pub(super) const CANCEL: Statement = crate::statement!(
    "\
DELETE FROM messages
WHERE id = ?2 AND queue = ?1 AND state = 'scheduled' AND delivery_count = 0 AND visible_at > {now}
RETURNING id"
);

impl<T: Transport> Engine<T> {
    /// Locks deferred messages by seq, in request order; anything else is
    /// skipped silently. Unknown queue → 404.
    pub async fn receive_deferred(
        &self,
        queue: &str,
        seqs: &[i64],
    ) -> Result<Vec<ReceivedMessage>, EngineError> {
        require_name(queue)?;
        let tokens = claim_tokens(seqs.len().max(1))?;
        let seqs_json = serde_json::to_string(seqs).unwrap_or_default();
        let mut program = Program::write_on(queue);
        let housekeeping = self.housekeeping(&mut program, queue);
        let exists = program.step(&QUEUE_EXISTS, vec![queue.into()]);
        let claimed = program.step(
            &CLAIM_DEFERRED,
            vec![queue.into(), seqs_json.into(), tokens.into()],
        );
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        self.note_housekeeping(&committed, &housekeeping);
        if committed.first_row(exists).is_none() {
            return Err(EngineError::QueueNotFound);
        }
        let mut messages = read_received(&committed, claimed, true)?;
        messages.sort_by_key(|m| seqs.iter().position(|s| *s == m.seq_number));
        self.note_claimed(queue, &messages, false);
        Ok(messages)
    }

    /// Deletes a scheduled, never-delivered message; anything else is 404.
    pub async fn cancel(&self, queue: &str, seq: i64) -> Result<(), EngineError> {
        require_name(queue)?;
        let mut program = Program::write_on(queue);
        let deleted = program.step(&CANCEL, vec![queue.into(), seq.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        match committed.first_row(deleted) {
            Some(_) => {
                self.note(queue, Event::Canceled, 1);
                Ok(())
            }
            None => Err(EngineError::NotFound),
        }
    }
}

/// The ReceiveDeferred statement with the shared locking tail.
pub(super) const CLAIM_DEFERRED: Statement = crate::statement!(str_replace!(
    CLAIM_DEFERRED_TEMPLATE,
    "LOCK_PICKED",
    str_replace!(LOCK_PICKED, "TOKENS", "?3")
));
