-- Named statements of the SQLite store. Parameters are positional (?). A few
-- are the start of a statement that statements.py completes, once for each
-- shape the call gives it (their comment says so).

-- name: get_run
SELECT id, workflow, version, status, input, output, error, domain, subject, parent_id,
       trigger, generation, created_at, updated_at, lease_owner, lease_until, advanced_by,
       paused, forked_from, forked_at
FROM runs WHERE id = ?

-- name: list_runs
-- Completed by statements.listing: the filters given, the order and the limit.
SELECT id, workflow, version, status, input, output, error, domain, subject, parent_id,
       trigger, generation, created_at, updated_at, lease_owner, lease_until, advanced_by,
       paused, forked_from, forked_at
FROM runs

-- name: runs_search
-- A run listing's condition: the id or the subject starts with the parameter (given
-- twice). instr, not LIKE: case-sensitive, and no wildcard to escape in the text.
(instr(id, ?) = 1 OR instr(subject, ?) = 1)

-- name: runs_created_after
created_at >= ?

-- name: runs_created_before
created_at < ?

-- name: runs_before
-- Keyset pagination: the runs after the cursor's run in the listing's order (created_at
-- DESC, id DESC), read off runs_by_created, which holds the key (created_at, id).
(created_at, id) < (SELECT created_at, id FROM runs WHERE id = ?)

-- name: run_counts
-- Served by runs_by_workflow (workflow, status) alone.
SELECT workflow, status, count(*) FROM runs
WHERE workflow NOT LIKE 'parkway.%'
GROUP BY workflow, status
ORDER BY workflow, status

-- name: find_runs
-- A bulk operation's next batch (engine.cancel_runs, retry_runs): runs in one of
-- the statuses (a JSON array), each filter given (?2..?4, NULL: any), by id after
-- ?5 (NULL: from the first); internal runs (parkway.*) only by their own name.
SELECT id, workflow, version, status, input, output, error, domain, subject, parent_id,
       trigger, generation, created_at, updated_at, lease_owner, lease_until, advanced_by,
       paused, forked_from, forked_at
FROM runs
WHERE status IN (SELECT value FROM json_each(?1))
  AND (CASE WHEN ?2 IS NULL THEN workflow NOT LIKE 'parkway.%' ELSE workflow = ?2 END)
  AND (?3 IS NULL OR subject = ?3)
  AND (?4 IS NULL OR created_at < ?4)
  AND (?5 IS NULL OR id > ?5)
ORDER BY id LIMIT ?6

-- name: expired_runs_of
-- The retention sweep, for a workflow with a retention of its own (runs_by_end).
SELECT id FROM runs
WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < ? AND workflow = ?
ORDER BY updated_at, id LIMIT ?

-- name: expired_runs_except
-- The retention sweep at the engine's retention: every workflow but those with
-- one of their own (a JSON array).
SELECT id FROM runs
WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < ?
  AND workflow NOT IN (SELECT value FROM json_each(?))
ORDER BY updated_at, id LIMIT ?

-- name: delete_run
DELETE FROM runs WHERE id = ?

-- name: delete_run_signals
DELETE FROM mailbox WHERE run_id = ?

-- name: delete_run_values
DELETE FROM run_values WHERE run_id = ?

-- name: delete_run_updates
DELETE FROM updates WHERE run_id = ?

-- name: insert_run
INSERT INTO runs (id, workflow, version, status, input, output, error, domain, subject,
                  parent_id, trigger, generation, created_at, updated_at, lease_owner, lease_until)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: journal
SELECT pos, kind, name, state, value, deadline, at, branch, seq
FROM journal WHERE run_id = ? ORDER BY pos

-- name: put_journal
INSERT OR REPLACE INTO journal (run_id, pos, kind, name, state, value, deadline, at, branch, seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: journal_outline
SELECT pos, state FROM journal WHERE run_id = ? ORDER BY pos

-- name: copy_journal
-- engine.fork: the source's (?2) entries below position ?3 (NULL: all) as the fork's
-- (?1), copied in the store, values untouched; pending waits are waited for anew.
INSERT INTO journal (run_id, pos, kind, name, state, value, deadline, at, branch, seq)
SELECT ?1, pos, kind, name, state, value, deadline, at, branch, seq FROM journal
WHERE run_id = ?2 AND (?3 IS NULL OR pos < ?3) AND state <> 'pending'

-- name: clear_journal
DELETE FROM journal WHERE run_id = ?

-- name: add_task
INSERT INTO tasks (run_id, due_at, kind, pos, payload) VALUES (?, ?, ?, ?, ?)

-- name: due_tasks
SELECT id, run_id, due_at, kind, pos, payload FROM tasks
WHERE run_id = ? AND due_at <= ? ORDER BY id

-- name: delete_task
DELETE FROM tasks WHERE id = ?

-- name: delete_wait_tasks
DELETE FROM tasks WHERE run_id = ? AND pos IS NOT NULL

-- name: delete_wait_tasks_at
DELETE FROM tasks WHERE run_id = ? AND pos = ?

-- name: delete_wait_tasks_keep
DELETE FROM tasks WHERE run_id = ? AND pos IS NOT NULL
    AND id NOT IN (SELECT value FROM json_each(?))

-- name: delete_wait_tasks_at_keep
DELETE FROM tasks WHERE run_id = ? AND pos = ? AND id NOT IN (SELECT value FROM json_each(?))

-- name: delete_all_tasks
DELETE FROM tasks WHERE run_id = ?

-- name: add_signal
INSERT INTO mailbox (run_id, name, payload, at) VALUES (?, ?, ?, ?)

-- name: signals
SELECT id, run_id, name, payload, at FROM mailbox WHERE run_id = ? ORDER BY id

-- name: delete_signal
DELETE FROM mailbox WHERE id = ?

-- name: claim
-- Lease the runs of the first due tasks whose run has no live lease, earliest
-- first (walking tasks_by_due; several tasks of one run count once). Not naming
-- status: an UPDATE that names a column rewrites the row's entries in every index
-- on it, even when its value stays (runs_by_workflow, runs_by_end),
-- and a claimed run is parked far more often than pending (claim_started, next).
-- Returns the runs' rows (statements.CLAIM). A paused run is taken only for its
-- deadline (see parkway.core.deadlines).
UPDATE runs SET lease_owner = ?1, lease_until = ?2
WHERE id IN (
    SELECT t.run_id FROM tasks AS t JOIN runs AS r ON r.id = t.run_id
    WHERE t.due_at <= ?3 AND (r.lease_owner IS NULL OR r.lease_until < ?4)
      AND (r.paused = 0 OR t.kind = 'deadline') AND r.status <> 'held'
    ORDER BY t.due_at, t.id LIMIT ?5)

-- name: claim_served
-- claim, of the runs whose key (workflow, char(31), version: see
-- parkway.store.fleet.run_key) is among those the worker serves (?6, a JSON
-- array; read once into a lookup table, not for each row).
UPDATE runs SET lease_owner = ?1, lease_until = ?2
WHERE id IN (
    SELECT t.run_id FROM tasks AS t JOIN runs AS r ON r.id = t.run_id
    WHERE t.due_at <= ?3 AND (r.lease_owner IS NULL OR r.lease_until < ?4)
      AND (r.paused = 0 OR t.kind = 'deadline')
      AND (r.workflow || char(31) || r.version) IN (SELECT value FROM json_each(?6))
    ORDER BY t.due_at, t.id LIMIT ?5)

-- name: claim_started
-- The pending runs a claim just took now run (their ids: a JSON array).
UPDATE runs SET status = 'running'
WHERE id IN (SELECT value FROM json_each(?)) AND status = 'pending'

-- name: claimed_tasks
-- The due tasks of the runs a claim took (a JSON array of ids), each run's by id.
SELECT id, run_id, due_at, kind, pos, payload FROM tasks
WHERE run_id IN (SELECT value FROM json_each(?1)) AND due_at <= ?2 ORDER BY run_id, id

-- name: claimed_journals
-- The journals of the runs a claim took that need theirs read (see load_in).
SELECT run_id, pos, kind, name, state, value, deadline, at, branch, seq
FROM journal WHERE run_id IN (SELECT value FROM json_each(?)) ORDER BY run_id, pos

-- name: claimed_signals
-- The mailboxes of the runs a claim took that have a signal due (see reads_mailbox).
SELECT id, run_id, name, payload, at FROM mailbox
WHERE run_id IN (SELECT value FROM json_each(?)) ORDER BY run_id, id

-- name: lease_run
-- One run, for this process's worker, in the transaction that gave it a task: a
-- run that is not pending (status not named: see claim), else lease_pending_run.
-- Returns the run's row (statements.LEASE): what the lease hands over starts from it.
UPDATE runs SET lease_owner = ?1, lease_until = ?2
WHERE id = ?3 AND (lease_owner IS NULL OR lease_until < ?4)
  AND status NOT IN ('pending', 'held', 'completed', 'failed', 'cancelled') AND paused = 0

-- name: lease_pending_run
-- lease_run of a run not yet started (one this transaction inserted, mostly).
UPDATE runs SET lease_owner = ?1, lease_until = ?2, status = 'running'
WHERE id = ?3 AND (lease_owner IS NULL OR lease_until < ?4)
  AND status = 'pending' AND paused = 0

-- name: extend_lease
UPDATE runs SET lease_until = ? WHERE id = ? AND lease_owner = ?

-- name: drop_cache_mark
UPDATE runs SET advanced_by = NULL WHERE id = ? AND advanced_by = ?

-- name: release_leases
UPDATE runs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?

-- name: next_due
SELECT min(due_at) FROM tasks

-- name: next_due_after
SELECT min(due_at) FROM tasks WHERE due_at > ?

-- name: has_due
-- (A paused run's tasks wait for its resume, but its deadline; a held run's for its
-- retry: they are not due work.)
SELECT 1 FROM tasks AS t JOIN runs AS r ON r.id = t.run_id
WHERE t.due_at <= ? AND (r.paused = 0 OR t.kind = 'deadline') AND r.status <> 'held' LIMIT 1

-- name: stats_parked
-- Parked and held runs by workflow, in steps along runs_by_workflow (workflow,
-- status): the next workflow name after the last, then the counts of its parked
-- and held runs; so the read grows with the workflows and those runs, not with
-- all the runs.
WITH RECURSIVE names(name) AS (
    SELECT min(workflow) FROM runs
    UNION ALL
    SELECT (SELECT min(workflow) FROM runs WHERE workflow > names.name)
    FROM names WHERE names.name IS NOT NULL
)
SELECT name, (SELECT count(*) FROM runs WHERE workflow = names.name AND status = 'parked'),
       (SELECT count(*) FROM runs WHERE workflow = names.name AND status = 'held')
FROM names WHERE name IS NOT NULL

-- name: stats_due
-- The backlog: tasks due now, and the oldest due time among them (tasks_by_due),
-- but a paused or held run's (they wait for its resume or retry, not for a worker).
SELECT count(*), min(t.due_at) FROM tasks AS t JOIN runs AS r ON r.id = t.run_id
WHERE t.due_at <= ? AND r.paused = 0 AND r.status <> 'held'

-- name: stats_dead_letters
-- messages_by_expiry (status, expires_at): the dead letters' range of it.
SELECT count(*) FROM messages WHERE status = 'expired'

-- name: takeovers_trigger
-- A claim that leases a run whose lease another owner held (and let expire: the
-- claim takes no live lease) tells the store, which counts it (see StoreStats).
-- TEMP: this connection's, never in the file.
CREATE TEMP TRIGGER IF NOT EXISTS parkway_takeovers
AFTER UPDATE OF lease_owner ON main.runs
WHEN OLD.lease_owner IS NOT NULL AND NEW.lease_owner IS NOT NULL
     AND NEW.lease_owner <> OLD.lease_owner
BEGIN
    SELECT parkway_took_over();
END

-- name: get_event
SELECT id, name, domain, subject, payload, published_at FROM events WHERE id = ?

-- name: delete_event
DELETE FROM events WHERE id = ?

-- name: insert_event
INSERT INTO events (id, name, domain, subject, payload, published_at) VALUES (?, ?, ?, ?, ?, ?)

-- name: events_since
SELECT id, name, domain, subject, payload, published_at FROM events
WHERE domain = ? AND name = ? AND published_at >= ? ORDER BY published_at, seq

-- name: prune_events
DELETE FROM events WHERE published_at < ?

-- name: add_subscription
INSERT OR REPLACE INTO subscriptions
    (run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
     deadline)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: add_shape
INSERT OR IGNORE INTO subscription_shapes (domain, name, shape) VALUES (?, ?, ?)

-- name: shapes
SELECT shape FROM subscription_shapes WHERE domain = ? AND name = ?

-- name: find_event_subscriptions
-- (The kind is a literal, here and in find_message_subscriptions: with a parameter
-- there, SQLite re-plans the statement on every run, weighing the partial index on
-- message waits; that tripled the lookup's cost.)
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM subscriptions
WHERE domain = ? AND name = ? AND shape = ? AND digest = ? AND subject IN (?, '*')
  AND kind = 'event'
ORDER BY created_at, run_id

-- name: find_message_subscriptions
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM subscriptions
WHERE domain = ? AND name = ? AND shape = ? AND digest = ? AND subject IN (?, '*')
  AND kind = 'message'
ORDER BY created_at, run_id

-- name: find_cancel_subscriptions
-- (cancel_on's conditions: indexed under a name of their own, see parkway.core.cancel_on.)
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM subscriptions
WHERE domain = ? AND name = ? AND shape = ? AND digest = ? AND subject IN (?, '*')
  AND kind = 'cancel'
ORDER BY created_at, run_id

-- name: list_subscriptions
-- Completed by statements.listing: the filters given and the order.
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM subscriptions

-- name: delete_subscription
DELETE FROM subscriptions WHERE run_id = ? AND pos = ?

-- name: delete_run_subscriptions
DELETE FROM subscriptions WHERE run_id = ?

-- name: sweep_subscriptions
DELETE FROM subscriptions WHERE expires_at < ?

-- name: sweep_shapes
DELETE FROM subscription_shapes WHERE NOT EXISTS (
    SELECT 1 FROM subscriptions AS s
    WHERE s.domain = subscription_shapes.domain AND s.name = subscription_shapes.name
      AND s.shape = subscription_shapes.shape)

-- name: active_run
-- The live statuses named, not the ended ones excluded: runs_by_workflow (workflow,
-- status, domain, subject) is then three seeks, not a walk of the workflow's runs.
SELECT id FROM runs WHERE workflow = ?1 AND status IN ('pending', 'running', 'parked', 'held')
  AND domain = ?2 AND subject IS ?3 LIMIT 1

-- name: message_wait
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM subscriptions WHERE kind = 'message' AND name = ? AND subject = ?

-- name: add_message
INSERT INTO messages (name, key, payload, message_id, status, reason, received_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)

-- name: oldest_message
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM messages WHERE name = ? AND key = ? AND status = 'buffered' AND expires_at > ?
ORDER BY id LIMIT 1

-- name: get_message
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM messages WHERE id = ?

-- name: list_messages
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM messages ORDER BY id

-- name: list_messages_by_status
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM messages WHERE status = ? ORDER BY id

-- name: delete_message
DELETE FROM messages WHERE id = ?

-- name: expire_messages
UPDATE messages SET status = 'expired', reason = ?
WHERE status = 'buffered' AND expires_at <= ?
RETURNING id, name, key, payload, message_id, status, reason, received_at, expires_at

-- name: update_message
UPDATE messages SET status = ?, reason = ?, expires_at = ? WHERE id = ?

-- name: message_id_seen
SELECT seen_at FROM message_ids WHERE message_id = ?

-- name: remember_message_id
INSERT OR REPLACE INTO message_ids (message_id, seen_at) VALUES (?, ?)

-- name: prune_message_ids
DELETE FROM message_ids WHERE seen_at < ?

-- == values and updates ==

-- name: put_value
INSERT OR REPLACE INTO run_values (run_id, key, value, updated_at) VALUES (?, ?, ?, ?)

-- name: run_values
-- The run ids as one JSON array parameter: one statement for any number of them.
SELECT run_id, key, value FROM run_values
WHERE run_id IN (SELECT value FROM json_each(?)) ORDER BY run_id, key

-- name: add_attempts
INSERT OR IGNORE INTO step_attempts (run_id, pos, step, attempt, error, started_at, ended_at)
VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: attempts
SELECT run_id, pos, step, attempt, error, started_at, ended_at
FROM step_attempts WHERE run_id = ? ORDER BY pos, attempt

-- name: delete_run_attempts
DELETE FROM step_attempts WHERE run_id = ?

-- name: add_update
INSERT OR IGNORE INTO updates (run_id, id, name, payload, status, result, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: get_update
SELECT run_id, id, name, payload, status, result, created_at, finished_at, seq
FROM updates WHERE run_id = ? AND id = ?

-- name: pending_updates
SELECT run_id, id, name, payload, status, result, created_at, finished_at, seq
FROM updates WHERE run_id = ? AND status = 'pending' ORDER BY seq

-- name: finish_update
UPDATE updates SET status = ?, result = ?, finished_at = ? WHERE run_id = ? AND id = ?
