-- parkway schema, version 8: a subscription's usual label is not stored.

-- A subscription's label (what PublishResult's deliveries name) is NULL when it
-- is the one its kind, name and position make ("wait_for_event:<name>#<pos>"):
-- the store derives it on reading. Rebuilt, as SQLite cannot drop a NOT NULL.
CREATE TABLE subscriptions_new (
    run_id     TEXT NOT NULL,
    pos        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    domain     TEXT NOT NULL,
    name       TEXT NOT NULL,
    subject    TEXT NOT NULL,
    shape      TEXT NOT NULL,
    digest     TEXT NOT NULL,
    match      BLOB,
    wait       TEXT,
    expires_at REAL NOT NULL,
    created_at REAL NOT NULL,
    deadline   REAL,
    PRIMARY KEY (run_id, pos)
) WITHOUT ROWID;
INSERT INTO subscriptions_new
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match,
       CASE WHEN wait = 'wait_for_' || kind || ':' || name || '#' || pos THEN NULL ELSE wait END,
       expires_at, created_at, deadline
FROM subscriptions;
DROP TABLE subscriptions;
ALTER TABLE subscriptions_new RENAME TO subscriptions;
CREATE INDEX subscriptions_lookup ON subscriptions (domain, name, shape, digest, subject);
CREATE INDEX subscriptions_by_expiry ON subscriptions (expires_at);
CREATE UNIQUE INDEX subscriptions_one_message_wait ON subscriptions (name, subject)
    WHERE kind = 'message';
