-- Named statements of the PostgreSQL store. Parameters are positional (%s), or
-- named (%(name)s) in a statement that uses one twice. Everything is qualified
-- with the schema "parkway". A "_locked" variant takes row locks and is used only
-- in read-write transactions (READ ONLY ones may not lock rows); see the
-- package's docstring (parkway/store/postgres/__init__.py) for which race each
-- lock closes. A few sections are fragments, not whole statements (their
-- comment says which statement they are part of): statements.py joins them,
-- once, at import.

-- == schema and migrations ==

-- name: schema_usage
SELECT has_schema_privilege(oid, 'USAGE') FROM pg_namespace WHERE nspname = 'parkway'

-- name: schema_version_exists
SELECT to_regclass('parkway.schema_version') IS NOT NULL

-- name: schema_version
SELECT coalesce(max(version), 0) FROM parkway.schema_version

-- name: schema_exists
SELECT to_regnamespace('parkway') IS NOT NULL

-- name: create_schema
CREATE SCHEMA parkway

-- name: create_schema_version
CREATE TABLE IF NOT EXISTS parkway.schema_version (
    version    INTEGER PRIMARY KEY,
    applied_at DOUBLE PRECISION NOT NULL
)

-- name: record_version
INSERT INTO parkway.schema_version (version, applied_at) VALUES (%s, %s)

-- name: lock_migrations
SELECT pg_advisory_lock(%s)

-- name: unlock_migrations
SELECT pg_advisory_unlock(%s)

-- name: missing_privileges
SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'parkway' AND c.relkind = 'r'
  AND NOT (has_table_privilege(c.oid, 'SELECT') AND has_table_privilege(c.oid, 'INSERT')
           AND has_table_privilege(c.oid, 'UPDATE') AND has_table_privilege(c.oid, 'DELETE'))
ORDER BY c.relname


-- == locks (transaction-scoped advisory locks; keys are 64-bit hashes made in Python) ==

-- name: xact_id
SELECT pg_current_xact_id()::text

-- name: xact_status
SELECT pg_xact_status(%s::xid8)

-- name: xact_lock
SELECT pg_advisory_xact_lock(%s)

-- name: xact_lock_shared
SELECT pg_advisory_xact_lock_shared(%s)

-- == runs ==

-- name: get_run
SELECT id, workflow, version, status, input, output, error, domain, subject, parent_id,
       trigger, generation, created_at, updated_at, lease_owner, lease_until, advanced_by,
       paused, forked_from, forked_at
FROM parkway.runs WHERE id = %s

-- name: get_run_locked
SELECT id, workflow, version, status, input, output, error, domain, subject, parent_id,
       trigger, generation, created_at, updated_at, lease_owner, lease_until, advanced_by,
       paused, forked_from, forked_at
FROM parkway.runs WHERE id = %s FOR NO KEY UPDATE

-- name: list_runs
SELECT id, workflow, version, status, input, output, error, domain, subject, parent_id,
       trigger, generation, created_at, updated_at, lease_owner, lease_until, advanced_by,
       paused, forked_from, forked_at
FROM parkway.runs

-- name: runs_search
-- A run listing's condition: the id or the subject starts with the parameter (given
-- twice). starts_with, not LIKE: no wildcard to escape in the text.
(starts_with(id, %s) OR starts_with(subject, %s))

-- name: runs_created_after
created_at >= %s

-- name: runs_created_before
created_at < %s

-- name: runs_before
-- Keyset pagination: the runs after the cursor's run in the listing's order (created_at
-- DESC, id DESC), read off runs_by_created (created_at, id).
(created_at, id) < (SELECT created_at, id FROM parkway.runs WHERE id = %s)

-- name: run_counts
-- Served by runs_by_workflow (workflow, status).
SELECT workflow, status, count(*) FROM parkway.runs
WHERE workflow NOT LIKE %s
GROUP BY workflow, status
ORDER BY workflow, status

-- name: find_runs
-- A bulk operation's next batch (engine.cancel_runs, retry_runs): runs in one of
-- the statuses, each filter given (NULL: any), by id after ``after`` (NULL: from
-- the first); internal runs (parkway.*) only by their own name.
SELECT id, workflow, version, status, input, output, error, domain, subject, parent_id,
       trigger, generation, created_at, updated_at, lease_owner, lease_until, advanced_by,
       paused, forked_from, forked_at
FROM parkway.runs
WHERE status = ANY(%(statuses)s::text[])
  AND (CASE WHEN %(workflow)s::text IS NULL THEN workflow NOT LIKE 'parkway.%%'
            ELSE workflow = %(workflow)s::text END)
  AND (%(subject)s::text IS NULL OR subject = %(subject)s::text)
  AND (%(before)s::float8 IS NULL OR created_at < %(before)s::float8)
  AND (%(after)s::text IS NULL OR id > %(after)s::text)
ORDER BY id LIMIT %(limit)s

-- name: expired_runs_of
-- The retention sweep, for a workflow with a retention of its own (runs_by_end;
-- ended_at: updated_at of a run that ended, see migration 013).
SELECT id FROM parkway.runs
WHERE ended_at < %s AND workflow = %s
ORDER BY ended_at, id LIMIT %s

-- name: expired_runs_except
-- The retention sweep at the engine's retention: every workflow but those with
-- one of their own.
SELECT id FROM parkway.runs
WHERE ended_at < %s AND NOT workflow = ANY(%s::text[])
ORDER BY ended_at, id LIMIT %s

-- name: delete_runs
-- A run and everything kept for it, in one statement.
WITH gone AS (
    DELETE FROM parkway.runs WHERE id = ANY(%(ids)s::text[]) RETURNING id
), journal AS (
    DELETE FROM parkway.journal WHERE run_id = ANY(%(ids)s::text[])
), tasks AS (
    DELETE FROM parkway.tasks WHERE run_id = ANY(%(ids)s::text[])
), mailbox AS (
    DELETE FROM parkway.mailbox WHERE run_id = ANY(%(ids)s::text[])
), subscriptions AS (
    DELETE FROM parkway.subscriptions WHERE run_id = ANY(%(ids)s::text[])
), run_values AS (
    DELETE FROM parkway.run_values WHERE run_id = ANY(%(ids)s::text[])
), updates AS (
    DELETE FROM parkway.updates WHERE run_id = ANY(%(ids)s::text[])
), callbacks AS (
    DELETE FROM parkway.callbacks WHERE run_id = ANY(%(ids)s::text[])
), human_tasks AS (
    DELETE FROM parkway.human_tasks WHERE run_id = ANY(%(ids)s::text[])
), stream_heads AS (
    DELETE FROM parkway.stream_heads WHERE run_id = ANY(%(ids)s::text[])
), stream_items AS (
    DELETE FROM parkway.stream_items WHERE run_id = ANY(%(ids)s::text[])
), attempts AS (
    DELETE FROM parkway.step_attempts WHERE run_id = ANY(%(ids)s::text[])
), operator_entries AS (
    DELETE FROM parkway.operator_entries WHERE run_id = ANY(%(ids)s::text[])
)
SELECT count(*) FROM gone

-- name: insert_run
INSERT INTO parkway.runs (id, workflow, version, status, input, output, error, domain, subject,
                          parent_id, trigger, generation, created_at, updated_at, lease_owner,
                          lease_until)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO NOTHING

-- name: start_run
-- A run and its start task (with its payload: the starter's trace context, or
-- NULL), unless the id exists: idempotent, so a start cut off with its connection
-- is simply sent again. Returns the run and its start task (nothing if the id
-- exists), and notifies other processes' listeners unless the notification is
-- NULL (the run is inserted leased to this process's worker).
WITH inserted AS (
    INSERT INTO parkway.runs (id, workflow, version, status, input, output, error, domain,
                              subject, parent_id, trigger, generation, created_at,
                              updated_at, lease_owner, lease_until)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (id) DO NOTHING
    RETURNING id, workflow, version, status, input, output, error, domain, subject,
              parent_id, trigger, generation, created_at, updated_at, lease_owner,
              lease_until
), task AS (
    INSERT INTO parkway.tasks (run_id, due_at, kind, pos, payload)
    SELECT id, %s, 'start', NULL, %s FROM inserted
    RETURNING id, due_at, payload
)
SELECT i.id, i.workflow, i.version, i.status, i.input, i.output, i.error, i.domain,
       i.subject, i.parent_id, i.trigger, i.generation, i.created_at, i.updated_at,
       i.lease_owner, i.lease_until, t.id, t.due_at, t.payload,
       (SELECT pg_notify('parkway_tasks', note) FROM (SELECT %s::text AS note) AS n
        WHERE note IS NOT NULL)
FROM inserted AS i, task AS t

-- name: active_run
SELECT id FROM parkway.runs WHERE workflow = %s AND domain = %s AND subject = %s
  AND status NOT IN ('completed', 'failed', 'cancelled') LIMIT 1

-- name: active_run_no_subject
SELECT id FROM parkway.runs WHERE workflow = %s AND domain = %s AND subject IS NULL
  AND status NOT IN ('completed', 'failed', 'cancelled') LIMIT 1

-- == journal ==

-- name: journal
SELECT pos, kind, name, state, value, deadline, at, branch, seq FROM parkway.journal
WHERE run_id = %s ORDER BY pos

-- name: journal_outline
SELECT pos, state FROM parkway.journal WHERE run_id = %s ORDER BY pos

-- name: copy_journal
-- engine.fork: the source's entries below ``before`` (NULL: all) as the fork's,
-- copied in the server, values untouched; pending waits are waited for anew.
INSERT INTO parkway.journal (run_id, pos, kind, name, state, value, deadline, at, branch, seq)
SELECT %(run)s::text, pos, kind, name, state, value, deadline, at, branch, seq
FROM parkway.journal
WHERE run_id = %(source)s::text AND (%(before)s::int4 IS NULL OR pos < %(before)s::int4)
  AND state <> 'pending'

-- name: put_journal
INSERT INTO parkway.journal (run_id, pos, kind, name, state, value, deadline, at, branch, seq)
SELECT %s::text, * FROM unnest(%s::int4[], %s::text[], %s::text[], %s::text[], %s::bytea[],
                               %s::float8[], %s::float8[], %s::text[], %s::int8[])
ON CONFLICT (run_id, pos) DO UPDATE SET
    kind = EXCLUDED.kind, name = EXCLUDED.name, state = EXCLUDED.state,
    value = EXCLUDED.value, deadline = EXCLUDED.deadline, at = EXCLUDED.at,
    branch = EXCLUDED.branch, seq = EXCLUDED.seq

-- name: put_journal_entry
INSERT INTO parkway.journal (run_id, pos, kind, name, state, value, deadline, at, branch, seq)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (run_id, pos) DO UPDATE SET
    kind = EXCLUDED.kind, name = EXCLUDED.name, state = EXCLUDED.state,
    value = EXCLUDED.value, deadline = EXCLUDED.deadline, at = EXCLUDED.at,
    branch = EXCLUDED.branch, seq = EXCLUDED.seq

-- name: clear_journal
-- (A run's failed attempts go with its journal: positions start again.)
WITH attempts AS (DELETE FROM parkway.step_attempts WHERE run_id = %(id)s)
DELETE FROM parkway.journal WHERE run_id = %(id)s

-- == tasks ==

-- name: add_tasks
INSERT INTO parkway.tasks (run_id, due_at, kind, pos, payload)
SELECT * FROM unnest(%s::text[], %s::float8[], %s::text[], %s::int4[], %s::bytea[])

-- name: add_tasks_notify
-- The first add_tasks of a transaction also queues the notification other
-- processes' listeners get when it commits (never before: NOTIFY is transactional).
WITH added AS (
    INSERT INTO parkway.tasks (run_id, due_at, kind, pos, payload)
    SELECT * FROM unnest(%s::text[], %s::float8[], %s::text[], %s::int4[], %s::bytea[])
)
SELECT pg_notify('parkway_tasks', %s)

-- name: due_tasks
SELECT id, run_id, due_at, kind, pos, payload FROM parkway.tasks
WHERE run_id = %s AND due_at <= %s ORDER BY id

-- name: message_wait_keys
SELECT subject FROM parkway.subscriptions WHERE run_id = %s AND kind = 'message'

-- name: delete_tasks
DELETE FROM parkway.tasks WHERE id = ANY(%s::int8[])

-- name: delete_task
DELETE FROM parkway.tasks WHERE id = %s

-- name: delete_wait_tasks
DELETE FROM parkway.tasks WHERE run_id = %s AND pos IS NOT NULL

-- name: delete_wait_tasks_at
DELETE FROM parkway.tasks WHERE run_id = %s AND pos = %s

-- name: delete_wait_tasks_keep
DELETE FROM parkway.tasks WHERE run_id = %s AND pos IS NOT NULL AND NOT id = ANY(%s::int8[])

-- name: delete_wait_tasks_at_keep
DELETE FROM parkway.tasks WHERE run_id = %s AND pos = %s AND NOT id = ANY(%s::int8[])

-- name: delete_all_tasks
DELETE FROM parkway.tasks WHERE run_id = %s

-- == mailbox ==

-- name: add_signal
INSERT INTO parkway.mailbox (run_id, name, payload, at) VALUES (%s, %s, %s, %s)

-- name: send_signal
-- A signal and its task, unless the run is missing or has ended, in one
-- statement; returns the run's status. The row lock serialises with the run's
-- end (a signal never lands in the mailbox of a run that ended before it).
-- The commit mark (see migration 003) records the status too: a commit whose
-- reply was lost still tells what it found. ``quiet``: the lease statement right
-- after it notifies instead, only if it did not lease the run (see lease_from).
-- ``task_payload``: the signal task's (the sender's trace context, or NULL).
WITH run AS (
    SELECT status FROM parkway.runs WHERE id = %(run)s FOR NO KEY UPDATE
), buffered AS (
    INSERT INTO parkway.mailbox (run_id, name, payload, at)
    SELECT %(run)s, %(name)s, %(payload)s, %(at)s FROM run
    WHERE status NOT IN ('completed', 'failed', 'cancelled')
    RETURNING run_id
), task AS (
    INSERT INTO parkway.tasks (run_id, due_at, kind, payload)
    SELECT run_id, %(at)s, 'signal', %(task_payload)s FROM buffered
    RETURNING run_id
), marked AS (
    INSERT INTO parkway.commit_marks (mark, result) VALUES (%(mark)s, (SELECT status FROM run))
)
SELECT status,
       (SELECT pg_notify('parkway_tasks', %(token)s) FROM task WHERE NOT %(quiet)s),
       set_config('parkway.note', coalesce((SELECT %(token)s::text FROM task WHERE %(quiet)s), ''), true)
FROM run

-- name: mark_outcome
-- Settles a marked commit whose reply was lost (see migration 003): inserts the
-- mark unless it is there (waiting for a transaction still writing it).
INSERT INTO parkway.commit_marks (mark) VALUES (%s) ON CONFLICT (mark) DO NOTHING

-- name: mark_result
SELECT result FROM parkway.commit_marks WHERE mark = %s

-- name: prune_marks
DELETE FROM parkway.commit_marks WHERE at < now() - interval '1 hour'

-- name: signals
SELECT id, run_id, name, payload, at FROM parkway.mailbox WHERE run_id = %s ORDER BY id

-- name: delete_signals
DELETE FROM parkway.mailbox WHERE id = ANY(%s::int8[])

-- == claiming and leases ==

-- name: claim_settings
-- Sent before claim_due, in the same implicit transaction (one pipeline, one
-- Sync), for it alone. Its commit does not wait for an fsync: a lease lost in a
-- server crash is simply not held, and the worker's next (durable, fenced)
-- commit fails rather than writing; any durable commit after it flushes it too
-- (the WAL is sequential). And no sequential scans: its plan, cached for the
-- connection, may have been made while the tables were nearly empty (a worker
-- that starts with the deployment), when a scan of runs looks cheaper than a
-- probe by key; the scan then stays as the table grows (measured: ~0.1 ms a
-- claim at 1,000 runs, which the keyed probe does in ~5 µs).
SELECT set_config('synchronous_commit', 'off', true), set_config('enable_seqscan', 'off', true)

-- name: claim_due
-- Lease the runs of the first due tasks whose run has no live lease, earliest
-- first, and read what advancing them needs: the run, its due tasks, its
-- journal and its mailbox (a row per run, the others as arrays of columns), so
-- a claim is one statement and one round trip (after claim_settings). SKIP
-- LOCKED: a run another worker is claiming (or a client is cancelling) right now
-- is left to it rather than waited for. Several due tasks of one run count once
-- (and take several places under the limit: ``found`` says how many places were
-- taken, so the caller can claim again for the others). Followed by
-- claimed_columns, claimed_from and claimed_loads.
WITH due AS (
    -- (taken: held by a worker whose lease ran out; see claim_takeovers)
    SELECT r.id, r.ctid, r.lease_owner IS NOT NULL AS taken
    FROM parkway.tasks AS t JOIN parkway.runs AS r ON r.id = t.run_id
    WHERE t.due_at <= %(now)s AND (r.lease_owner IS NULL OR r.lease_until < %(wall)s)
      AND (NOT r.paused OR t.kind = 'deadline')  -- (paused: only for its deadline)
      AND r.status <> 'held'  -- (held: for its retry)
    ORDER BY t.due_at, t.id
    LIMIT %(limit)s
    FOR UPDATE OF r SKIP LOCKED
), claimed AS (
    UPDATE parkway.runs SET lease_owner = %(owner)s, lease_until = %(until)s,
        status = CASE status WHEN 'pending' THEN 'running' ELSE status END
    -- The rows locked above, by their ctid (which a locked row keeps): a TID scan.
    WHERE ctid = ANY(ARRAY(SELECT ctid FROM due))
    RETURNING id, workflow, version, status, input, output, error, domain, subject,
              parent_id, trigger, generation, created_at, updated_at, lease_owner,
              lease_until, advanced_by
)
-- name: lease_run
-- Lease one run for this process's worker, in the transaction that gave it a
-- task (a signal, a delivery): the worker then advances it without a claim of
-- its own. Only if no one holds its lease and it has not ended. (Committed like
-- the rest of that transaction: durably.) The run: ``run``, or with ``run`` null
-- the one the delivery statement just before it left in parkway.delivered
-- (deliver_message, deliver_event; '' when it delivered to none, which names no
-- run). The run's id written out in the UPDATE, not read from ``due``: that took a
-- subplan, ~2 us more a lease (measured by EXPLAIN ANALYZE, shuffled, 800 each).
-- Followed by claimed_columns, lease_from and claimed_loads.
WITH due AS (
    SELECT coalesce(%(run)s::text, current_setting('parkway.delivered', true)) AS id
), claimed AS (
    UPDATE parkway.runs SET lease_owner = %(owner)s, lease_until = %(until)s,
        status = CASE status WHEN 'pending' THEN 'running' ELSE status END
    WHERE id = coalesce(%(run)s::text, current_setting('parkway.delivered', true))
      AND (lease_owner IS NULL OR lease_until < %(wall)s)
      AND status NOT IN ('held', 'completed', 'failed', 'cancelled') AND NOT paused
    RETURNING id, workflow, version, status, input, output, error, domain, subject,
              parent_id, trigger, generation, created_at, updated_at, lease_owner,
              lease_until, advanced_by
)

-- name: stats_parked
-- Parked and held runs by workflow, in steps along runs_by_workflow (workflow,
-- status): the next workflow name after the last, then the counts of its parked
-- and held runs; so the read grows with the workflows and those runs, not with
-- all the runs.
WITH RECURSIVE names(name) AS (
    SELECT min(workflow) FROM parkway.runs
    UNION ALL
    SELECT (SELECT min(workflow) FROM parkway.runs WHERE workflow > names.name)
    FROM names WHERE names.name IS NOT NULL
)
SELECT name, (SELECT count(*) FROM parkway.runs WHERE workflow = names.name AND status = 'parked'),
       (SELECT count(*) FROM parkway.runs WHERE workflow = names.name AND status = 'held')
FROM names WHERE name IS NOT NULL

-- name: stats_due
-- The backlog: tasks due now, and the oldest due time among them (tasks_by_due),
-- but a paused or held run's (they wait for its resume or retry, not for a worker).
SELECT count(*), min(t.due_at) FROM parkway.tasks AS t JOIN parkway.runs AS r ON r.id = t.run_id
WHERE t.due_at <= %s AND NOT r.paused AND r.status <> 'held'

-- name: stats_dead_letters
-- messages_by_expiry (status, expires_at): the dead letters' range of it.
SELECT count(*) FROM parkway.messages WHERE status = 'expired'

-- name: claim_served
-- claim_due's filter for a worker that serves some workflows and versions: only
-- runs whose key (workflow, chr(31), version: see parkway.store.fleet.run_key)
-- is among those it serves. Written into claim_due before its ORDER BY.
      AND r.workflow || chr(31) || r.version = ANY(%(serves)s::text[])

-- name: claimed_columns
-- The end of both claims (claim_due, lease_run): what advancing each leased run
-- needs, a row per run (its tasks, journal and mailbox as arrays of columns),
-- and how many places the claim took (``found``). Each array_agg unordered: with
-- an ORDER BY each sorted its input on its own (16 sorts a run); the client puts
-- the rows in order. The mailbox only where the load hands it over (see
-- reads_mailbox). Then claimed_from or lease_from, and claimed_loads.
SELECT c.id, c.workflow, c.version, c.status, c.input, c.output, c.error, c.domain,
       c.subject, c.parent_id, c.trigger, c.generation, c.created_at, c.updated_at,
       c.lease_owner, c.lease_until, c.advanced_by,
       t.ids, t.due_ats, t.kinds, t.poss, t.payloads,
       j.poss, j.kinds, j.names, j.states, j."values", j.deadlines, j.ats, j.branches, j.seqs,
       m.ids, m.names, m.payloads, m.ats,
       (SELECT count(*) FROM due) AS found

-- name: claim_takeovers
-- claim_due's last column, after claimed_columns: how many of the runs it leased it
-- took over from a lease that had expired (see StoreStats.takeovers).
       , (SELECT count(DISTINCT id) FROM due WHERE taken) AS takeovers

-- name: claimed_from
-- claim_due's rows: one per run it leased.
FROM claimed AS c

-- name: lease_from
-- lease_run's row: always one, its run's columns null when it leased nothing;
-- and its last column, the notification that a quiet signal or delivery just
-- before it left in parkway.note, sent only if the run was not leased. Leased
-- to this process's worker, no other process need hear of the task: it would
-- claim, and find the run leased.
       , (SELECT pg_notify('parkway_tasks', note)
          FROM (SELECT coalesce(current_setting('parkway.note', true), '') AS note) AS n
          WHERE c.id IS NULL AND note <> '') AS noted
FROM (SELECT) AS one LEFT JOIN claimed AS c ON true

-- name: claimed_loads
-- What claimed_columns reads of each leased run.
LEFT JOIN LATERAL (
    SELECT array_agg(id) AS ids, array_agg(due_at) AS due_ats, array_agg(kind) AS kinds,
           array_agg(pos) AS poss, array_agg(payload) AS payloads
    FROM parkway.tasks WHERE run_id = c.id AND due_at <= %(now)s
) AS t ON true
LEFT JOIN LATERAL (
    SELECT array_agg(pos) AS poss, array_agg(kind) AS kinds, array_agg(name) AS names,
           array_agg(state) AS states, array_agg(value) AS "values",
           array_agg(deadline) AS deadlines, array_agg(at) AS ats,
           array_agg(branch) AS branches, array_agg(seq) AS seqs
    FROM parkway.journal WHERE run_id = c.id AND c.status NOT IN ('completed', 'failed', 'cancelled')
      -- (Not the journal of a run this worker's advance parked last: it may hold
      -- the run's machine. See parkway.worker.cache.)
      AND c.advanced_by IS DISTINCT FROM %(owner)s
) AS j ON true
LEFT JOIN LATERAL (
    SELECT array_agg(id) AS ids, array_agg(name) AS names, array_agg(payload) AS payloads,
           array_agg(at) AS ats
    FROM parkway.mailbox WHERE run_id = c.id
      AND c.status NOT IN ('completed', 'failed', 'cancelled') AND 'signal' = ANY(t.kinds)
) AS m ON true

-- name: commit_token
-- FOR SHARE: waits for a transaction still writing the row (one whose connection
-- died mid-commit) to end, then reads what it left.
SELECT commit_token FROM parkway.runs WHERE id = %s FOR SHARE

-- name: extend_leases
-- A row that a commit of the worker's holds locked is skipped: that commit is
-- under way, and the next beat (a third of the lease later) extends it. Waiting
-- for it instead, its rows locked in an order of their own, the heartbeat met the
-- worker's batched commits in deadlocks (each found by the server only after
-- deadlock_timeout, a second, with a batch of commits waiting all that time).
UPDATE parkway.runs SET lease_until = %(until)s WHERE id IN (
    SELECT id FROM parkway.runs WHERE id = ANY(%(ids)s::text[]) AND lease_owner = %(owner)s
    FOR UPDATE SKIP LOCKED)
  AND lease_owner = %(owner)s

-- name: drop_cache_marks
-- Rows another transaction holds locked are skipped, as extend_leases does: the
-- worker's commit that carries this must never wait on (or deadlock with) a
-- sender's delivery to a run it no longer holds; the mark is only a hint.
UPDATE parkway.runs SET advanced_by = NULL WHERE id IN (
    SELECT id FROM parkway.runs WHERE id = ANY(%(ids)s::text[]) AND advanced_by = %(owner)s
    FOR UPDATE SKIP LOCKED)
  AND advanced_by = %(owner)s

-- name: release_leases
UPDATE parkway.runs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = %s

-- name: next_due
SELECT min(due_at) FROM parkway.tasks

-- name: next_due_after
SELECT min(due_at) FROM parkway.tasks WHERE due_at > %s

-- name: has_due
-- (A paused run's tasks wait for its resume, but its deadline; a held run's for its
-- retry: they are not due work.)
SELECT EXISTS (
    SELECT 1 FROM parkway.tasks AS t JOIN parkway.runs AS r ON r.id = t.run_id
    WHERE t.due_at <= %s AND (NOT r.paused OR t.kind = 'deadline') AND r.status <> 'held'
)

-- == events ==

-- name: get_event
SELECT id, name, domain, subject, payload, published_at FROM parkway.events WHERE id = %s

-- name: insert_event
INSERT INTO parkway.events (id, name, domain, subject, payload, published_at)
VALUES (%s, %s, %s, %s, %s, %s)

-- name: insert_new_event
-- (A recent event with this id makes it a duplicate: see record_event.)
INSERT INTO parkway.events (id, name, domain, subject, payload, published_at)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO NOTHING

-- name: delete_event
-- The event, and the runs it was linked to (see parkway.store.fleet).
WITH gone AS (
    DELETE FROM parkway.events WHERE id = %s RETURNING id
), links AS (
    DELETE FROM parkway.event_links WHERE event_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone

-- name: events_since
SELECT id, name, domain, subject, payload, published_at FROM parkway.events
WHERE domain = %s AND name = %s AND published_at >= %s ORDER BY published_at, seq

-- name: prune_events
-- The events published before then, and their links (see parkway.store.fleet).
WITH cut AS (
    SELECT %s::float8 AS before
), links AS (
    DELETE FROM parkway.event_links WHERE at < (SELECT before FROM cut)
)
DELETE FROM parkway.events WHERE published_at < (SELECT before FROM cut)

-- == subscriptions ==

-- name: add_subscription
INSERT INTO parkway.subscriptions
    (run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
     deadline)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (run_id, pos) DO UPDATE SET
    kind = EXCLUDED.kind, domain = EXCLUDED.domain, name = EXCLUDED.name,
    subject = EXCLUDED.subject, shape = EXCLUDED.shape, digest = EXCLUDED.digest,
    match = EXCLUDED.match, wait = EXCLUDED.wait, expires_at = EXCLUDED.expires_at,
    created_at = EXCLUDED.created_at, deadline = EXCLUDED.deadline

-- name: shapes
-- The distinct shapes of (domain, name), one index probe each (a loose index
-- scan over subscriptions_lookup): cost grows with the number of shapes, never
-- with the number of parked runs.
WITH RECURSIVE found (shape) AS (
    (SELECT shape FROM parkway.subscriptions WHERE domain = %s AND name = %s
     ORDER BY shape LIMIT 1)
    UNION ALL
    SELECT (SELECT s.shape FROM parkway.subscriptions AS s
            WHERE s.domain = %s AND s.name = %s AND s.shape > found.shape
            ORDER BY s.shape LIMIT 1)
    FROM found WHERE found.shape IS NOT NULL
)
SELECT shape FROM found WHERE shape IS NOT NULL

-- name: find_subscriptions
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM parkway.subscriptions
WHERE domain = %s AND name = %s AND shape = %s AND digest = %s AND subject IN (%s, '*')
  AND kind = %s
ORDER BY created_at, run_id

-- name: find_subscriptions_locked
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM parkway.subscriptions
WHERE domain = %s AND name = %s AND shape = %s AND digest = %s AND subject IN (%s, '*')
  AND kind = %s
ORDER BY created_at, run_id
FOR UPDATE

-- name: list_subscriptions
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM parkway.subscriptions

-- name: delete_subscription
DELETE FROM parkway.subscriptions WHERE run_id = %s AND pos = %s

-- name: delete_run_subscriptions
DELETE FROM parkway.subscriptions WHERE run_id = %s

-- name: sweep_subscriptions
DELETE FROM parkway.subscriptions WHERE expires_at < %s

-- == messages ==

-- name: message_wait
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM parkway.subscriptions WHERE kind = 'message' AND name = %s AND subject = %s

-- name: message_wait_locked
SELECT run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at, created_at,
       deadline
FROM parkway.subscriptions WHERE kind = 'message' AND name = %s AND subject = %s
FOR UPDATE

-- name: take_message_wait
-- (A wait past its deadline stays: its timeout wins.)
DELETE FROM parkway.subscriptions
WHERE kind = 'message' AND name = %s AND subject = %s AND (deadline IS NULL OR deadline >= %s)
RETURNING run_id, pos, kind, domain, name, subject, shape, digest, match, wait, expires_at,
          created_at, deadline

-- name: deliver_message
-- A message straight to the run waiting for it, in one statement, sent after the
-- locks of its key (and of its message id, if it has one) in the same round trip
-- and with the COMMIT: unless its id was seen fresh, take the wait (one whose
-- deadline passed stays: its timeout wins), add the delivery task, remember the
-- id and announce the task. The result, which the commit mark records too (a
-- commit whose reply was lost still tells it): 'delivered <run id>', 'duplicate'
-- or '' (nobody waits: nothing else was written). The run delivered to is left
-- in parkway.delivered for lease_run, the next statement, to lease; with
-- ``quiet``, that statement notifies instead, only if it did not (see lease_from).
WITH seen AS MATERIALIZED (
    SELECT 1 FROM parkway.message_ids WHERE message_id = %(mid)s AND seen_at >= %(fresh)s
), taken AS (
    DELETE FROM parkway.subscriptions
    WHERE kind = 'message' AND name = %(name)s AND subject = %(key)s
      AND (deadline IS NULL OR deadline >= %(now)s) AND NOT EXISTS (SELECT 1 FROM seen)
    RETURNING run_id, pos
), task AS (
    INSERT INTO parkway.tasks (run_id, due_at, kind, pos, payload)
    SELECT run_id, %(now)s, 'message', pos, %(body)s FROM taken
    RETURNING run_id
), remembered AS (
    INSERT INTO parkway.message_ids (message_id, seen_at)
    SELECT %(mid)s, %(now)s FROM taken WHERE %(mid)s::text IS NOT NULL
    ON CONFLICT (message_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
), outcome AS (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM seen) THEN 'duplicate'
                ELSE coalesce('delivered ' || (SELECT run_id FROM task), '') END AS result
), marked AS (
    INSERT INTO parkway.commit_marks (mark, result) SELECT %(mark)s, result FROM outcome
)
SELECT result,
       (SELECT pg_notify('parkway_tasks', %(token)s) FROM task WHERE NOT %(quiet)s),
       set_config('parkway.delivered', coalesce((SELECT run_id FROM task), ''), true),
       set_config('parkway.note', coalesce((SELECT %(token)s::text FROM task WHERE %(quiet)s), ''), true)
FROM outcome

-- name: deliver_event
-- A publish that only resumes waits, in one statement after the shared lock of
-- its (domain, name) (see insert_event) and with the COMMIT: the shapes of the
-- name's waits checked against those the caller knows ("known", a JSON array:
-- a text parameter costs the client less than a text[] one; it sends a digest
-- for each one the payload has every key of); then, unless its id is taken, the event's insert, and for
-- each wait found under those digests that the match rule accepts (the JSON
-- equality of each key's value, as jsonb equality is), whose deadline and expiry
-- have not passed, its removal and delivery task. The result, which the commit
-- mark records too: 'published <JSON array of [run id, wait]>', 'duplicate', or
-- 'declined' (a shape the caller did not know, or an id taken by an event past
-- retention or by a publish not yet visible: nothing else was written). The
-- first run delivered to is left in parkway.delivered for lease_run; with
-- ``quiet``, when it is the only one, that statement notifies instead, only if
-- it did not lease it (see lease_from).
-- Followed by a deliver_event_lookup for each shape, the union of their
-- removals (taken) and deliver_event_end.
WITH RECURSIVE shapes (shape) AS (
    (SELECT shape FROM parkway.subscriptions WHERE domain = %(domain)s AND name = %(name)s
     ORDER BY shape LIMIT 1)
    UNION ALL
    SELECT (SELECT s.shape FROM parkway.subscriptions AS s
            WHERE s.domain = %(domain)s AND s.name = %(name)s AND s.shape > shapes.shape
            ORDER BY s.shape LIMIT 1)
    FROM shapes WHERE shapes.shape IS NOT NULL
), known AS MATERIALIZED (
    -- (Declined too when the event meets cancel_on conditions: the usual path
    -- takes those; one probe of the index by their own name, see core.cancel_on.)
    SELECT NOT EXISTS (
        SELECT 1 FROM shapes WHERE shape IS NOT NULL
          AND shape NOT IN (SELECT jsonb_array_elements_text(%(known)s::jsonb))
    ) AND NOT EXISTS (
        SELECT 1 FROM parkway.subscriptions WHERE domain = %(domain)s AND name = %(cancels)s
    ) AS ok
), inserted AS (
    INSERT INTO parkway.events (id, name, domain, subject, payload, published_at)
    SELECT %(id)s, %(name)s, %(domain)s, %(subject)s, %(payload)s, %(now)s
    WHERE (SELECT ok FROM known)
    ON CONFLICT (id) DO NOTHING
    RETURNING 1
)

-- name: deliver_event_lookup
-- deliver_event's removal of the waits under one shape's digest, the n-th shape
-- ({n}, written in when statements.py builds the statement for each number of
-- shapes: the statement's text has one of these per shape), after
-- deliver_event: every key of the index an equality, so that any plan is the
-- index probe. The DELETE is the row lock: a wait another publish took
-- meanwhile is skipped once that one commits, and only waits removed here get
-- a task. Then the removals' union (taken), and deliver_event_end.
, taken_{n} AS (
    DELETE FROM parkway.subscriptions AS s
    WHERE s.domain = %(domain)s AND s.name = %(name)s AND s.shape = %(shape{n})s
      AND s.digest = %(digest{n})s AND s.subject IN (%(subject_or_any)s, '*')
      AND s.kind = 'event' AND EXISTS (SELECT 1 FROM inserted)
      AND s.expires_at >= %(now)s AND (s.deadline IS NULL OR s.deadline >= %(now)s)
      AND NOT EXISTS (
          SELECT 1 FROM jsonb_each(convert_from(s.match, 'UTF8')::jsonb) AS m
          WHERE convert_from(%(payload)s, 'UTF8')::jsonb -> m.key IS DISTINCT FROM m.value
      )
    -- (The label a subscription kept, or the usual one: see SubscriptionRecord.)
    RETURNING s.run_id, s.pos, coalesce(s.wait, 'wait_for_' || s.kind || ':' || s.name || '#' || s.pos) AS wait,
              {n} AS ord, s.created_at
)

-- name: deliver_event_nothing_taken
-- The removals' union of deliver_event with no shape to look under: nothing.
SELECT NULL::text AS run_id, NULL::int4 AS pos, NULL::text AS wait, 0 AS ord,
       NULL::float8 AS created_at WHERE false

-- name: deliver_event_end
-- The end of deliver_event, after the removals' union (taken).
, task AS (
    INSERT INTO parkway.tasks (run_id, due_at, kind, pos, payload)
    SELECT run_id, %(now)s, 'delivery', pos, %(envelope)s FROM taken
    ORDER BY ord, created_at, run_id
    RETURNING run_id
), outcome AS (
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM inserted) THEN 'published ' || coalesce(
            (SELECT json_agg(json_build_array(run_id, wait) ORDER BY ord, created_at, run_id)
             FROM taken)::text, '[]')
        WHEN (SELECT ok FROM known) AND EXISTS (
            SELECT 1 FROM parkway.events WHERE id = %(id)s AND published_at >= %(fresh)s
        ) THEN 'duplicate'
        ELSE 'declined' END AS result
), marked AS (
    INSERT INTO parkway.commit_marks (mark, result) SELECT %(mark)s, result FROM outcome
), linked AS (
    -- (The runs the event resumed: see parkway.store.fleet.)
    INSERT INTO parkway.event_links (event_id, how, run_id, at)
    SELECT %(id)s, 'resumed', run_id, %(now)s FROM taken ORDER BY ord, created_at, run_id
)
SELECT result,
       (SELECT pg_notify('parkway_tasks', %(token)s) FROM (SELECT count(*) AS n FROM task) AS t
        WHERE t.n > 1 OR (t.n = 1 AND NOT %(quiet)s)),
       set_config('parkway.delivered', coalesce(
           (SELECT run_id FROM taken ORDER BY ord, created_at, run_id LIMIT 1), ''), true),
       set_config('parkway.note', coalesce(
           (SELECT %(token)s::text FROM (SELECT count(*) AS n FROM task) AS t
            WHERE t.n = 1 AND %(quiet)s), ''), true)
FROM outcome

-- name: add_message
INSERT INTO parkway.messages
    (name, key, payload, message_id, status, reason, received_at, expires_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
RETURNING id

-- name: oldest_message
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM parkway.messages
WHERE name = %s AND key = %s AND status = 'buffered' AND expires_at > %s
ORDER BY id LIMIT 1

-- name: oldest_message_locked
-- A plain (waiting) lock, not SKIP LOCKED: skipping would hand the next
-- message to this consumer while an older one is still being consumed, or
-- none at all, and break oldest-first.
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM parkway.messages
WHERE name = %s AND key = %s AND status = 'buffered' AND expires_at > %s
ORDER BY id LIMIT 1
FOR UPDATE

-- name: get_message
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM parkway.messages WHERE id = %s

-- name: get_message_locked
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM parkway.messages WHERE id = %s FOR UPDATE

-- name: list_messages
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM parkway.messages ORDER BY id

-- name: list_messages_by_status
SELECT id, name, key, payload, message_id, status, reason, received_at, expires_at
FROM parkway.messages WHERE status = %s ORDER BY id

-- name: delete_message
DELETE FROM parkway.messages WHERE id = %s

-- name: update_message
UPDATE parkway.messages SET status = %s, reason = %s, expires_at = %s WHERE id = %s

-- name: expire_messages
UPDATE parkway.messages SET status = 'expired', reason = %s
WHERE status = 'buffered' AND expires_at <= %s
RETURNING id, name, key, payload, message_id, status, reason, received_at, expires_at

-- name: message_id_seen
SELECT seen_at FROM parkway.message_ids WHERE message_id = %s

-- name: remember_message_id
INSERT INTO parkway.message_ids (message_id, seen_at) VALUES (%s, %s)
ON CONFLICT (message_id) DO UPDATE SET seen_at = EXCLUDED.seen_at

-- name: prune_message_ids
DELETE FROM parkway.message_ids WHERE seen_at < %s

-- == values and updates ==

-- name: put_values
INSERT INTO parkway.run_values (run_id, key, value, updated_at)
SELECT %s::text, k, v, %s::float8 FROM unnest(%s::text[], %s::bytea[]) AS u (k, v)
ON CONFLICT (run_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at

-- name: run_values
SELECT run_id, key, value FROM parkway.run_values WHERE run_id = ANY(%s::text[])
ORDER BY run_id, key

-- name: add_attempts
INSERT INTO parkway.step_attempts (run_id, pos, step, attempt, error, started_at, ended_at)
SELECT * FROM unnest(%s::text[], %s::int4[], %s::text[], %s::int4[], %s::bytea[],
                     %s::float8[], %s::float8[])
ON CONFLICT (run_id, pos, attempt) DO NOTHING

-- name: attempts
SELECT run_id, pos, step, attempt, error, started_at, ended_at
FROM parkway.step_attempts WHERE run_id = %s ORDER BY pos, attempt

-- name: add_update
INSERT INTO parkway.updates (run_id, id, name, payload, status, result, created_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (run_id, id) DO NOTHING
RETURNING seq

-- name: get_update
SELECT run_id, id, name, payload, status, result, created_at, finished_at, seq
FROM parkway.updates WHERE run_id = %s AND id = %s

-- name: pending_updates
SELECT run_id, id, name, payload, status, result, created_at, finished_at, seq
FROM parkway.updates WHERE run_id = %s AND status = 'pending' ORDER BY seq

-- name: finish_update
UPDATE parkway.updates SET status = %s, result = %s, finished_at = %s
WHERE run_id = %s AND id = %s

-- name: streams_ended
-- A run's end, for the readers of its streams in other processes (see streams.sql):
-- a notification if the run has streams, sent once however many (PostgreSQL folds
-- a transaction's equal notifications into one). Data-modifying (its UPDATE changes
-- nothing) so that, fused into the run's last commit as a part of its WITH, it
-- runs; most runs have no stream: an index probe, nothing written.
UPDATE parkway.stream_heads SET closed = closed
WHERE run_id = %s AND pg_notify('parkway_streams', %s)::text = ''
