-- parkway schema, version 10: flow control (Concurrency, RateLimit, priority).

-- One row per (workflow, key value) under a limit: the runs holding a
-- Concurrency slot (active), the RateLimit starts given so far (started: the
-- next place in the ring of flow_rates) and the concurrency limit last admitted
-- under (cap). Every change to a key's runs reads this row first.
CREATE TABLE flow_slots (
    workflow TEXT NOT NULL,
    key      TEXT NOT NULL,
    active   INTEGER NOT NULL DEFAULT 0,
    started  INTEGER NOT NULL DEFAULT 0,
    cap      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow, key)
) WITHOUT ROWID;

-- The runs under a Concurrency limit: queued (waiting for a slot, no task yet)
-- or holding a slot. seq is arrival order.
CREATE TABLE flow_runs (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id   TEXT NOT NULL UNIQUE,
    workflow TEXT NOT NULL,
    key      TEXT NOT NULL,
    priority INTEGER NOT NULL,
    queued   INTEGER NOT NULL
);
-- The next run of a key to start is the first entry of this index: a lookup,
-- however long the queue.
CREATE INDEX flow_runs_queue ON flow_runs (workflow, key, priority DESC, seq) WHERE queued = 1;
-- The oldest run holding a slot (cancel_oldest).
CREATE INDEX flow_runs_active ON flow_runs (workflow, key, seq) WHERE queued = 0;

-- A RateLimit key's ring of the last `limit` start times given: a new run
-- starts no earlier than `period` after the time in its place of the ring.
CREATE TABLE flow_rates (
    workflow TEXT NOT NULL,
    key      TEXT NOT NULL,
    slot     INTEGER NOT NULL,
    at       REAL NOT NULL,
    PRIMARY KEY (workflow, key, slot)
) WITHOUT ROWID;
