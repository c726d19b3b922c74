//! Housekeeping (semantics §16.2): what the reference's background loops do,
//! as statements. Requests run them lazily for one queue, inside their own
//! transaction and before their main statement; the cron sweep runs the same
//! statements for every queue. Scoped to one queue, each statement is an
//! index seek on a queue-leading partial index, so an idle queue costs nothing.

use const_format::{concatcp, str_replace};

use super::Engine;
use crate::observe::Event;
use crate::store::{Committed, Program, Statement, StepId, Transport};

/// One queue's statement (`?1`), returning each changed row's new state.
macro_rules! for_one_queue {
    ($template:expr) => {
        crate::statement!(concatcp!(
            str_replace!($template, "SCOPE", "queue = ?1"),
            " RETURNING state"
        ))
    };
}

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

/// T14: expired leases become claimable again, or dead letters once the
/// delivery count is used up.
pub(super) const REAP_EXPIRED_LEASES: &str = "\
UPDATE messages SET
  state = CASE WHEN delivery_count >= (SELECT max_delivery_count FROM queues WHERE name = messages.queue)
    THEN 'dead_lettered' ELSE 'active' END,
  dead_letter_reason = CASE WHEN delivery_count >= (SELECT max_delivery_count FROM queues WHERE name = messages.queue)
    THEN 'MaxDeliveryCountExceeded' ELSE dead_letter_reason END,
  lock_token = NULL,
  locked_until = 0
WHERE SCOPE AND state = 'locked' AND locked_until <= {now}";

/// T3: due scheduled rows activate — unless their TTL already ran out, in
/// which case the TTL step dead-letters them in place (§6).
pub(super) const ACTIVATE_DUE_SCHEDULED: &str = "\
UPDATE messages SET state = 'active'
WHERE SCOPE AND state = 'scheduled' AND visible_at <= {now}
  AND (expires_at = 0 OR expires_at > {now})";

/// T16: TTL-expired rows of a dead-lettering queue.
pub(super) const DEAD_LETTER_EXPIRED: &str = "\
UPDATE messages SET state = 'dead_lettered', dead_letter_reason = 'TTLExpired',
  lock_token = NULL, locked_until = 0
WHERE SCOPE AND expires_at > 0 AND state <> 'dead_lettered' AND expires_at <= {now}
  AND (SELECT dead_letter_on_expire FROM queues WHERE name = messages.queue) = 1";

/// T17: TTL-expired rows of a discarding queue.
pub(super) const DISCARD_EXPIRED: &str = "\
DELETE FROM messages
WHERE SCOPE AND expires_at > 0 AND state <> 'dead_lettered' AND expires_at <= {now}
  AND (SELECT dead_letter_on_expire FROM queues WHERE name = messages.queue) = 0";

/// One queue's housekeeping, in the order reap → activate → expire.
pub(super) const ONE_QUEUE: [Statement; 4] = [
    for_one_queue!(REAP_EXPIRED_LEASES),
    for_one_queue!(ACTIVATE_DUE_SCHEDULED),
    for_one_queue!(DEAD_LETTER_EXPIRED),
    for_one_queue!(DISCARD_EXPIRED),
];

/// Every queue's housekeeping, in the same order.
pub(super) const EVERY_QUEUE: [Statement; 4] = [
    for_every_queue!(REAP_EXPIRED_LEASES),
    for_every_queue!(ACTIVATE_DUE_SCHEDULED),
    for_every_queue!(DEAD_LETTER_EXPIRED),
    for_every_queue!(DISCARD_EXPIRED),
];

/// What each step's returned rows mean (§19), in [`ONE_QUEUE`] order. The
/// reaper returns each row's new state: a lease that ran out of deliveries
/// is also a dead letter.
const EVENTS: [Event; 4] = [
    Event::LockExpired,
    Event::Activated,
    Event::DeadLettered,
    Event::TtlDiscarded,
];

/// The steps of one queue's housekeeping inside a program, so the caller
/// can count what they did once the program committed.
#[must_use = "report the housekeeping with note_housekeeping once committed"]
pub(crate) struct Housekeeping {
    queue: String,
    steps: [StepId; 4],
}

impl<T: Transport> Engine<T> {
    /// Appends one queue's housekeeping to a write program. Each statement
    /// returns the state of every row it changed (one small row each).
    pub(crate) fn housekeeping(&self, program: &mut Program, queue: &str) -> Housekeeping {
        let mut steps = [StepId(0); 4];
        for (step, statement) in steps.iter_mut().zip(&ONE_QUEUE) {
            *step = program.step(statement, vec![queue.into()]);
        }
        Housekeeping {
            queue: queue.to_owned(),
            steps,
        }
    }

    /// Counts what a committed housekeeping did (§19).
    pub(crate) fn note_housekeeping(&self, committed: &Committed, done: &Housekeeping) {
        for (step, event) in done.steps.iter().zip(EVENTS) {
            let mut changed = 0;
            let mut dead = 0;
            for row in committed.rows(*step) {
                changed += 1;
                dead += u64::from(row.text(0).is_ok_and(|s| s == "dead_lettered"));
            }
            self.note(&done.queue, event, changed);
            if event == Event::LockExpired {
                self.note(&done.queue, Event::DeadLettered, dead);
            }
        }
    }

    /// Appends every queue's housekeeping to a write program (the sweep).
    pub(crate) fn housekeeping_all(&self, program: &mut Program) {
        for statement in &EVERY_QUEUE {
            program.step(statement, vec![]);
        }
    }
}
