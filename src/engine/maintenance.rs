//! Housekeeping (docs/semantics.md#maintenance): what the reference's background loops do,
//! as one statement. Requests run it lazily for one queue, inside their own
//! transaction and before their main statement, behind a gate; the cron sweep
//! runs the same statement for every queue. Scoped to one queue, each side of
//! it is an index seek on a queue-leading partial index, so an idle queue
//! costs nothing.

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

/// T14 (both branches), T3, T16, T17: every due row of the queues in
/// `SCOPE`, in one pass that reads each row's state once. An expired lease
/// becomes claimable again, or, once it used up the delivery count, a dead
/// letter (`MaxDeliveryCountExceeded`). A due schedule activates. A
/// TTL-expired row that is not yet a dead letter (a reaped lease or a due
/// schedule included: docs/semantics.md#ttl) is dead-lettered in place
/// (`TTLExpired`) or, in a discarding queue, deleted: the mark
/// `TTLDiscarded` makes the `ttl_discard` trigger (migration 0004) delete it
/// within this statement.
///
/// `expired` (materialised once, before any row changes) is the lease side,
/// so `RETURNING`, which sees only new values, can still tell a reaped lease
/// from an activated schedule (both end `active`). Each side of the union
/// seeks its own queue-leading partial index.
///
/// It writes `dead_letter_reason` on every row it changes, so SQLite
/// compiles the dead-letter triggers into it (as the due-rows statement
/// always did); for a reaped lease the column keeps its value and neither
/// trigger's `WHEN` holds (no move into or out of `dead_lettered`, no
/// discard mark), so a reaped row's triggers do what they did when the reap
/// was a statement of its own: nothing.
pub(super) const SETTLE_DUE: &str = "\
WITH expired(id) AS MATERIALIZED (
  SELECT id FROM messages WHERE SCOPE AND state = 'locked' AND locked_until <= {now})
UPDATE messages SET
  state = CASE
    WHEN state = 'locked' AND locked_until <= {now}
      AND delivery_count >= (SELECT max_delivery_count FROM queues WHERE name = messages.queue)
      THEN 'dead_lettered'
    WHEN expires_at > 0 AND expires_at <= {now} THEN 'dead_lettered'
    ELSE 'active' END,
  dead_letter_reason = CASE
    WHEN state = 'locked' AND locked_until <= {now}
      AND delivery_count >= (SELECT max_delivery_count FROM queues WHERE name = messages.queue)
      THEN 'MaxDeliveryCountExceeded'
    WHEN expires_at > 0 AND expires_at <= {now} THEN
      CASE WHEN (SELECT dead_letter_on_expire FROM queues WHERE name = messages.queue) = 1
        THEN 'TTLExpired' ELSE 'TTLDiscarded' END
    ELSE dead_letter_reason END,
  lock_token = NULL,
  locked_until = 0
WHERE id IN (
  SELECT id FROM expired
  UNION
  SELECT id FROM messages WHERE SCOPE AND state = 'scheduled' AND visible_at <= {now}
  UNION
  SELECT id FROM messages WHERE SCOPE AND expires_at > 0 AND state <> 'dead_lettered'
    AND expires_at <= {now})";

/// Whether queue `?1` has anything [`ONE_QUEUE`] would change: its
/// earliest lease deadline, schedule and TTL, each the first entry of the
/// partial index its side of the statement seeks, compared with the clock.
/// A gate (see `Program::gate`): it fails when nothing is due, so a Receive
/// on a quiet queue reads three index heads instead of compiling and
/// running the housekeeping statement.
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

/// One queue's housekeeping. Per changed row it returns the new state and
/// reason, whether the row was an expired lease, and whether the queue has
/// waiters with the database time ([`WAITERS`]), so a lease expiry or
/// activation a request observes can wake them (docs/semantics.md#long-polling).
pub(super) const ONE_QUEUE: Statement = crate::statement!(concatcp!(
    str_replace!(SETTLE_DUE, "SCOPE", "queue = ?1"),
    " RETURNING state, dead_letter_reason, id IN (SELECT id FROM expired), ",
    WAITERS
));

/// Two columns: whether queue `?1` has someone waiting on it
/// (`queues.waiters_until`, migration 0006) and the database time.
macro_rules! waiters {
    () => {
        "coalesce((SELECT waiters_until FROM queues WHERE name = ?1) > {now}, 0), {now}"
    };
}
pub(in crate::engine) use waiters;
const WAITERS: &str = waiters!();

/// Every queue's housekeeping (the cron sweep).
pub(super) const EVERY_QUEUE: Statement = for_every_queue!(SETTLE_DUE);

/// The housekeeping step of one queue inside a program, so the caller can
/// count what it did once the program committed.
#[must_use = "report the housekeeping with note_housekeeping once committed"]
pub(crate) struct Housekeeping {
    queue: String,
    due: StepId,
}

/// What one committed housekeeping did to one row, from its `RETURNING`
/// row: the new state and reason, and whether it was an expired lease.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    lock_expired: u64,
    activated: u64,
    dead_lettered: u64,
    discarded: u64,
}

impl Counts {
    /// Adds one changed row; returns whether it may wake a waiter: it ends
    /// claimable, or it was a lease reaped with deliveries left (a lease
    /// that used up its deliveries ends `MaxDeliveryCountExceeded`; one
    /// with deliveries left whose TTL also ran out ends with a TTL reason).
    fn add(&mut self, state: &str, reason: Option<&str>, lease: bool) -> bool {
        if lease {
            self.lock_expired += 1;
        }
        match (state, reason) {
            (_, Some("TTLDiscarded")) => self.discarded += 1,
            ("dead_lettered", _) => self.dead_lettered += 1,
            _ if !lease => self.activated += 1,
            _ => {}
        }
        state == "active" || (lease && reason != Some("MaxDeliveryCountExceeded"))
    }
}

impl<T: Transport> Engine<T> {
    /// Appends one queue's housekeeping to a write program, behind the
    /// [`ONE_QUEUE_DUE`] gate. It returns one small row per row it changed;
    /// none when the gate skipped it.
    pub(crate) fn housekeeping(&self, program: &mut Program, queue: &str) -> Housekeeping {
        let gate = program.gate(&ONE_QUEUE_DUE, vec![queue.into()]);
        Housekeeping {
            queue: queue.to_owned(),
            due: program.gated(gate, &ONE_QUEUE, vec![queue.into()]),
        }
    }

    /// Counts what a committed housekeeping did (docs/semantics.md#observability):
    /// expired leases (those that used up their deliveries are dead letters
    /// too), activations, dead letters and TTL discards.
    pub(crate) fn note_housekeeping(&self, committed: &Committed, done: &Housekeeping) {
        let queue = done.queue.as_str();
        let mut counts = Counts::default();
        let mut waiters = None;
        for row in committed.rows(done.due) {
            let (Ok(state), Ok(reason)) = (row.text(0), row.opt_text(1)) else {
                continue;
            };
            let lease = row.int(2).is_ok_and(|l| l == 1);
            if counts.add(state, reason, lease) && row.int(3).is_ok_and(|w| w == 1) {
                waiters = row.int(4).ok();
            }
        }
        self.note(queue, Event::LockExpired, counts.lock_expired);
        self.note(queue, Event::Activated, counts.activated);
        self.note(queue, Event::DeadLettered, counts.dead_lettered);
        self.note(queue, Event::TtlDiscarded, counts.discarded);
        if let Some(at_ms) = waiters {
            self.note_claimable(queue, at_ms);
        }
    }

    /// Appends every queue's housekeeping to a write program (the sweep).
    pub(crate) fn housekeeping_all(&self, program: &mut Program) {
        program.step(&EVERY_QUEUE, vec![]);
    }
}
