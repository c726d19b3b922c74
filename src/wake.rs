//! The wake board a queue's wake object keeps (docs/semantics.md#long-polling):
//! parked waiters and the latest notification's database time, nothing
//! else. No message state lives here; the database stays the only source of
//! truth, so losing the board (the object evicted or restarted) costs a
//! waiter at most one park.
//!
//! The mark closes the race between a waiter's empty claim and its park: a
//! waiter parks "since" the database time its claim ran at; a notifier sends
//! the database time its commit read. A notification that arrives before
//! the park with a time at or after the waiter's is answered at once.

/// A parked waiter's slot: whoever holds the other end is woken by a send.
pub trait Slot {
    /// The waiter gave up (timed out or went away): drop the slot.
    fn abandoned(&self) -> bool;
    /// Wakes the waiter; a waiter already gone is ignored.
    fn wake(self);
}

/// Parked waiters and the latest notification of one queue.
#[derive(Debug)]
pub struct Board<S> {
    /// The largest database time any notification carried.
    mark: i64,
    parked: Vec<S>,
}

impl<S> Default for Board<S> {
    fn default() -> Self {
        Board {
            mark: i64::MIN,
            parked: Vec::new(),
        }
    }
}

impl<S: Slot> Board<S> {
    /// Parks `slot` for a waiter whose claim ran at `since_ms`, or hands it
    /// back when a notification at or after that time already came (the
    /// waiter must claim again at once).
    pub fn park(&mut self, since_ms: i64, slot: S) -> Result<(), S> {
        if self.mark >= since_ms {
            return Err(slot);
        }
        self.parked.retain(|s| !s.abandoned());
        self.parked.push(slot);
        Ok(())
    }

    /// Records a notification at database time `at_ms` and wakes every
    /// parked waiter; answers how many were parked.
    pub fn notify(&mut self, at_ms: i64) -> usize {
        self.mark = self.mark.max(at_ms);
        let woken: Vec<S> = std::mem::take(&mut self.parked);
        let mut count = 0;
        for slot in woken {
            if !slot.abandoned() {
                count += 1;
            }
            slot.wake();
        }
        count
    }

    /// Whether a waiter is parked (one whose request is gone is not).
    pub fn has_waiters(&self) -> bool {
        self.parked.iter().any(|s| !s.abandoned())
    }

    /// Waiters parked now (abandoned slots not yet dropped included).
    #[cfg(test)]
    fn parked(&self) -> usize {
        self.parked.len()
    }
}

/// One request's account of its wakes: the queues whose object woke their
/// waiters on a commit it made, and the queues this request also wrote
/// without the object (a lone write, or the direct path after the object
/// declined: a retry after a migration can take either). A hint is needless
/// only for a queue whose object saw every commit this request made on it;
/// a commit it did not see may come after the object's wake and after a
/// waiter parked since then.
#[derive(Debug, Default)]
pub struct RequestWakes {
    woken: Vec<String>,
    bypassed: Vec<String>,
}

impl RequestWakes {
    /// `queue`'s object woke its waiters on one of this request's commits.
    pub fn woke(&mut self, queue: &str) {
        self.woken.push(queue.to_owned());
    }

    /// A write of `queue` went to the database without its object.
    pub fn bypassed(&mut self, queue: &str) {
        self.bypassed.push(queue.to_owned());
    }

    /// Whether `queue`'s object already woke its waiters for everything
    /// this request committed on it (no hint to send).
    pub fn covers(&self, queue: &str) -> bool {
        self.woken.iter().any(|q| q == queue) && !self.bypassed.iter().any(|q| q == queue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A slot that records whether it was woken.
    struct Probe {
        woken: Rc<Cell<bool>>,
        gone: bool,
    }

    impl Slot for Probe {
        fn abandoned(&self) -> bool {
            self.gone
        }
        fn wake(self) {
            self.woken.set(true);
        }
    }

    fn probe(gone: bool) -> (Probe, Rc<Cell<bool>>) {
        let woken = Rc::new(Cell::new(false));
        (
            Probe {
                woken: woken.clone(),
                gone,
            },
            woken,
        )
    }

    /// A write that went around the object (before or after the one it
    /// woke for) keeps the queue's hint: a waiter may have parked after
    /// the object's wake and before that commit.
    #[test]
    fn only_a_queue_whose_object_saw_every_commit_skips_its_hint() {
        let mut wakes = RequestWakes::default();
        assert!(!wakes.covers("q"));
        wakes.woke("q");
        assert!(wakes.covers("q"));
        assert!(!wakes.covers("other"));
        wakes.bypassed("q");
        assert!(!wakes.covers("q"));
        let mut wakes = RequestWakes::default();
        wakes.bypassed("q");
        wakes.woke("q");
        assert!(!wakes.covers("q"));
        wakes.woke("r");
        assert!(wakes.covers("r"));
    }

    #[test]
    fn a_notify_wakes_every_parked_waiter_and_counts_them() {
        let mut board = Board::default();
        let (a, a_woken) = probe(false);
        let (b, b_woken) = probe(false);
        assert!(board.park(100, a).is_ok());
        assert!(board.park(101, b).is_ok());
        assert_eq!(board.notify(150), 2);
        assert!(a_woken.get() && b_woken.get());
        assert_eq!(board.parked(), 0);
        // A duplicate notification finds nobody and harms nothing.
        assert_eq!(board.notify(150), 0);
    }

    /// What lets the object call its queue idle (`store::lone`): nobody
    /// parked, a waiter whose request went away not counted.
    #[test]
    fn only_a_live_parked_waiter_is_a_waiter() {
        let mut board = Board::default();
        assert!(!board.has_waiters());
        let (gone, _) = probe(true);
        assert!(board.park(100, gone).is_ok());
        assert!(!board.has_waiters(), "its request went away");
        let (live, _) = probe(false);
        assert!(board.park(100, live).is_ok());
        assert!(board.has_waiters());
        board.notify(150);
        assert!(!board.has_waiters());
    }

    #[test]
    fn a_notify_before_the_park_is_covered_by_the_mark() {
        let mut board = Board::default();
        assert_eq!(board.notify(200), 0);
        // The waiter's empty claim ran before the notifier's commit.
        let (early, _) = probe(false);
        assert!(board.park(199, early).is_err(), "must claim again at once");
        let (same, _) = probe(false);
        assert!(board.park(200, same).is_err());
        // A claim after the commit saw its messages: it parks.
        let (later, later_woken) = probe(false);
        assert!(board.park(201, later).is_ok());
        assert!(!later_woken.get());
    }

    #[test]
    fn an_older_notification_never_lowers_the_mark() {
        let mut board = Board::default();
        board.notify(300);
        board.notify(100);
        let (slot, _) = probe(false);
        assert!(board.park(250, slot).is_err());
    }

    #[test]
    fn abandoned_slots_are_dropped_and_not_counted() {
        let mut board = Board::default();
        let (gone, _) = probe(true);
        assert!(board.park(1, gone).is_ok());
        let (live, _) = probe(false);
        assert!(board.park(2, live).is_ok());
        assert_eq!(
            board.parked(),
            1,
            "the abandoned slot went on the next park"
        );
        let (gone_again, _) = probe(true);
        assert!(board.park(3, gone_again).is_ok());
        assert_eq!(board.notify(10), 1);
    }
}
