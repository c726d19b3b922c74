//! Lone writes (docs/engine.md#lone-writes): a write of a queue that
//! nothing else is writing goes to the database directly instead of
//! through its queue's object. A batch of one saves the database nothing,
//! and the hop to the object costs the request a second round trip and
//! the Worker about a millisecond of CPU (docs/bench.md); the object is
//! also billed per request.
//!
//! Whether others write the queue is the object's knowledge, not the
//! isolate's: load spreads over many isolates. So an isolate goes direct
//! only on the object's word: its last answer for the queue said the batch
//! was the write alone, no other write had reached the object within
//! [`IDLE_FOR_MS`] before it, nothing was waiting or in flight behind it
//! and no waiter was parked on the board ([`LoneWrites::answered`] with
//! `idle`); that answer came at most [`IDLE_FOR_MS`] ago, and the isolate
//! has no other write of the queue in flight. The word is never refreshed
//! by a direct write: once it is older than that, the next write goes
//! through the object again and learns anew. Every isolate writing the
//! queue so sends the object a write at least once per [`IDLE_FOR_MS`]:
//! two isolates writing it make the object see writes closer together than
//! that, and both are told the queue is busy. Correctness never depends on
//! which way a write goes (both paths run the same program,
//! docs/engine.md#group-commit); only how many writes meet in a batch does,
//! which is why the wall clocks of the isolate and of the object may time
//! it: no lease, schedule or TTL decision reads them.

use std::collections::HashMap;
use std::sync::Mutex;

/// How long the object's word that a queue is idle holds.
pub const IDLE_FOR_MS: u64 = 1_000;

/// Queues remembered at most; beyond, the isolate forgets the idle ones
/// (their writes go through the object until it says so again).
const REMEMBERED_QUEUES: usize = 4_096;

#[derive(Debug, Default, Clone, Copy)]
struct Queue {
    /// This isolate's writes of the queue in flight.
    in_flight: u32,
    /// When the object last said the queue was idle (the isolate's clock).
    idle_at_ms: Option<u64>,
}

impl Queue {
    fn forgettable(&self) -> bool {
        self.in_flight == 0 && self.idle_at_ms.is_none()
    }
}

/// One isolate's view of which queues are written by nobody else.
#[derive(Debug, Default)]
pub struct LoneWrites {
    queues: Mutex<HashMap<String, Queue>>,
}

/// A write of a queue in flight; its end is counted when it is dropped,
/// answered or abandoned.
#[must_use]
pub struct InFlight<'a> {
    writes: &'a LoneWrites,
    queue: String,
    /// It may go to the database directly.
    pub lone: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.writes.with(|queues| {
            if let Some(entry) = queues.get_mut(&self.queue) {
                entry.in_flight = entry.in_flight.saturating_sub(1);
                if entry.forgettable() {
                    queues.remove(&self.queue);
                }
            }
        });
    }
}

impl LoneWrites {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Queue>) -> R) -> R {
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut queues)
    }

    /// A write of `queue` starts at `now_ms`: whether it may go direct.
    pub fn start(&self, queue: &str, now_ms: u64) -> InFlight<'_> {
        let lone = self.with(|queues| {
            if queues.len() >= REMEMBERED_QUEUES && !queues.contains_key(queue) {
                queues.retain(|_, q| q.in_flight > 0);
            }
            let entry = queues.entry(queue.to_owned()).or_default();
            let lone = entry.in_flight == 0
                && entry
                    .idle_at_ms
                    .is_some_and(|at| now_ms.saturating_sub(at) < IDLE_FOR_MS);
            entry.in_flight += 1;
            lone
        });
        InFlight {
            writes: self,
            queue: queue.to_owned(),
            lone,
        }
    }

    /// The object answered a write of `queue` at `now_ms`; `idle`: it went
    /// alone and left nothing behind it (see the module doc). An idle word
    /// for a write that had others of its queue in flight beside it is not
    /// taken: their answers may come in any order, and it may be stale.
    pub fn answered(&self, queue: &str, idle: bool, now_ms: u64) {
        self.with(|queues| {
            if let Some(entry) = queues.get_mut(queue) {
                entry.idle_at_ms = (idle && entry.in_flight == 1).then_some(now_ms);
            }
        });
    }

    /// A waiter parks on `queue`'s object: its writes go through the object
    /// again, which wakes the waiter on their commit itself.
    pub fn waiting(&self, queue: &str) {
        self.with(|queues| {
            if let Some(entry) = queues.get_mut(queue) {
                entry.idle_at_ms = None;
                if entry.forgettable() {
                    queues.remove(queue);
                }
            }
        });
    }

    /// Queues remembered (tests).
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.with(|queues| queues.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write of `queue` through the object, answered idle at `at_ms`.
    fn told_idle(writes: &LoneWrites, queue: &str, at_ms: u64) {
        let write = writes.start(queue, at_ms);
        writes.answered(queue, true, at_ms);
        drop(write);
    }

    #[test]
    fn a_write_goes_through_the_object_until_it_says_the_queue_is_idle() {
        let writes = LoneWrites::default();
        let first = writes.start("q", 100);
        assert!(!first.lone, "nothing is known of the queue yet");
        writes.answered("q", true, 105);
        drop(first);
        let second = writes.start("q", 110);
        assert!(second.lone);
        drop(second);
        // A direct write does not refresh the word: it holds IDLE_FOR_MS.
        assert!(writes.start("q", 105 + IDLE_FOR_MS - 1).lone);
        assert!(!writes.start("q", 105 + IDLE_FOR_MS).lone);
    }

    #[test]
    fn a_busy_answer_takes_the_word_back() {
        let writes = LoneWrites::default();
        told_idle(&writes, "q", 1);
        let probe = writes.start("q", 2);
        assert!(probe.lone);
        drop(probe);
        let through = writes.start("q", IDLE_FOR_MS + 10);
        assert!(!through.lone);
        writes.answered("q", false, IDLE_FOR_MS + 11);
        drop(through);
        assert!(!writes.start("q", IDLE_FOR_MS + 12).lone);
        assert_eq!(writes.remembered(), 0, "nothing left to remember of q");
    }

    #[test]
    fn another_write_in_flight_in_the_isolate_sends_both_through_the_object() {
        let writes = LoneWrites::default();
        told_idle(&writes, "q", 1);
        let a = writes.start("q", 2);
        let b = writes.start("q", 3);
        assert!(a.lone);
        assert!(!b.lone, "a write meets another in flight");
        drop((a, b));
        assert!(writes.start("q", 4).lone, "both ended");
        let other = writes.start("r", 4);
        assert!(!other.lone, "each queue has its own word");
    }

    #[test]
    fn an_idle_word_beside_another_write_in_flight_is_not_taken() {
        let writes = LoneWrites::default();
        let a = writes.start("q", 0);
        let b = writes.start("q", 0);
        writes.answered("q", true, 1);
        drop((a, b));
        assert!(!writes.start("q", 2).lone, "b's answer may say otherwise");
    }

    #[test]
    fn a_parked_waiter_takes_the_word_back() {
        let writes = LoneWrites::default();
        told_idle(&writes, "q", 1);
        writes.waiting("q");
        assert!(!writes.start("q", 2).lone);
        assert_eq!(writes.remembered(), 0);
        writes.waiting("never-written");
        assert_eq!(writes.remembered(), 0);
    }

    #[test]
    fn an_answer_for_a_write_no_longer_tracked_is_not_remembered() {
        let writes = LoneWrites::default();
        writes.answered("q", true, 1);
        assert_eq!(writes.remembered(), 0);
        assert!(!writes.start("q", 2).lone);
    }

    #[test]
    fn beyond_the_bound_the_idle_queues_are_forgotten_not_the_busy_ones() {
        let writes = LoneWrites::default();
        let busy = writes.start("busy", 0);
        for i in 1..REMEMBERED_QUEUES {
            told_idle(&writes, &format!("q{i}"), 0);
        }
        assert_eq!(writes.remembered(), REMEMBERED_QUEUES);
        assert!(writes.start("q1", 1).lone, "a known queue forgets nothing");
        assert_eq!(writes.remembered(), REMEMBERED_QUEUES);
        let _fresh = writes.start("fresh", 1);
        assert_eq!(writes.remembered(), 2, "busy and fresh");
        assert!(!writes.start("q1", 1).lone, "forgotten: through the object");
        drop(busy);
    }
}
