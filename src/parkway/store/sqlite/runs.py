"""A SQLite transaction's runs (``tx.runs``): their rows, leases and listings, and
the loads of the runs a claim leased."""

from __future__ import annotations

import builtins
import json
from collections.abc import Coroutine, Sequence
from typing import Any

import orjson

from parkway.models import RunStatus
from parkway.store import composed
from parkway.store.base import (
    ENDED,
    RUN_MUTABLE,
    JournalEntry,
    Lease,
    LoadedRun,
    NewTask,
    RunRecord,
    SignalRecord,
    TaskRecord,
    holds_journal,
    load_with,
    reads_mailbox,
)
from parkway.store.runs import RunFilter, RunSelection
from parkway.store.sqlite.fleet import S as FLEET
from parkway.store.sqlite.people import S as PEOPLE
from parkway.store.sqlite.statements import INSERT_NEW_RUN, LEASE, Q, listing, update_run
from parkway.store.sqlite.streams import S as STREAMS
from parkway.store.sqlite.transport import Part
from parkway.store.sqltext import run_conditions

RUNS_ORDER = "ORDER BY created_at DESC, id DESC LIMIT ?"

# What deleting runs deletes with them, in order: each a statement for all the runs.
_DELETE_RUNS = (
    *(
        Q[name]
        for name in (
            "delete_run",
            "clear_journal",
            "delete_all_tasks",
            "delete_run_subscriptions",
            "delete_run_signals",
            "delete_run_values",
            "delete_run_updates",
            "delete_run_attempts",
        )
    ),
    PEOPLE["delete_run_callbacks"],
    PEOPLE["delete_run_human_tasks"],
    STREAMS["delete_run_heads"],
    STREAMS["delete_run_items"],
    FLEET["delete_run_operator_entries"],
)


class SQLiteRuns(Part):
    """Runs' statements on the transaction's connection."""

    async def get(self, run_id: str) -> RunRecord | None:
        row = self._c.execute(Q["get_run"], (run_id,)).fetchone()
        return RunRecord(*row) if row else None

    async def insert(self, run: RunRecord) -> None:
        self._c.execute(Q["insert_run"], _run_row(run))
        if run.status == "pending":
            self._t.pending.add(run.id)

    async def start(
        self, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
    ) -> None:
        # One statement where the composed start reads first: an id taken is not inserted.
        if self._c.execute(INSERT_NEW_RUN, _run_row(run)).rowcount == 1:
            if run.status == "pending":
                self._t.pending.add(run.id)
            await self._tx.tasks.add([NewTask(run.id, due_at, "start", payload=task_payload)])

    async def update(
        self,
        run_id: str,
        changes: dict[str, Any],
        *,
        owner: str | None = None,
        release: bool = True,
    ) -> bool:
        if not set(changes) <= RUN_MUTABLE:
            raise ValueError(f"not updatable: {set(changes) - RUN_MUTABLE}")
        query = update_run(tuple(changes), owned=owner is not None, release=release)
        params: builtins.list[Any] = [*changes.values(), run_id]
        if owner is not None:
            params.append(owner)
        return self._c.execute(query, params).rowcount == 1

    def update_leased(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
    ) -> Coroutine[Any, Any, None]:
        # (the composed operation's coroutine itself, not one awaiting it)
        return composed.update_leased(self._tx, run_id, changes, owner=owner, release=release)

    async def drop_cache_marks(self, run_ids: Sequence[str], owner: str) -> None:
        # (No row lock to skip: SQLite's writer holds the whole database.)
        self._c.executemany(Q["drop_cache_mark"], [(run_id, owner) for run_id in run_ids])

    async def lease(
        self, run_id: str, *, owner: str, now: float, wall_now: float, lease_until: float
    ) -> Lease:
        # The statement for the status the run most likely has first, the other if
        # that one found no run to lease (each leases only a run of its status).
        if run_id in self._t.pending:
            queries = ("lease_pending_run", "lease_run")
        else:
            queries = ("lease_run", "lease_pending_run")
        params = (owner, lease_until, run_id, wall_now)
        for query in queries:
            row = self._c.execute(LEASE[query], params).fetchone()
            if row is not None:
                self._t.given.discard(run_id)
                loaded = await load_with(self._tx, RunRecord(*row), now, owner)
                return Lease(run_id, taken=True, loaded=loaded)
        return Lease(run_id, taken=False)

    def load_claimed(
        self, rows: Sequence[Sequence[Any]], now: float, owner: str
    ) -> builtins.list[LoadedRun]:
        """What advancing the runs of a claim's rows (its ``RETURNING``) needs, as
        :func:`~parkway.store.base.load_in` reads it for one run, in a statement for
        each kind of row for all of them: a claim takes up to a worker's free places,
        and three statements a run were most of what loading them cost."""
        conn = self._c
        runs = [RunRecord(*row) for row in rows]
        started = [run for run in runs if run.status == "pending"]
        if started:
            conn.execute(Q["claim_started"], (json.dumps([run.id for run in started]),))
            for run in started:
                run.status = RunStatus.RUNNING
        tasks: dict[str, builtins.list[TaskRecord]] = {run.id: [] for run in runs}
        ids = json.dumps(builtins.list(tasks))
        for row in conn.execute(Q["claimed_tasks"], (ids, now)):
            tasks[row[1]].append(TaskRecord(*row))
        reading = [r.id for r in runs if r.status not in ENDED and not holds_journal(r, owner)]
        journals: dict[str, builtins.list[JournalEntry]] = {run_id: [] for run_id in reading}
        if reading:
            for run_id, *entry in conn.execute(Q["claimed_journals"], (json.dumps(reading),)):
                journals[run_id].append(JournalEntry(*entry))
        mailboxes: dict[str, builtins.list[SignalRecord]] = {
            run.id: [] for run in runs if reads_mailbox(run, tasks[run.id])
        }
        if mailboxes:
            for row in conn.execute(Q["claimed_signals"], (json.dumps(builtins.list(mailboxes)),)):
                mailboxes[row[1]].append(SignalRecord(*row))
        return [
            LoadedRun(
                run,
                tasks[run.id],
                journals.get(run.id, [] if run.status in ENDED else None),
                mailboxes.get(run.id),
            )
            for run in runs
        ]

    async def list(self, query: RunFilter) -> builtins.list[RunRecord]:
        workflow = query.workflow
        given = (
            ("workflow", workflow),
            ("status", query.status),
            ("subject", query.subject),
            ("domain", query.domain),
            ("parent_id", query.parent_id),
        )
        columns = tuple(column for column, value in given if value is not None)
        params = [value for _, value in given if value is not None]
        # Internal runs are listed only by their own name.
        extra, more = run_conditions(
            query.search, query.created_after, query.created_before, query.before
        )
        sql = listing("list_runs", columns, RUNS_ORDER, hide_internal=workflow is None, extra=extra)
        rows = self._c.execute(sql, (*params, *more, query.limit)).fetchall()
        return [RunRecord(*row) for row in rows]

    async def counts(self) -> builtins.list[tuple[str, str, int]]:
        return [(w, s, n) for w, s, n in self._c.execute(Q["run_counts"])]

    async def find(self, query: RunSelection) -> builtins.list[RunRecord]:
        params = (
            json.dumps(builtins.list(query.statuses)),
            query.workflow,
            query.subject,
            query.created_before,
            query.after,
            query.limit,
        )
        return [RunRecord(*row) for row in self._c.execute(Q["find_runs"], params)]

    async def expired(
        self, before: float, *, workflow: str | None, exclude: Sequence[str], limit: int
    ) -> builtins.list[str]:
        if workflow is not None:
            rows = self._c.execute(Q["expired_runs_of"], (before, workflow, limit))
        else:
            params = (before, json.dumps(builtins.list(exclude)), limit)
            rows = self._c.execute(Q["expired_runs_except"], params)
        return [run_id for (run_id,) in rows]

    async def delete(self, run_ids: Sequence[str]) -> None:
        ids = [(run_id,) for run_id in run_ids]
        for statement in _DELETE_RUNS:
            self._c.executemany(statement, ids)

    async def active(self, workflow: str, domain: str, subject: str | None) -> str | None:
        row = self._c.execute(Q["active_run"], (workflow, domain, subject)).fetchone()
        return row[0] if row else None

    async def unserved(self, keys: Sequence[str], now: float, limit: int) -> builtins.list[str]:
        served = orjson.dumps(builtins.list(keys)).decode()
        return [row[0] for row in self._c.execute(FLEET["unserved_runs"], (served, now, limit))]


def _run_row(run: RunRecord) -> tuple[object, ...]:
    return (
        run.id,
        run.workflow,
        run.version,
        run.status,
        run.input,
        run.output,
        run.error,
        run.domain,
        run.subject,
        run.parent_id,
        run.trigger,
        run.generation,
        run.created_at,
        run.updated_at,
        run.lease_owner,
        run.lease_until,
    )
