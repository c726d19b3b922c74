-- A Redrive whose target lives in another database (docs/databases.md):
-- the messages leave the source queue into its database's outbox in one
-- transaction, are copied into the target's database, then leave the
-- outbox. A copy is made once per outbox row whatever is repeated: the
-- target's database keeps a receipt per (source database, seq) until the
-- outbox row is gone. So a message is always in exactly one of the source's
-- dead letters, the outbox and the target, and never copied twice.

-- Messages in transit, keyed by their seq in the source queue (AUTOINCREMENT
-- never hands a seq out twice, so a message put back keeps its seq). Every
-- column of the dead letter is kept, so a message whose target disappeared
-- goes back exactly as it was.
CREATE TABLE redrive_outbox (
  seq INTEGER PRIMARY KEY,
  source TEXT NOT NULL,
  target_database TEXT NOT NULL,
  target TEXT NOT NULL,
  visible_at INTEGER NOT NULL,
  delivery_count INTEGER NOT NULL,
  enqueued_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
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
CREATE INDEX redrive_outbox_by_source ON redrive_outbox (source, seq);

-- Copies this database made of other databases' outbox rows.
CREATE TABLE redrive_receipts (
  source_database TEXT NOT NULL,
  seq INTEGER NOT NULL,
  received_at INTEGER NOT NULL,
  PRIMARY KEY (source_database, seq)
) STRICT, WITHOUT ROWID;
