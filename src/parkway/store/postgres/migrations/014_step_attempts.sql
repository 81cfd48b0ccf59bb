-- parkway schema, version 14: failed attempts of steps, kept for the history.

-- A retried step's journal entry holds only its latest failure, and its result
-- once it succeeds; each failed attempt is kept here so the run's history still
-- shows it (its error and times) after the step went on.
CREATE TABLE parkway.step_attempts (
    run_id     TEXT NOT NULL,
    pos        INTEGER NOT NULL,
    step       TEXT NOT NULL,
    attempt    INTEGER NOT NULL,
    error      BYTEA NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    ended_at   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, pos, attempt)
);
