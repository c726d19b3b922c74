//! Housekeeping (docs/semantics.md#maintenance): what the reference's background loops do,
//! as statements. Requests run them lazily for one queue, inside their own
//! transaction and before their main statement; the cron sweep runs the same
//! statements for every queue. Scoped to one queue, each statement is an
//! index seek on a queue-leading partial index, so an idle queue costs nothing.

use const_format::{concatcp, str_replace};

use super::Engine;
use super::Event;
use crate::store::{Committed, Program, Statement, StepId, Transport};

/// Every queue's statement (the cron sweep and the gauges).
macro_rules! for_every_queue {
    ($template:expr) => {
        crate::statement!(str_replace!(
            $template,
            "SCOPE",
            "queue IN (SELECT name FROM queues)"
        ))
    };
}

/// T14: expired leases with deliveries left become claimable again. It
/// writes no `dead_letter_reason`, so SQLite compiles it without the
/// dead-letter triggers (migration 0004); a lease that used up the delivery
/// count is [`SETTLE_DUE`]'s.
pub(super) const REAP_EXPIRED_LEASES: &str = "\
UPDATE messages SET state = 'active', lock_token = NULL, locked_until = 0
WHERE SCOPE AND state = 'locked' AND locked_until <= {now}
  AND delivery_count < (SELECT max_delivery_count FROM queues WHERE name = messages.queue)";

/// T14 (delivery count used up), T3, T16, T17: the rest of a queue's due
/// rows, in one pass. An expired lease with no delivery left is
/// dead-lettered (`MaxDeliveryCountExceeded`). A due schedule activates
/// unless its TTL already ran out (docs/semantics.md#ttl); a TTL-expired row that is not yet a
/// dead letter is dead-lettered in place (`TTLExpired`) or, in a discarding
/// queue, deleted: the mark `TTLDiscarded` makes the `ttl_discard` trigger
/// (migration 0004) delete it within this statement. Each side of the
/// union seeks its own partial index.
pub(super) const SETTLE_DUE: &str = "\
UPDATE messages SET
  state = CASE
    WHEN state = 'locked' AND locked_until <= {now} THEN 'dead_lettered'
    WHEN expires_at > 0 AND expires_at <= {now} THEN 'dead_lettered'
    ELSE 'active' END,
  dead_letter_reason = CASE
    WHEN state = 'locked' AND locked_until <= {now} THEN 'MaxDeliveryCountExceeded'
    WHEN expires_at > 0 AND expires_at <= {now} THEN
      CASE WHEN (SELECT dead_letter_on_expire FROM queues WHERE name = messages.queue) = 1
        THEN 'TTLExpired' ELSE 'TTLDiscarded' END
    ELSE dead_letter_reason END,
  lock_token = NULL,
  locked_until = 0
WHERE id IN (
  SELECT id FROM messages WHERE SCOPE AND state = 'locked' AND locked_until <= {now}
  UNION
  SELECT id FROM messages WHERE SCOPE AND state = 'scheduled' AND visible_at <= {now}
  UNION
  SELECT id FROM messages WHERE SCOPE AND expires_at > 0 AND state <> 'dead_lettered'
    AND expires_at <= {now})";

/// Whether queue `?1` has anything [`ONE_QUEUE`] would change: its
/// earliest lease deadline, schedule and TTL, each the first entry of the
/// partial index its statement seeks, compared with the clock. A gate (see
/// `Program::gate`): it fails when nothing is due, so a Receive on a quiet
/// queue reads three index heads instead of running both statements.
pub(super) const ONE_QUEUE_DUE: Statement = crate::statement!(
    "\
SELECT json(CASE WHEN
  (SELECT locked_until FROM messages WHERE queue = ?1 AND state = 'locked'
    ORDER BY locked_until LIMIT 1) <= {now}
  OR (SELECT visible_at FROM messages WHERE queue = ?1 AND state = 'scheduled'
    ORDER BY visible_at LIMIT 1) <= {now}
  OR (SELECT expires_at FROM messages WHERE queue = ?1 AND expires_at > 0
    AND state <> 'dead_lettered' ORDER BY expires_at LIMIT 1) <= {now}
  THEN '0' ELSE 'nothing due' END)"
);

/// One queue's housekeeping: reap, then the due rows.
/// Each returns, per changed row, whether the queue has waiters and the
/// database time ([`WAITERS`]), so a lease expiry or activation a request
/// observes can wake them (docs/semantics.md#long-polling).
pub(super) const ONE_QUEUE: [Statement; 2] = [
    crate::statement!(concatcp!(
        str_replace!(REAP_EXPIRED_LEASES, "SCOPE", "queue = ?1"),
        " RETURNING ",
        WAITERS
    )),
    crate::statement!(concatcp!(
        str_replace!(SETTLE_DUE, "SCOPE", "queue = ?1"),
        " RETURNING state, dead_letter_reason, ",
        WAITERS
    )),
];

/// Two columns: whether queue `?1` has someone waiting on it
/// (`queues.waiters_until`, migration 0006) and the database time.
macro_rules! waiters {
    () => {
        "coalesce((SELECT waiters_until FROM queues WHERE name = ?1) > {now}, 0), {now}"
    };
}
pub(in crate::engine) use waiters;
const WAITERS: &str = waiters!();

/// Every queue's housekeeping, in the same order.
pub(super) const EVERY_QUEUE: [Statement; 2] = [
    for_every_queue!(REAP_EXPIRED_LEASES),
    for_every_queue!(SETTLE_DUE),
];

/// The steps of one queue's housekeeping inside a program, so the caller
/// can count what they did once the program committed.
#[must_use = "report the housekeeping with note_housekeeping once committed"]
pub(crate) struct Housekeeping {
    queue: String,
    reap: StepId,
    due: StepId,
}

impl<T: Transport> Engine<T> {
    /// Appends one queue's housekeeping to a write program, behind the
    /// [`ONE_QUEUE_DUE`] gate. Each statement returns the state of every row
    /// it changed (one small row each); none when the gate skipped them.
    pub(crate) fn housekeeping(&self, program: &mut Program, queue: &str) -> Housekeeping {
        let [reap, due] = &ONE_QUEUE;
        let gate = program.gate(&ONE_QUEUE_DUE, vec![queue.into()]);
        Housekeeping {
            queue: queue.to_owned(),
            reap: program.gated(gate, reap, vec![queue.into()]),
            due: program.gated(gate, due, vec![queue.into()]),
        }
    }

    /// Counts what a committed housekeeping did (docs/semantics.md#observability): reaped leases
    /// (those that used up their deliveries are dead letters too), then
    /// activations, TTL dead letters and TTL discards.
    pub(crate) fn note_housekeeping(&self, committed: &Committed, done: &Housekeeping) {
        let queue = done.queue.as_str();
        let mut lock_expired = committed.affected(done.reap);
        let (mut activated, mut dead_lettered, mut discarded) = (0, 0, 0);
        let mut waiters = None;
        for row in committed.rows(done.reap) {
            if row.int(0).is_ok_and(|w| w == 1) {
                waiters = row.int(1).ok();
            }
        }
        for row in committed.rows(done.due) {
            if row.opt_text(0).is_ok_and(|s| s == Some("active"))
                && row.int(2).is_ok_and(|w| w == 1)
            {
                waiters = row.int(3).ok();
            }
            match row.opt_text(1) {
                Ok(Some("TTLDiscarded")) => discarded += 1,
                Ok(Some("MaxDeliveryCountExceeded")) => {
                    lock_expired += 1;
                    dead_lettered += 1;
                }
                Ok(Some(_)) if row.text(0).is_ok_and(|s| s == "dead_lettered") => {
                    dead_lettered += 1
                }
                _ => activated += 1,
            }
        }
        self.note(queue, Event::LockExpired, lock_expired);
        self.note(queue, Event::Activated, activated);
        self.note(queue, Event::DeadLettered, dead_lettered);
        self.note(queue, Event::TtlDiscarded, discarded);
        if let Some(at_ms) = waiters {
            self.note_claimable(queue, at_ms);
        }
    }

    /// Appends every queue's housekeeping to a write program (the sweep).
    pub(crate) fn housekeeping_all(&self, program: &mut Program) {
        for statement in &EVERY_QUEUE {
            program.step(statement, vec![]);
        }
    }
}
