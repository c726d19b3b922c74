-- Housekeeping in two statements. The due-rows UPDATE activates due
-- schedules and handles TTL expiry in one pass; a TTL-expired row of a
-- discarding queue (dead_letter_on_expire = 0) is marked with the reason
-- 'TTLDiscarded', which this trigger turns into the delete the contract
-- requires, inside the same statement. The mark never outlives it.
CREATE TRIGGER ttl_discard AFTER UPDATE OF dead_letter_reason ON messages
WHEN NEW.dead_letter_reason = 'TTLDiscarded'
BEGIN
  DELETE FROM messages WHERE id = NEW.id;
END;

-- Dedup in the insert itself (semantics §5). A Send inserts only the
-- copies that may be new (the first copy of each key in the request, and
-- only if no entry of its queue is still in its window) and stamps each
-- row of a queue with a window with its dedup key and request hash; this
-- trigger records the entry with the row's own seq in the same statement,
-- so a Send is one INSERT whatever its size and no seq is ever predicted.
ALTER TABLE messages ADD COLUMN dedup_key TEXT;
ALTER TABLE messages ADD COLUMN request_hash TEXT;
CREATE TRIGGER dedup_on_insert AFTER INSERT ON messages
WHEN NEW.dedup_key IS NOT NULL
BEGIN
  INSERT INTO dedup (queue, dedup_key, request_hash, seq_number, seen_at)
  VALUES (NEW.queue, NEW.dedup_key, NEW.request_hash, NEW.id, NEW.enqueued_at)
  ON CONFLICT (queue, dedup_key) DO UPDATE SET
    request_hash = excluded.request_hash,
    seq_number = excluded.seq_number,
    seen_at = excluded.seen_at;
END;
