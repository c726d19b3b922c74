-- Two rows written fewer per message (docs/engine.md, "Where a queue's rows
-- are found"). sqld counts every index entry written, and the two hot
-- transitions each wrote one into `messages_by_state` that another index
-- already holds:
-- * a Send of an ungrouped message wrote (queue, 'active', id) beside its
--   `messages_ungrouped_active` entry (queue, id);
-- * a claim wrote (queue, 'locked', id) beside its `messages_lease_expiry`
--   entry (queue, locked_until).
-- The state index now keeps only the rows no other queue-leading index holds
-- by state: deferred, scheduled and dead-lettered rows, and grouped rows in
-- any state (the strict-FIFO walk and Peek need them in seq order). An
-- ungrouped active row is found in `messages_ungrouped_active`, a locked row
-- in `messages_lease_expiry`; every row is in at least one of the three.
-- The condition is a disjunction of equalities so that a statement's own
-- `state = '…'` (or `group_id IS NOT NULL`) term proves it to the planner.
-- Both indexes end in `group_id` (NULL, one byte, for ungrouped rows), so
-- a count that names the grouping is answered from the index alone: the
-- planner re-checks a `group_id IS [NOT] NULL` term on every entry.
DROP INDEX messages_by_state;
CREATE INDEX messages_by_state ON messages (queue, state, id, group_id)
  WHERE state = 'deferred' OR state = 'scheduled' OR state = 'dead_lettered'
    OR group_id IS NOT NULL;
DROP INDEX messages_ungrouped_active;
CREATE INDEX messages_ungrouped_active ON messages (queue, id, group_id)
  WHERE state = 'active' AND group_id IS NULL;
