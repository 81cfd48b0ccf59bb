-- parkway schema, version 16: a run's streams (ctx.write_stream).

-- One row per stream: the offset its next item takes, and whether it is closed.
-- An append moves next_offset on in its UPDATE, which holds the row locked to
-- commit: two appenders of one stream are serialised, so offsets are dense and
-- a reader never sees offset n + 1 committed before n.
CREATE TABLE parkway.stream_heads (
    run_id      TEXT NOT NULL,
    key         TEXT NOT NULL,
    next_offset BIGINT NOT NULL DEFAULT 0,
    closed      BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (run_id, key)
);

-- The items, read by (run, key) from an offset on. attempt: the step's attempt
-- that wrote it, NULL from the workflow's body.
CREATE TABLE parkway.stream_items (
    run_id     TEXT NOT NULL,
    key        TEXT NOT NULL,
    "offset"   BIGINT NOT NULL,
    value      BYTEA NOT NULL,
    attempt    INTEGER,
    written_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, key, "offset")
);
