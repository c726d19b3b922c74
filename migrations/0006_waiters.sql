-- Wake hints (docs/semantics.md#long-polling): until when someone may be
-- parked waiting on this queue, by the database clock. A waiting Receive's
-- empty claim extends it (at most one write per queue every few seconds);
-- Send, Abandon and housekeeping read it in a statement they already run and
-- ask the HTTP layer to notify the queue's wake object only while it is in
-- the future, so sends to a queue nobody waits on pay nothing.
ALTER TABLE queues ADD COLUMN waiters_until INTEGER NOT NULL DEFAULT 0;
