-- parkway PostgreSQL schema, version 1: what the SQLite schema holds after its
-- migration 3 (runs, journal, tasks, mailbox, events, subscriptions, messages).
-- Everything lives in the schema "parkway", created (with parkway.schema_version)
-- by the store before this script runs.
-- JSON values are BYTEA holding the engine's UTF-8 JSON byte for byte (JSONB
-- would re-encode it); times are DOUBLE PRECISION epoch seconds, as on SQLite.
-- Ids are identity columns: never reused, and INSERT needs no sequence grant.

-- fillfactor: leases and updated_at change on every advance; free room on each
-- page lets those updates stay HOT (no new index entries).
CREATE TABLE parkway.runs (
    id          TEXT PRIMARY KEY,
    workflow    TEXT NOT NULL,
    version     TEXT NOT NULL,
    status      TEXT NOT NULL,
    input       BYTEA,
    output      BYTEA,
    error       BYTEA,
    domain      TEXT NOT NULL,
    subject     TEXT,
    parent_id   TEXT,
    trigger     BYTEA,
    generation  INTEGER NOT NULL DEFAULT 0,
    created_at  DOUBLE PRECISION NOT NULL,
    updated_at  DOUBLE PRECISION NOT NULL,
    lease_owner TEXT,
    lease_until DOUBLE PRECISION
) WITH (fillfactor = 80);

CREATE INDEX runs_by_created ON parkway.runs (created_at, id);
CREATE INDEX runs_by_workflow ON parkway.runs (workflow, status);
CREATE INDEX runs_by_parent ON parkway.runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX runs_by_subject ON parkway.runs (workflow, domain, subject, status);

-- One row per journaled operation; the row at a run's last position may be
-- 'pending' (the wait the run is parked on).
CREATE TABLE parkway.journal (
    run_id   TEXT NOT NULL,
    pos      INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    name     TEXT NOT NULL,
    state    TEXT NOT NULL,
    value    BYTEA,
    deadline DOUBLE PRECISION,
    at       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, pos)
);

-- Wake-ups: a start, a signal's arrival, a timer, a delivery. A queue: rows
-- come and go quickly, so autovacuum visits it far more often than the default.
CREATE TABLE parkway.tasks (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id  TEXT NOT NULL,
    due_at  DOUBLE PRECISION NOT NULL,
    kind    TEXT NOT NULL,
    pos     INTEGER,
    payload BYTEA
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);

CREATE INDEX tasks_by_due ON parkway.tasks (due_at, id);
CREATE INDEX tasks_by_run ON parkway.tasks (run_id, pos);

-- Signals, consumed in id order per run and name.
CREATE TABLE parkway.mailbox (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id  TEXT NOT NULL,
    name    TEXT NOT NULL,
    payload BYTEA,
    at      DOUBLE PRECISION NOT NULL
);

CREATE INDEX mailbox_by_run ON parkway.mailbox (run_id, id);

-- The event log: de-duplication by id within event_retention, and the
-- look-back of wait_for_event(since_start=True). Pruned past retention.
CREATE TABLE parkway.events (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL,
    domain       TEXT NOT NULL,
    subject      TEXT,
    payload      BYTEA,
    published_at DOUBLE PRECISION NOT NULL
);

CREATE INDEX events_by_name ON parkway.events (domain, name, published_at);
CREATE INDEX events_by_time ON parkway.events (published_at);

-- One row per parked wait on an event (or message): the index publish looks up.
-- subject is the subject waited on, or '*'; shape/digest index the match.
-- There is no table of shapes as on SQLite: a publish reads the distinct shapes
-- of a name from subscriptions_lookup itself (a loose index scan), so a park
-- writes one row, and no sweep can drop a shape a concurrent park still needs.
CREATE TABLE parkway.subscriptions (
    run_id     TEXT NOT NULL,
    pos        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    domain     TEXT NOT NULL,
    name       TEXT NOT NULL,
    subject    TEXT NOT NULL,
    shape      TEXT NOT NULL,
    digest     TEXT NOT NULL,
    match      BYTEA,
    wait       TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    deadline   DOUBLE PRECISION,
    PRIMARY KEY (run_id, pos)
);

CREATE INDEX subscriptions_lookup ON parkway.subscriptions (domain, name, shape, digest, subject);
CREATE INDEX subscriptions_by_expiry ON parkway.subscriptions (expires_at);

-- At most one live wait per (message name, key): the index refuses a second.
CREATE UNIQUE INDEX subscriptions_one_message_wait ON parkway.subscriptions (name, subject)
    WHERE kind = 'message';

-- Messages that found no receiver: buffered until expires_at, then kept as
-- dead letters (status 'expired') until an operator retries or discards them.
CREATE TABLE parkway.messages (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        TEXT NOT NULL,
    key         TEXT NOT NULL,
    payload     BYTEA,
    message_id  TEXT,
    status      TEXT NOT NULL,
    reason      TEXT,
    received_at DOUBLE PRECISION NOT NULL,
    expires_at  DOUBLE PRECISION NOT NULL
);

CREATE INDEX messages_by_key ON parkway.messages (name, key, status, id);
CREATE INDEX messages_by_expiry ON parkway.messages (status, expires_at);

-- message_id de-duplication, kept for event_retention.
CREATE TABLE parkway.message_ids (
    message_id TEXT PRIMARY KEY,
    seen_at    DOUBLE PRECISION NOT NULL
);

CREATE INDEX message_ids_by_time ON parkway.message_ids (seen_at);
