//! Dead-letter administration (docs/semantics.md#dead-letters): Redrive and Purge.

use super::Event;
use super::{random_hex, require_name, unexpected, Engine, EngineError, Waiter, QUEUE_MISSING};
use const_format::str_replace;

use crate::store::Statement;
use crate::store::{Program, RunError, Transport};

/// How long one Redrive call keeps moving paced chunks before it returns
/// the count moved so far (callers repeat); the reference sleeps 1 s
/// between chunks until done, which a Worker request cannot promise.
pub(super) const REDRIVE_BUDGET_MS: u64 = 25_000;
pub(super) const CHUNK_PAUSE_MS: u64 = 1_000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedriveRequest {
    pub queue: String,
    /// Empty or equal to `queue`: redrive in place.
    pub target: String,
    /// 0 = no limit.
    pub max: i64,
    /// 0 = any age.
    pub older_than_ms: i64,
    /// 0 = unpaced.
    pub rate_per_sec: i64,
}

/// Dead letters of `?1`, oldest seq first, enqueued before `now - ?2` when
/// `?2 > 0`, at most `?3` (-1 = all).
const CANDIDATES: &str = "\
SELECT id FROM messages WHERE queue = ?1 AND state = 'dead_lettered'
  AND (?2 = 0 OR enqueued_at < {now} - ?2) ORDER BY id LIMIT ?3";

/// T18: back to active with a fresh delivery count; `expires_at` and
/// `enqueued_at` are kept [quirk].
const REDRIVE_IN_PLACE: Statement = crate::statement!(str_replace!(
    "\
UPDATE messages SET state = 'active', delivery_count = 0, visible_at = 0,
  dead_letter_reason = NULL, dead_letter_description = NULL, lock_token = NULL, locked_until = 0
WHERE id IN (CANDIDATES)",
    "CANDIDATES",
    CANDIDATES
));

/// T19, step 1: mark this chunk with one-off tokens (`marker:id`) so the
/// copy and the delete below act on exactly the same rows: one clock read
/// (`older_than_ms`) decides the chunk. The marks enter the partial index
/// `messages_redrive_marks` (migration 0007), which holds only dead letters
/// with a token: every move into `dead_lettered` clears the token, so
/// between transactions it is empty, and claims never write it.
pub(super) const MARK_CHUNK: Statement = crate::statement!(str_replace!(
    "UPDATE messages SET lock_token = ?4 || ':' || id WHERE id IN (CANDIDATES)",
    "CANDIDATES",
    CANDIDATES
));

/// The marked rows, as a range on `messages_redrive_marks` (`;` follows
/// `:`). The literal `state = 'dead_lettered'` lets SQLite prove the partial
/// index applies (the range implies `lock_token IS NOT NULL`); `INDEXED BY`
/// keeps it from walking the queue's dead letters by state instead. The
/// marker is fresh random hex behind `redrive:`, so no lock token and no
/// other redrive's mark falls in its range.
const MARKED: &str = "messages INDEXED BY messages_redrive_marks
WHERE queue = ?1 AND state = 'dead_lettered' AND lock_token > ?4 || ':' AND lock_token < ?4 || ';'";

/// T19, step 2: fresh active copies in the target (new seq, enqueued now,
/// no TTL, no schedule); no dedup, filter or group check [quirk].
pub(super) const COPY_CHUNK: Statement = crate::statement!(str_replace!(
    "\
INSERT INTO messages (queue, state, visible_at, enqueued_at, expires_at, delivery_count,
  message_id, correlation_id, reply_to, group_id, content_type, subject, properties, body)
SELECT ?5, 'active', 0, {now}, 0, 0, message_id, correlation_id, reply_to, group_id,
  content_type, subject, properties, body
FROM MARKED ORDER BY id",
    "MARKED",
    MARKED
));

/// T19, step 3: the originals go.
pub(super) const DELETE_CHUNK: Statement =
    crate::statement!(str_replace!("DELETE FROM MARKED", "MARKED", MARKED));

/// Whether queue `?1` has waiters to wake, and the database time, read
/// after the redrive's own statements (docs/semantics.md#long-polling).
pub(super) const WAITERS_OF: Statement =
    crate::statement!(concat!("SELECT ", super::maintenance::waiters!()));

/// T20: Purge deletes dead letters only.
const PURGE: Statement = crate::statement!(str_replace!(
    "DELETE FROM messages WHERE id IN (CANDIDATES)",
    "CANDIDATES",
    CANDIDATES
));

fn non_negative(value: i64, message: String) -> Result<(), EngineError> {
    if value < 0 {
        Err(EngineError::InvalidArgument(message))
    } else {
        Ok(())
    }
}

impl RedriveRequest {
    /// The checks every Redrive makes before it reaches a database.
    pub(super) fn validate(&self) -> Result<(), EngineError> {
        require_name(&self.queue)?;
        non_negative(self.max, format!("max must be >= 0 (got {})", self.max))?;
        non_negative(self.older_than_ms, "older-than must be >= 0".into())?;
        super::at_most("older_than_ms", self.older_than_ms, super::MAX_DURATION_MS)?;
        non_negative(
            self.rate_per_sec,
            format!("rate must be >= 0 (got {})", self.rate_per_sec),
        )
    }

    /// The size of the next chunk once `moved` have moved: what `max`
    /// leaves, in chunks of `rate_per_sec` when paced (i64::MAX: all).
    pub(super) fn next_chunk(&self, moved: i64) -> i64 {
        let remaining = if self.max > 0 {
            self.max - moved
        } else {
            i64::MAX
        };
        match self.rate_per_sec {
            0 => remaining,
            rate => rate.min(remaining),
        }
    }
}

impl<T: Transport> Engine<T> {
    /// Moves dead letters back to active, in place or into another queue.
    /// With `rate_per_sec`, each chunk of that size is its own transaction,
    /// a second apart, for up to 25 s per call.
    pub async fn redrive(
        &self,
        request: &RedriveRequest,
        waiter: &impl Waiter,
    ) -> Result<i64, EngineError> {
        request.validate()?;
        let in_place = request.target.is_empty() || request.target == request.queue;
        let mut moved = 0i64;
        loop {
            let chunk = request.next_chunk(moved);
            let n = self.redrive_chunk(request, in_place, chunk).await?;
            moved += n;
            let done =
                n < chunk || request.rate_per_sec == 0 || (request.max > 0 && moved >= request.max);
            if done || waiter.elapsed_ms() + CHUNK_PAUSE_MS > REDRIVE_BUDGET_MS {
                return Ok(moved);
            }
            waiter.sleep(CHUNK_PAUSE_MS).await;
        }
    }

    async fn redrive_chunk(
        &self,
        request: &RedriveRequest,
        in_place: bool,
        chunk: i64,
    ) -> Result<i64, EngineError> {
        let limit = if chunk == i64::MAX { -1 } else { chunk };
        let mut program = Program::write();
        let source_missing = program.guard(&QUEUE_MISSING, vec![request.queue.as_str().into()]);
        let target_missing = (!in_place)
            .then(|| program.guard(&QUEUE_MISSING, vec![request.target.as_str().into()]));
        let housekeeping = self.housekeeping(&mut program, &request.queue);
        let args = |extra: Vec<crate::store::hrana::Value>| {
            let mut args = vec![
                request.queue.as_str().into(),
                request.older_than_ms.into(),
                limit.into(),
            ];
            args.extend(extra);
            args
        };
        let moved = if in_place {
            program.step(&REDRIVE_IN_PLACE, args(vec![]))
        } else {
            let marker = format!("redrive:{}", random_hex(16)?);
            // Each statement binds exactly the parameters it uses.
            let marked = || args(vec![marker.as_str().into()]);
            let copy_args = args(vec![marker.as_str().into(), request.target.as_str().into()]);
            program.step(&MARK_CHUNK, marked());
            let copied = program.step(&COPY_CHUNK, copy_args);
            program.step(&super::send::COUNT_SENT, vec![]);
            program.step(&DELETE_CHUNK, marked());
            copied
        };
        let destination = if in_place {
            &request.queue
        } else {
            &request.target
        };
        let waiters = program.step(&WAITERS_OF, vec![destination.as_str().into()]);
        match self.run(&mut program).await {
            Ok(committed) => {
                self.note_housekeeping(&committed, &housekeeping);
                let n = committed.affected(moved);
                if let Some(row) = committed.first_row(waiters) {
                    if n > 0 && row.int(0)? == 1 {
                        self.note_claimable(destination, row.int(1)?);
                    }
                }
                self.note(&request.queue, Event::Redriven, n);
                if !in_place {
                    self.note(&request.target, Event::Enqueued, n);
                }
                Ok(n as i64)
            }
            Err(RunError::Rejected(step))
                if step == source_missing || Some(step) == target_missing =>
            {
                Err(EngineError::QueueNotFound)
            }
            Err(e) => Err(unexpected(e)),
        }
    }

    /// Deletes dead letters: optionally only older ones, optionally only the
    /// `max` lowest seqs; both zero → the whole DLQ. One statement.
    pub async fn purge(
        &self,
        queue: &str,
        max: i64,
        older_than_ms: i64,
    ) -> Result<i64, EngineError> {
        require_name(queue)?;
        non_negative(max, format!("max must be >= 0 (got {max})"))?;
        non_negative(older_than_ms, "older-than must be >= 0".into())?;
        super::at_most("older_than_ms", older_than_ms, super::MAX_DURATION_MS)?;
        let mut program = Program::write();
        let missing = program.guard(&QUEUE_MISSING, vec![queue.into()]);
        let housekeeping = self.housekeeping(&mut program, queue);
        let limit = if max > 0 { max } else { -1 };
        let purged = program.step(
            &PURGE,
            vec![queue.into(), older_than_ms.into(), limit.into()],
        );
        match self.run(&mut program).await {
            Ok(committed) => {
                self.note_housekeeping(&committed, &housekeeping);
                let n = committed.affected(purged);
                self.note(queue, Event::Purged, n);
                Ok(n as i64)
            }
            Err(RunError::Rejected(step)) if step == missing => Err(EngineError::QueueNotFound),
            Err(e) => Err(unexpected(e)),
        }
    }
}
