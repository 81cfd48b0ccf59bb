-- parkway schema, version 1.
-- JSON values are stored as BLOBs of UTF-8 JSON; times are REAL epoch seconds.

CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    workflow    TEXT NOT NULL,
    version     TEXT NOT NULL,
    status      TEXT NOT NULL,
    input       BLOB,
    output      BLOB,
    error       BLOB,
    domain      TEXT NOT NULL,
    subject     TEXT,
    parent_id   TEXT,
    trigger     BLOB,
    generation  INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    lease_owner TEXT,
    lease_until REAL
) WITHOUT ROWID;

CREATE INDEX runs_by_created ON runs (created_at);
CREATE INDEX runs_by_workflow ON runs (workflow, status);
CREATE INDEX runs_by_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;

-- One row per journaled operation; the row at a run's last position may be
-- 'pending' (the wait the run is parked on).
CREATE TABLE journal (
    run_id   TEXT NOT NULL,
    pos      INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    name     TEXT NOT NULL,
    state    TEXT NOT NULL,
    value    BLOB,
    deadline REAL,
    at       REAL NOT NULL,
    PRIMARY KEY (run_id, pos)
) WITHOUT ROWID;

-- Wake-ups: a start, a signal's arrival, a timer, a delivery. The data they
-- announce lives in the run's mailbox or in the payload.
-- AUTOINCREMENT: ids are never reused, so deleting the tasks a worker claimed
-- (by id) can never hit a task inserted after them.
CREATE TABLE tasks (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  TEXT NOT NULL,
    due_at  REAL NOT NULL,
    kind    TEXT NOT NULL,
    pos     INTEGER,
    payload BLOB
);

CREATE INDEX tasks_by_due ON tasks (due_at);
CREATE INDEX tasks_by_run ON tasks (run_id, pos);

-- AUTOINCREMENT: signals are consumed in id order, which must be send order.
CREATE TABLE mailbox (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  TEXT NOT NULL,
    name    TEXT NOT NULL,
    payload BLOB,
    at      REAL NOT NULL
);

CREATE INDEX mailbox_by_run ON mailbox (run_id, id);
