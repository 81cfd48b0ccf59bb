-- parkway schema, version 11: flow control (Concurrency, RateLimit, priority).

-- One row per (workflow, key value) under a limit: the runs holding a
-- Concurrency slot (active), the RateLimit starts given so far (started: the
-- next place in the ring of flow_rates) and the concurrency limit last admitted
-- under (cap). Every change to a key's runs locks this row first (SELECT ... FOR
-- UPDATE): that row lock is what serialises one key's starts, ends and dequeues
-- across processes, while other keys go on in parallel.
CREATE TABLE parkway.flow_slots (
    workflow TEXT NOT NULL,
    key      TEXT NOT NULL,
    active   BIGINT NOT NULL DEFAULT 0,
    started  BIGINT NOT NULL DEFAULT 0,
    cap      BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow, key)
);

-- The runs under a Concurrency limit: queued (waiting for a slot, no task yet)
-- or holding a slot. seq is arrival order.
CREATE TABLE parkway.flow_runs (
    seq      BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id   TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    key      TEXT NOT NULL,
    priority BIGINT NOT NULL,
    queued   BOOLEAN NOT NULL
-- (vacuumed early, as tasks are: a drained queue leaves dead index entries at the
-- front of flow_runs_queue, which each dequeue would step over until then)
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);
-- The next run of a key to start is the first entry of this index: a lookup,
-- however long the queue.
CREATE INDEX flow_runs_queue ON parkway.flow_runs (workflow, key, priority DESC, seq)
    WHERE queued;
-- The oldest run holding a slot (cancel_oldest).
CREATE INDEX flow_runs_active ON parkway.flow_runs (workflow, key, seq) WHERE NOT queued;

-- A RateLimit key's ring of the last `limit` start times given: a new run
-- starts no earlier than `period` after the time in its place of the ring.
CREATE TABLE parkway.flow_rates (
    workflow TEXT NOT NULL,
    key      TEXT NOT NULL,
    slot     BIGINT NOT NULL,
    at       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workflow, key, slot)
);
