-- mqlite-edge schema, version 1 (docs/engine.md). All times are INTEGER epoch ms.
-- Applied by the Worker itself (or `mqlite-edge-migrate`) inside one
-- transaction that also records the version in `schema_version`.

CREATE TABLE queues (
  name TEXT PRIMARY KEY,
  kind TEXT NOT NULL DEFAULT 'queue' CHECK (kind IN ('queue', 'subscription')),
  lock_duration_ms INTEGER NOT NULL DEFAULT 30000,
  max_delivery_count INTEGER NOT NULL DEFAULT 10,
  default_ttl_ms INTEGER NOT NULL DEFAULT 0,
  dead_letter_on_expire INTEGER NOT NULL DEFAULT 1,
  dedup_window_ms INTEGER NOT NULL DEFAULT 0,
  ordering_mode TEXT NOT NULL DEFAULT 'standard'
    CHECK (ordering_mode IN ('standard', 'group_fifo', 'strict_fifo')),
  dlq_max_age_ms INTEGER NOT NULL DEFAULT 0,
  dlq_max_count INTEGER NOT NULL DEFAULT 0,
  dlq_max_bytes INTEGER NOT NULL DEFAULT 0,
  -- Random 32-hex identity of this incarnation of the name (DeleteQueue fencing).
  generation TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

-- A topic exists while at least one subscription names it; the subscription
-- name is also its backing queue's name, and belongs to exactly one topic.
CREATE TABLE subscriptions (
  topic TEXT NOT NULL,
  subscription TEXT NOT NULL UNIQUE,
  filter TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (topic, subscription)
) STRICT;

-- id is the seq_number: AUTOINCREMENT so no id is ever handed out twice,
-- even after the highest row is deleted.
CREATE TABLE messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  queue TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'active'
    CHECK (state IN ('active', 'locked', 'deferred', 'scheduled', 'dead_lettered')),
  visible_at INTEGER NOT NULL DEFAULT 0,
  locked_until INTEGER NOT NULL DEFAULT 0,
  lock_token TEXT,
  delivery_count INTEGER NOT NULL DEFAULT 0,
  enqueued_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0,
  message_id TEXT,
  correlation_id TEXT,
  reply_to TEXT,
  group_id TEXT,
  content_type TEXT,
  subject TEXT,
  properties TEXT,
  body BLOB NOT NULL,
  dead_letter_reason TEXT,
  dead_letter_description TEXT
) STRICT;

-- Claim candidates, head-of-line probes per state, Stats counts, Peek by
-- state, DLQ operations: every per-state lookup is an equality on
-- (queue, state) then a range on id.
CREATE INDEX messages_by_state ON messages (queue, state, id);
-- Peek without a state filter: the queue's rows in seq order.
CREATE INDEX messages_by_queue ON messages (queue);
-- Per-group head-of-line probes (one EXISTS per state).
CREATE INDEX messages_by_group ON messages (queue, group_id, state, id) WHERE group_id IS NOT NULL;
-- Lazy maintenance: expired leases, due schedules, due TTLs of one queue.
CREATE INDEX messages_lease_expiry ON messages (queue, locked_until) WHERE state = 'locked';
CREATE INDEX messages_schedule_due ON messages (queue, visible_at) WHERE state = 'scheduled';
CREATE INDEX messages_ttl_due ON messages (queue, expires_at)
  WHERE expires_at > 0 AND state <> 'dead_lettered';
-- Lock tokens are unique while held; settle-by-token lookups.
CREATE UNIQUE INDEX messages_lock_token ON messages (lock_token) WHERE lock_token IS NOT NULL;

-- Dedup window entries: dedup_key is the message_id or the body's SHA-256.
CREATE TABLE dedup (
  queue TEXT NOT NULL,
  dedup_key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  seq_number INTEGER NOT NULL,
  seen_at INTEGER NOT NULL,
  PRIMARY KEY (queue, dedup_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX dedup_seen_at ON dedup (seen_at);

-- Exact-request replay of settlements for 30 minutes.
CREATE TABLE settlement_receipts (
  queue TEXT NOT NULL,
  seq_number INTEGER NOT NULL,
  lock_token TEXT NOT NULL,
  operation TEXT NOT NULL,
  args TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (queue, seq_number, lock_token, operation, args)
) STRICT, WITHOUT ROWID;
CREATE INDEX settlement_receipts_expiry ON settlement_receipts (expires_at);

-- Idempotent receive: the exact response of a claim, replayed verbatim.
CREATE TABLE receive_attempts (
  queue TEXT NOT NULL,
  attempt_id TEXT NOT NULL,
  response TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (queue, attempt_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX receive_attempts_expiry ON receive_attempts (expires_at);

-- Managed access keys: only the SHA-256 digest of a token is stored.
CREATE TABLE access_keys (
  id TEXT PRIMARY KEY CHECK (length(id) = 32),
  name TEXT NOT NULL,
  token_hash BLOB NOT NULL UNIQUE,
  permissions INTEGER NOT NULL CHECK (permissions IN (1, 2, 3, 7)),
  created_at INTEGER NOT NULL CHECK (created_at >= 0),
  expires_at INTEGER NOT NULL DEFAULT 0,
  revoked_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX access_keys_created ON access_keys (created_at DESC, id DESC);
