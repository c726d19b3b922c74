//! Group commit counters (docs/engine.md#group-commit): how the writes that
//! may share their queue's transaction were carried, and the sizes of the
//! batches that formed. A batch is counted once, by its first member, in the
//! isolate that member ran in; like every counter here, isolate-local.

use crate::store::Carried;
use crate::wire::observe::{GroupCommit as WireGroupCommit, SizeHistogram};

/// Upper bounds of the batch-size buckets, up to the coalescer's 64 members.
pub const MEMBER_BOUNDS: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct GroupCommit {
    /// Writes sent in a request of their own (group commit off, no object,
    /// too large, the object unavailable).
    direct: u64,
    /// Writes sent in a request of their own because their queue's object
    /// said nobody else was writing the queue.
    lone: u64,
    /// Writes that went in a batch, alone or not.
    batched: u64,
    /// Of those, the writes served by a folded statement with others of
    /// their kind.
    folded: u64,
    /// `cumulative[i]` counts batches of at most `MEMBER_BOUNDS[i]` members.
    cumulative: [u64; MEMBER_BOUNDS.len()],
    batches: u64,
    /// Members of the batches counted.
    members: u64,
}

impl GroupCommit {
    pub(super) fn record(&mut self, carried: Carried) {
        match carried {
            Carried::Direct => self.direct = self.direct.saturating_add(1),
            Carried::Lone => self.lone = self.lone.saturating_add(1),
            Carried::Batch {
                members,
                first,
                folded,
            } => {
                self.batched = self.batched.saturating_add(1);
                if folded {
                    self.folded = self.folded.saturating_add(1);
                }
                if first {
                    let members = u64::from(members);
                    for (bucket, bound) in self.cumulative.iter_mut().zip(MEMBER_BOUNDS) {
                        if members <= bound {
                            *bucket = bucket.saturating_add(1);
                        }
                    }
                    self.batches = self.batches.saturating_add(1);
                    self.members = self.members.saturating_add(members);
                }
            }
        }
    }

    pub(super) fn to_wire(self) -> WireGroupCommit {
        WireGroupCommit {
            direct_writes: self.direct,
            lone_writes: self.lone,
            batched_writes: self.batched,
            folded_writes: self.folded,
            batch_members: SizeHistogram {
                bounds: MEMBER_BOUNDS.to_vec(),
                bucket_counts: self.cumulative.to_vec(),
                count: self.batches,
                sum: self.members,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(members: u32, first: bool) -> Carried {
        Carried::Batch {
            members,
            first,
            folded: false,
        }
    }

    #[test]
    fn every_write_is_counted_once_and_every_batch_by_its_first_member() {
        let mut counts = GroupCommit::default();
        counts.record(Carried::Direct);
        counts.record(Carried::Lone);
        counts.record(Carried::Lone);
        // A batch of three: three writes, one batch.
        counts.record(batch(3, true));
        counts.record(batch(3, false));
        counts.record(batch(3, false));
        // A lone write is a batch of one.
        counts.record(batch(1, true));
        // A batch larger than every bound is counted in +Inf only.
        counts.record(batch(65, true));
        // Two folded writes of a batch of two: counted as batched too.
        for first in [true, false] {
            counts.record(Carried::Batch {
                members: 2,
                first,
                folded: true,
            });
        }
        let wire = counts.to_wire();
        assert_eq!(wire.direct_writes, 1);
        assert_eq!(wire.lone_writes, 2);
        assert_eq!(wire.batched_writes, 7);
        assert_eq!(wire.folded_writes, 2);
        assert_eq!(wire.batch_members.count, 4);
        assert_eq!(wire.batch_members.sum, 71);
        assert_eq!(wire.batch_members.bounds, vec![1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(wire.batch_members.bucket_counts, vec![1, 2, 3, 3, 3, 3, 3]);
    }
}
