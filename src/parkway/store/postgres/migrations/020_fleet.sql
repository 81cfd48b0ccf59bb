-- parkway schema, version 20: the fleet (workers, operator entries, event links).

-- A worker process: where it runs and the workflows it serves (JSON,
-- {name: [versions]}), renewed with its lease heartbeat (last_seen, wall clock).
-- alive_until: three of its lease periods after it was last seen (0: it stopped);
-- past that it is taken for dead.
CREATE TABLE parkway.workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid BIGINT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    last_seen DOUBLE PRECISION NOT NULL,
    alive_until DOUBLE PRECISION NOT NULL,
    workflows TEXT NOT NULL
);
CREATE INDEX workers_by_life ON parkway.workers (alive_until);

-- Who did what to a run (pause, resume, cancel, retry, update...): its history
-- shows them among its journal's entries. They go with the run.
CREATE TABLE parkway.operator_entries (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id TEXT NOT NULL,
    action TEXT NOT NULL,
    by TEXT,
    at DOUBLE PRECISION NOT NULL
);
CREATE INDEX operator_entries_by_run ON parkway.operator_entries (run_id, id);

-- The runs each event started and resumed, written in the publish's transaction
-- (by deliver_event's statement itself on its fast path); they go with their
-- event (at: its published_at, which its pruning goes by).
CREATE TABLE parkway.event_links (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id TEXT NOT NULL,
    how TEXT NOT NULL,
    run_id TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL
);
CREATE INDEX event_links_by_event ON parkway.event_links (event_id, id);
CREATE INDEX event_links_by_time ON parkway.event_links (at);
