//! Lazy per-queue housekeeping (semantics §16.2): what the reference's
//! background loops do, run inside the requests that need it, before their
//! main statement and in the same transaction. Each statement is an index
//! seek on a queue-leading partial index, so an idle queue costs nothing.

use super::Engine;
use crate::store::{Program, Transport};

/// T14: expired leases become claimable again, or dead letters once the
/// delivery count is used up.
pub(super) const REAP_EXPIRED_LEASES: &str = "\
UPDATE messages SET
  state = CASE WHEN delivery_count >= (SELECT max_delivery_count FROM queues WHERE name = ?1)
    THEN 'dead_lettered' ELSE 'active' END,
  dead_letter_reason = CASE WHEN delivery_count >= (SELECT max_delivery_count FROM queues WHERE name = ?1)
    THEN 'MaxDeliveryCountExceeded' ELSE dead_letter_reason END,
  lock_token = NULL,
  locked_until = 0
WHERE queue = ?1 AND state = 'locked' AND locked_until <= {now}";

/// T3: due scheduled rows activate — unless their TTL already ran out, in
/// which case the TTL step dead-letters them in place (§6).
pub(super) const ACTIVATE_DUE_SCHEDULED: &str = "\
UPDATE messages SET state = 'active'
WHERE queue = ?1 AND state = 'scheduled' AND visible_at <= {now}
  AND (expires_at = 0 OR expires_at > {now})";

/// T16: TTL-expired rows of a dead-lettering queue.
pub(super) const DEAD_LETTER_EXPIRED: &str = "\
UPDATE messages SET state = 'dead_lettered', dead_letter_reason = 'TTLExpired',
  lock_token = NULL, locked_until = 0
WHERE queue = ?1 AND expires_at > 0 AND state <> 'dead_lettered' AND expires_at <= {now}
  AND (SELECT dead_letter_on_expire FROM queues WHERE name = ?1) = 1";

/// T17: TTL-expired rows of a discarding queue.
pub(super) const DISCARD_EXPIRED: &str = "\
DELETE FROM messages
WHERE queue = ?1 AND expires_at > 0 AND state <> 'dead_lettered' AND expires_at <= {now}
  AND (SELECT dead_letter_on_expire FROM queues WHERE name = ?1) = 0";

impl<T: Transport> Engine<T> {
    /// Appends the queue's housekeeping to a write program, in the order
    /// reap → activate → expire.
    pub(crate) fn housekeeping(&self, program: &mut Program, queue: &str) {
        for sql in [
            REAP_EXPIRED_LEASES,
            ACTIVATE_DUE_SCHEDULED,
            DEAD_LETTER_EXPIRED,
            DISCARD_EXPIRED,
        ] {
            program.step(self.sql(sql), vec![queue.into()]);
        }
    }
}
