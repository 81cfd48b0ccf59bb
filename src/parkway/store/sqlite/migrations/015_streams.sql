-- parkway schema, version 15: a run's streams (ctx.write_stream).

-- One row per stream: the offset its next item takes, and whether it is closed.
-- An append moves next_offset on under SQLite's one writer, so offsets are dense
-- and in commit order.
CREATE TABLE stream_heads (
    run_id      TEXT NOT NULL,
    key         TEXT NOT NULL,
    next_offset INTEGER NOT NULL DEFAULT 0,
    closed      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

-- The items, read by (run, key) from an offset on. attempt: the step's attempt
-- that wrote it, NULL from the workflow's body.
CREATE TABLE stream_items (
    run_id     TEXT NOT NULL,
    key        TEXT NOT NULL,
    "offset"   INTEGER NOT NULL,
    value      BLOB NOT NULL,
    attempt    INTEGER,
    written_at REAL NOT NULL,
    PRIMARY KEY (run_id, key, "offset")
) WITHOUT ROWID;
