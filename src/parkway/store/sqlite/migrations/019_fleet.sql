-- parkway schema, version 19: the fleet (workers, operator entries, event links).

-- A worker process: where it runs and the workflows it serves (a JSON object,
-- {name: [versions]}), renewed with its lease heartbeat (last_seen, wall clock).
-- alive_until: three of its lease periods after it was last seen (0: it stopped);
-- past that it is taken for dead.
CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    last_seen REAL NOT NULL,
    alive_until REAL NOT NULL,
    workflows TEXT NOT NULL
);
CREATE INDEX workers_by_life ON workers (alive_until);

-- Who did what to a run (pause, resume, cancel, retry, update...): its history
-- shows them among its journal's entries. They go with the run.
CREATE TABLE operator_entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    action TEXT NOT NULL,
    by TEXT,
    at REAL NOT NULL
);
CREATE INDEX operator_entries_by_run ON operator_entries (run_id, id);

-- The runs each event started and resumed, written in the publish's transaction;
-- they go with their event (at: its published_at, which its pruning goes by).
CREATE TABLE event_links (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL,
    how TEXT NOT NULL,
    run_id TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX event_links_by_event ON event_links (event_id, id);
CREATE INDEX event_links_by_time ON event_links (at);
