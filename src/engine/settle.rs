//! Settlement (semantics §9): a fenced write plus its receipt in one
//! transaction, and exact-request replay from live receipts.

use super::{unexpected, Engine, EngineError};
use crate::store::{Program, Transport};

/// How long an exact settle request can be replayed.
const RECEIPT_LIFETIME_MS: i64 = 30 * 60 * 1000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettleRequest {
    pub queue: String,
    pub seq_number: i64,
    pub lock_token: String,
}

/// The fence every new settlement effect needs: this queue, this seq, this
/// token, still locked, lease live and TTL not run out (decisions.md #2) —
/// all against the database clock, so the deadline instant itself is expired.
const FENCE: &str = "\
id = ?2 AND queue = ?1 AND state = 'locked' AND lock_token = ?3
  AND locked_until > {now} AND (expires_at = 0 OR expires_at > {now})";

/// T7: completion deletes the row.
const COMPLETE: &str = "DELETE FROM messages WHERE FENCE RETURNING id";

/// Receipt for the effect the previous statement had, if it had one
/// (`changes()` is that statement's row count on this connection).
const RECORD_RECEIPT: &str = "\
INSERT OR REPLACE INTO settlement_receipts
  (queue, seq_number, lock_token, operation, args, created_at, expires_at)
SELECT ?1, ?2, ?3, ?4, ?5, {now}, {now} + RECEIPT_LIFETIME WHERE changes() = 1";

/// A live receipt of exactly this request.
const FIND_RECEIPT: &str = "\
SELECT 1 FROM settlement_receipts
WHERE queue = ?1 AND seq_number = ?2 AND lock_token = ?3 AND operation = ?4 AND args = ?5
  AND expires_at > {now}";

impl<T: Transport> Engine<T> {
    /// Complete (T7): deletes the locked message; an exact replay of an
    /// earlier Complete within 30 minutes also succeeds.
    pub async fn complete(&self, request: &SettleRequest) -> Result<(), EngineError> {
        self.settle(request, COMPLETE, "completed", "").await
    }

    async fn settle(
        &self,
        request: &SettleRequest,
        effect: &str,
        operation: &str,
        args: &str,
    ) -> Result<(), EngineError> {
        if request.lock_token.is_empty() {
            return Err(EngineError::LockLost);
        }
        let key = || {
            vec![
                request.queue.as_str().into(),
                request.seq_number.into(),
                request.lock_token.as_str().into(),
                operation.into(),
                args.into(),
            ]
        };
        let mut program = Program::write();
        let applied = program.step(
            self.sql(&effect.replace("FENCE", FENCE)),
            key().into_iter().take(3).collect(),
        );
        program.step(
            self.sql(&RECORD_RECEIPT.replace("RECEIPT_LIFETIME", &RECEIPT_LIFETIME_MS.to_string())),
            key(),
        );
        let replay = program.step(self.sql(FIND_RECEIPT), key());
        let committed = self.store.run(&program).await.map_err(unexpected)?;
        if committed.first_row(applied).is_some() || committed.first_row(replay).is_some() {
            Ok(())
        } else {
            Err(EngineError::LockLost)
        }
    }
}
