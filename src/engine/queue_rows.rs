//! Where a queue's rows are found (migration 0008; docs/engine.md, "Where a
//! queue's rows are found"). No index holds every row of a queue: each index
//! entry is a billed write, so an ungrouped active row lives only in
//! `messages_ungrouped_active`, a locked row in `messages_lease_expiry` (and,
//! when grouped, in `messages_by_state` too), everything else in
//! `messages_by_state`. A statement over a queue's rows of one state names
//! that state (and, for active rows, the grouping) so the planner can prove
//! the partial index it seeks; these fragments spell that out once.

/// The ids of every unfinished (not dead-lettered) row of queue `$q` (an SQL
/// expression), one seek per state, each arm disjoint from the others.
macro_rules! live_ids {
    ($q:literal) => {
        concat!(
            "SELECT id FROM messages WHERE queue = ",
            $q,
            " AND state = 'active' AND group_id IS NULL
  UNION ALL SELECT id FROM messages WHERE queue = ",
            $q,
            " AND state = 'active' AND group_id IS NOT NULL
  UNION ALL SELECT id FROM messages WHERE queue = ",
            $q,
            " AND state = 'locked'
  UNION ALL SELECT id FROM messages WHERE queue = ",
            $q,
            " AND state = 'deferred'
  UNION ALL SELECT id FROM messages WHERE queue = ",
            $q,
            " AND state = 'scheduled'"
        )
    };
}
pub(super) use live_ids;

/// The ids of every row of queue `$q`, in any state.
macro_rules! queue_ids {
    ($q:literal) => {
        concat!(
            $crate::engine::queue_rows::live_ids!($q),
            "
  UNION ALL SELECT id FROM messages WHERE queue = ",
            $q,
            " AND state = 'dead_lettered'"
        )
    };
}
pub(super) use queue_ids;

/// The stored count of state `$state` in queue `$q`: an index-only count
/// (active rows: the ungrouped and the grouped index, added).
macro_rules! stored_count {
    ($q:literal, "active") => {
        concat!(
            "((SELECT count(*) FROM messages WHERE queue = ",
            $q,
            " AND state = 'active' AND group_id IS NULL)
  + (SELECT count(*) FROM messages WHERE queue = ",
            $q,
            " AND state = 'active' AND group_id IS NOT NULL))"
        )
    };
    ($q:literal, $state:literal) => {
        concat!(
            "(SELECT count(*) FROM messages WHERE queue = ",
            $q,
            " AND state = '",
            $state,
            "')"
        )
    };
}
pub(super) use stored_count;
