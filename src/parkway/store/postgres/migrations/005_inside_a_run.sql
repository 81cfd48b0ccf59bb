-- A journal entry's branch (a ctx.gather branch or an update handler; NULL: the
-- workflow's own line) and the order its result was applied in, where that is
-- not its position (NULL: its position).
ALTER TABLE parkway.journal ADD COLUMN branch TEXT, ADD COLUMN seq BIGINT;

-- ctx.set_value: what a run publishes for its callers, by key.
CREATE TABLE parkway.run_values (
    run_id     TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      BYTEA NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, key)
);

-- engine.update: each update sent to a run and its answer. seq orders a run's
-- updates as they arrived; (run_id, id) makes a repeated id the same update.
CREATE TABLE parkway.updates (
    seq         BIGSERIAL PRIMARY KEY,
    run_id      TEXT NOT NULL,
    id          TEXT NOT NULL,
    name        TEXT NOT NULL,
    payload     BYTEA,
    status      TEXT NOT NULL,
    result      BYTEA,
    created_at  DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    UNIQUE (run_id, id)
);
CREATE INDEX updates_pending ON parkway.updates (run_id, seq) WHERE status = 'pending';
