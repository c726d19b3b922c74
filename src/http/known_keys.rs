//! What this isolate has learned about managed keys, so that a credential
//! that was never valid costs almost nothing (docs/http-api.md, "Credentials").
//!
//! A managed key this isolate has not seen valid is looked up on its own
//! (one read: an index seek by digest) before its request's body is read or
//! any transaction begins. A key known valid skips that read: its request
//! keeps the one-round-trip path, because the check still runs inside the
//! RPC's own transaction, so a revocation bites on the very next request.
//! A key found unknown, revoked or expired is remembered as refused: secrets
//! are drawn by the server (256 bits), revocation is permanent and an expiry
//! instant never moves, so none of them can become valid later, and a
//! repeated refused key costs no database request at all. Both sets are
//! bounded and forget their oldest entry first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::engine::{KeyState, Permissions};
use crate::observe::AuthOutcome;

/// Refused digests remembered per isolate: 32 bytes each, about 256 KiB
/// of digests at most.
pub const REFUSED_CAPACITY: usize = 8192;
/// Valid digests remembered per isolate.
pub const VALID_CAPACITY: usize = 1024;

/// What the isolate knows about one digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// Never looked up here (or forgotten): ask the key store first.
    Unseen,
    /// Seen valid with these permissions (which a key never changes).
    Valid(Permissions),
    /// Seen unknown, revoked or expired: refused for good.
    Refused(AuthOutcome),
}

#[derive(Default)]
pub struct KnownKeys {
    sets: Mutex<Sets>,
}

#[derive(Default)]
struct Sets {
    valid: Bounded<Permissions>,
    refused: Bounded<AuthOutcome>,
}

impl KnownKeys {
    pub fn get(&self, digest: &[u8; 32]) -> Known {
        let sets = self.sets.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(outcome) = sets.refused.map.get(digest) {
            Known::Refused(*outcome)
        } else if let Some(held) = sets.valid.map.get(digest) {
            Known::Valid(*held)
        } else {
            Known::Unseen
        }
    }

    /// Records what the key store answered for `digest`.
    pub fn learn(&self, digest: [u8; 32], state: KeyState) {
        let mut sets = self.sets.lock().unwrap_or_else(PoisonError::into_inner);
        let refused = match state {
            KeyState::Valid(held) => {
                sets.valid.insert(digest, held, VALID_CAPACITY);
                return;
            }
            KeyState::Unknown => AuthOutcome::Invalid,
            KeyState::Revoked => AuthOutcome::Revoked,
            KeyState::Expired => AuthOutcome::Expired,
        };
        sets.valid.map.remove(&digest);
        sets.refused.insert(digest, refused, REFUSED_CAPACITY);
    }

    /// How many digests are remembered as refused.
    #[cfg(test)]
    fn refused_len(&self) -> usize {
        let sets = self.sets.lock().unwrap_or_else(PoisonError::into_inner);
        sets.refused.map.len()
    }
}

/// A map that forgets its oldest insertion once it holds `capacity` keys.
struct Bounded<V> {
    map: HashMap<[u8; 32], V>,
    order: VecDeque<[u8; 32]>,
}

impl<V> Default for Bounded<V> {
    fn default() -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<V> Bounded<V> {
    fn insert(&mut self, digest: [u8; 32], value: V, capacity: usize) {
        if self.map.insert(digest, value).is_some() {
            return;
        }
        self.order.push_back(digest);
        // `order` may still hold digests removed from `map` (a valid key
        // later refused): dropping those frees no room, so keep going.
        while self.map.len() > capacity {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.map.remove(&oldest);
                }
                None => break,
            }
        }
        if self.order.len() > 2 * capacity {
            let map = &self.map;
            self.order.retain(|d| map.contains_key(d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(n: usize) -> [u8; 32] {
        let mut d = [0u8; 32];
        d[..8].copy_from_slice(&(n as u64).to_le_bytes());
        d
    }

    #[test]
    fn refused_digests_are_bounded_and_the_oldest_is_forgotten_first() {
        let keys = KnownKeys::default();
        for n in 0..REFUSED_CAPACITY + 10 {
            keys.learn(digest(n), KeyState::Unknown);
        }
        assert_eq!(keys.refused_len(), REFUSED_CAPACITY);
        assert_eq!(keys.get(&digest(9)), Known::Unseen);
        assert_eq!(keys.get(&digest(10)), Known::Refused(AuthOutcome::Invalid));
        assert_eq!(
            keys.get(&digest(REFUSED_CAPACITY + 9)),
            Known::Refused(AuthOutcome::Invalid)
        );
    }

    #[test]
    fn a_valid_key_later_revoked_is_refused() {
        let keys = KnownKeys::default();
        keys.learn(digest(1), KeyState::Valid(Permissions::SEND));
        assert_eq!(keys.get(&digest(1)), Known::Valid(Permissions::SEND));
        keys.learn(digest(1), KeyState::Revoked);
        assert_eq!(keys.get(&digest(1)), Known::Refused(AuthOutcome::Revoked));
    }

    /// Learns `digest(1)` valid, then `state`; then fills the refused set
    /// until `digest(1)` is forgotten there: it must not be valid again.
    fn valid_then(state: KeyState) -> (Known, Known) {
        let keys = KnownKeys::default();
        keys.learn(digest(1), KeyState::Valid(Permissions::SEND));
        assert_eq!(keys.get(&digest(1)), Known::Valid(Permissions::SEND));
        keys.learn(digest(1), state);
        let refused = keys.get(&digest(1));
        for n in 2..REFUSED_CAPACITY + 2 {
            keys.learn(digest(n), KeyState::Unknown);
        }
        (refused, keys.get(&digest(1)))
    }

    #[test]
    fn a_revoked_key_is_dropped_from_the_valid_set() {
        assert_eq!(
            valid_then(KeyState::Revoked),
            (Known::Refused(AuthOutcome::Revoked), Known::Unseen)
        );
    }

    #[test]
    fn a_valid_key_later_expired_is_refused_and_dropped_from_the_valid_set() {
        assert_eq!(
            valid_then(KeyState::Expired),
            (Known::Refused(AuthOutcome::Expired), Known::Unseen)
        );
    }
}
