-- parkway schema, version 3: messages (BPMN-style correlation by name and key).

-- Messages that found no receiver: buffered until expires_at, then kept as
-- dead letters (status 'expired') until an operator retries or discards them.
CREATE TABLE messages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    key         TEXT NOT NULL,
    payload     BLOB,
    message_id  TEXT,
    status      TEXT NOT NULL,
    reason      TEXT,
    received_at REAL NOT NULL,
    expires_at  REAL NOT NULL
);

CREATE INDEX messages_by_key ON messages (name, key, status, id);
CREATE INDEX messages_by_expiry ON messages (status, expires_at);

-- message_id de-duplication, kept for event_retention.
CREATE TABLE message_ids (
    message_id TEXT PRIMARY KEY,
    seen_at    REAL NOT NULL
) WITHOUT ROWID;

-- At most one live wait per (message name, key): the index refuses a second.
CREATE UNIQUE INDEX subscriptions_one_message_wait ON subscriptions (name, subject)
    WHERE kind = 'message';
