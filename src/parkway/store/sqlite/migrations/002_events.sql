-- parkway schema, version 2: events, subscriptions.

-- The event log: de-duplication by id within event_retention, and the
-- look-back of wait_for_event(since_start=True). Pruned past retention.
CREATE TABLE events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL,
    domain       TEXT NOT NULL,
    subject      TEXT,
    payload      BLOB,
    published_at REAL NOT NULL
);

CREATE INDEX events_by_name ON events (domain, name, published_at);
CREATE INDEX events_by_time ON events (published_at);

-- One row per parked wait on an event (or message): the index publish looks up.
-- subject is the subject waited on, or '*'; shape/digest index the match.
CREATE TABLE subscriptions (
    run_id     TEXT NOT NULL,
    pos        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    domain     TEXT NOT NULL,
    name       TEXT NOT NULL,
    subject    TEXT NOT NULL,
    shape      TEXT NOT NULL,
    digest     TEXT NOT NULL,
    match      BLOB,
    wait       TEXT NOT NULL,
    expires_at REAL NOT NULL,
    created_at REAL NOT NULL,
    deadline   REAL,
    PRIMARY KEY (run_id, pos)
) WITHOUT ROWID;

CREATE INDEX subscriptions_lookup ON subscriptions (domain, name, shape, digest, subject);
CREATE INDEX subscriptions_by_expiry ON subscriptions (expires_at);

-- Distinct match shapes per (domain, name): what a publish iterates over.
-- Rows are added on park and removed by the sweeper once no wait uses them.
CREATE TABLE subscription_shapes (
    domain TEXT NOT NULL,
    name   TEXT NOT NULL,
    shape  TEXT NOT NULL,
    PRIMARY KEY (domain, name, shape)
) WITHOUT ROWID;

CREATE INDEX runs_by_subject ON runs (workflow, domain, subject, status);
