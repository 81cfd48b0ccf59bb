-- parkway schema, version 17: callbacks and human tasks.

-- A callback is found by the SHA-256 of its token (hex), never by the token:
-- nothing in this table completes a callback. signal: the name of the signal its
-- completion sends the run. status: open, completed or failed; outcome: the
-- value (JSON) or the failure's message, kept so that completing twice answers
-- the first outcome again.
CREATE TABLE parkway.callbacks (
    token_hash TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    signal TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    status TEXT NOT NULL DEFAULT 'open',
    outcome BYTEA,
    completed_at DOUBLE PRECISION
);
CREATE INDEX callbacks_by_run ON parkway.callbacks (run_id);

-- A human task: its definition (form as JSON Schema, the pydantic model it came
-- from if any, the data shown, the assignees as a JSON list) and where it
-- stands: open, then completed, cancelled or expired.
CREATE TABLE parkway.human_tasks (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    workflow TEXT NOT NULL,
    name TEXT NOT NULL,
    title TEXT,
    form_schema BYTEA,
    form_model TEXT,
    data BYTEA,
    assignees JSONB NOT NULL DEFAULT '[]',
    signal TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    due_at DOUBLE PRECISION,
    completed_by TEXT,
    completed_at DOUBLE PRECISION,
    result BYTEA
);
-- The inbox: tasks by status, oldest first.
CREATE INDEX human_tasks_by_status ON parkway.human_tasks (status, created_at, id);
-- A run's end cancels its open tasks: partial, so a run that never had one
-- costs a probe of an empty index.
CREATE INDEX human_tasks_open_by_run ON parkway.human_tasks (run_id) WHERE status = 'open';
CREATE INDEX human_tasks_by_run ON parkway.human_tasks (run_id);
