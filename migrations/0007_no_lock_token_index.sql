-- One fewer row written per claim (docs/engine.md, "Lock tokens have no index"). sqld
-- counts every index entry written, and every claim wrote one here. No
-- statement looks a message up by its lock token any more: settlements find
-- rows by seq (primary key) and compare the token; a claim's attempt record
-- finds the rows it just leased through `messages_lease_expiry`; a
-- receive-and-delete deletes its picks directly. Lock tokens stay unique
-- while held without the UNIQUE index: each is 128 bits from the CSPRNG, so
-- two live tokens colliding is negligible (and a settlement names the seq
-- too).
DROP INDEX messages_lock_token;
-- Redrive into another queue marks one chunk's dead letters with a one-off
-- marker and finds them again by its range (src/engine/dlq.rs). Only dead
-- letters with a token enter this index; every transition into
-- 'dead_lettered' clears the token, so only a redrive's marks do, and a
-- redrive deletes what it marked in the same transaction: the index is
-- empty between transactions and claims never write it.
CREATE INDEX messages_redrive_marks ON messages (lock_token)
  WHERE state = 'dead_lettered' AND lock_token IS NOT NULL;
