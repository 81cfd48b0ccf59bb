-- parkway schema, version 4: what a run's branches, values and updates need.

-- A journal entry's branch (a ctx.gather branch or an update handler; NULL: the
-- workflow's own line) and the order its result was applied in, where that is
-- not its position (NULL: its position).
ALTER TABLE journal ADD COLUMN branch TEXT;
ALTER TABLE journal ADD COLUMN seq INTEGER;

-- ctx.set_value: what a run publishes for its callers, by key.
CREATE TABLE run_values (
    run_id     TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      BLOB NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

-- engine.update: each update sent to a run and its answer. seq orders a run's
-- updates as they arrived; (run_id, id) makes a repeated id the same update.
CREATE TABLE updates (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL,
    id          TEXT NOT NULL,
    name        TEXT NOT NULL,
    payload     BLOB,
    status      TEXT NOT NULL,
    result      BLOB,
    created_at  REAL NOT NULL,
    finished_at REAL
);
CREATE UNIQUE INDEX updates_by_id ON updates (run_id, id);
CREATE INDEX updates_pending ON updates (run_id, seq) WHERE status = 'pending';
