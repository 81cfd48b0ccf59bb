"""A PostgreSQL transaction's runs and their leases (``tx.runs``).

The lease a sender's transaction takes for this process's worker (a signal, a
delivery, a start, then the run leased in the same commit) is here too: it is
what the other parts hand their run to (:func:`deliver_leased`), and it may take
over the notification or the insert of the write queued just before it.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from parkway.store.postgres.fleet import S as FLEET
from parkway.store.postgres.rows import leased_run, run_row, started_run
from parkway.store.postgres.statements import LEASE_RUN, Q, listing, subject_lock, update_run
from parkway.store.postgres.transport import Part, Transport
from parkway.store.postgres.wire import Result
from parkway.store.records import Lease, LoadedRun, RunRecord
from parkway.store.runs import RUN_MUTABLE, RunFilter, RunSelection
from parkway.store.sqltext import run_conditions

RUNS_ORDER = "ORDER BY created_at DESC, id DESC LIMIT %s"


def start_params(
    run: RunRecord,
    due_at: float,
    payload: bytes | None,
    note: str | None,
    *,
    lease: tuple[str, float] | None = None,
) -> tuple[Any, ...]:
    """runs.start's parameters: the run's columns, its start task's due time and
    payload, and the notification (None: none); with ``lease`` (owner, until), the
    run inserted leased to that owner, running."""
    return (*run_row(run, lease), due_at, payload, note)


def took(t: Transport, lease: Lease, loaded: LoadedRun | None) -> None:
    """What a lease's claim returned, once its statement's result has come."""
    lease.loaded = loaded
    # Sent again after a lost connection, it finds the lease taken (by the
    # first send, maybe): then whether it is is not known (the worker looks).
    lease.taken = loaded is not None or (None if t._resent else False)
    if loaded is not None:
        t._leased.add(loaded.run.id)


async def deliver_leased(
    t: Transport,
    query: str,
    params: dict[str, Any],
    found: Callable[[str | None], None],
    *,
    lock: int,
    shared: bool = False,
    owner: str | None,
    now: float,
    wall_now: float,
    lease_until: float,
) -> Lease | None:
    """Queue a delivery statement (messages.deliver, events.deliver) after ``lock``:
    ``found`` gets its one-column result, or what its commit mark recorded; with
    ``owner``, the lease of the run it delivered to (left in ``parkway.delivered``)
    after it, whose run is filled in once that is known; that lease then sends
    the delivery's notification, only if it leases nothing (``quiet``, see
    lease_from)."""
    params["quiet"] = owner is not None
    await t._write(
        query,
        params,
        lock=lock,
        shared=shared,
        on_result=lambda result: found(str(result.rows[0][0]) if result.rows else None),
    )
    await t._mark(params, found)
    if owner is None:
        return None
    lease = Lease("")

    def leased(result: Result) -> None:
        took(t, lease, leased_run(result, owner))

    await t._write(
        LEASE_RUN,
        dict(run=None, owner=owner, now=now, wall=wall_now, until=lease_until),
        on_result=leased,
        idempotent=True,
    )
    return lease


class PostgresRuns(Part):
    """Runs: read, insert, start, update, lease, list."""

    async def get(self, run_id: str) -> RunRecord | None:
        t = self._t
        row = await t._one(Q["get_run" if t._ro else "get_run_locked"], (run_id,))
        return RunRecord(*row) if row else None

    async def insert(self, run: RunRecord) -> None:
        await self._t._write(Q["insert_run"], run_row(run))

    async def start(
        self, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
    ) -> None:
        t = self._t
        params = start_params(run, due_at, task_payload, t._announce(due_at))
        await t._write(Q["start_run"], params, idempotent=True)
        t._task_runs.add(run.id)
        t._started = (run, due_at, task_payload, params)

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
        params: list[Any] = [*changes.values(), run_id]
        if owner is not None:
            params.append(owner)
        return (await self._t._exec(query, params)).rowcount == 1

    async def update_leased(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
    ) -> None:
        if not set(changes) <= RUN_MUTABLE:
            raise ValueError(f"not updatable: {set(changes) - RUN_MUTABLE}")
        t = self._t
        if t._ro:
            raise ValueError("update_leased in a read-only transaction")
        await t._write_fenced(run_id, changes, owner=owner, release=release)

    async def drop_cache_marks(self, run_ids: Sequence[str], owner: str) -> None:
        if run_ids:  # queued: it rides with the worker's commit (see drop_cache_marks)
            await self._t._write(
                Q["drop_cache_marks"], dict(ids=list(run_ids), owner=owner), idempotent=True
            )

    async def lease(
        self, run_id: str, *, owner: str, now: float, wall_now: float, lease_until: float
    ) -> Lease:
        t = self._t
        lease = Lease(run_id)

        def taken(loaded: LoadedRun | None) -> None:
            took(t, lease, loaded)

        # The signal just queued leaves its notification to this lease, which sends
        # it only if it does not lease the run (see lease_from).
        signal = t._signal
        if signal is not None and signal[0] == run_id and t._last_params() is signal[1]:
            signal[1]["quiet"] = True
        started = t._started
        if started is not None and started[0].id == run_id and t._last_params() is started[3]:
            # The run this transaction starts (its runs.start is the last write): that
            # statement inserts it leased instead, with no notification (no one
            # else need hear of it), and returns it with its start task.
            run, due_at, payload, _ = started
            params = start_params(run, due_at, payload, None, lease=(owner, lease_until))
            t._queued[-1] = step = (Q["start_run"], params)
            t._started = (run, due_at, payload, params)

            def inserted(result: Result) -> None:
                taken(started_run(result.rows[0]) if result.rows else None)

            t._on_result.append((step, inserted))
            return lease
        # Queued: it rides with the commit, and the lease is known when that returns.
        await t._write(
            LEASE_RUN,
            dict(run=run_id, owner=owner, now=now, wall=wall_now, until=lease_until),
            on_result=lambda result: taken(leased_run(result, owner)),
            idempotent=True,
        )
        return lease

    async def list(self, query: RunFilter) -> builtins.list[RunRecord]:
        given = (
            ("workflow", query.workflow),
            ("status", query.status),
            ("subject", query.subject),
            ("domain", query.domain),
            ("parent_id", query.parent_id),
        )
        columns = tuple(column for column, value in given if value is not None)
        params: builtins.list[Any] = [value for _, value in given if value is not None]
        # Internal runs are listed only by their own name.
        extra, more = run_conditions(
            query.search, query.created_after, query.created_before, query.before
        )
        hide = query.workflow is None
        statement = listing("list_runs", columns, RUNS_ORDER, hide_internal=hide, extra=extra)
        if hide:
            params.append("parkway.%")
        rows = await self._t._all(statement, (*params, *more, query.limit))
        return [RunRecord(*row) for row in rows]

    async def counts(self) -> builtins.list[tuple[str, str, int]]:
        return [(w, s, n) for w, s, n in await self._t._all(Q["run_counts"], ("parkway.%",))]

    async def find(self, query: RunSelection) -> builtins.list[RunRecord]:
        params = dict(
            statuses=builtins.list(query.statuses),
            workflow=query.workflow,
            subject=query.subject,
            before=query.created_before,
            after=query.after,
            limit=query.limit,
        )
        return [RunRecord(*row) for row in await self._t._all(Q["find_runs"], params)]

    async def expired(
        self, before: float, *, workflow: str | None, exclude: Sequence[str], limit: int
    ) -> builtins.list[str]:
        t = self._t
        if workflow is not None:
            rows = await t._all(Q["expired_runs_of"], (before, workflow, limit))
        else:
            rows = await t._all(Q["expired_runs_except"], (before, builtins.list(exclude), limit))
        return [row[0] for row in rows]

    async def delete(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            await self._t._exec(Q["delete_runs"], dict(ids=builtins.list(run_ids)))

    async def active(self, workflow: str, domain: str, subject: str | None) -> str | None:
        t = self._t
        lock = None if t._ro else subject_lock(domain, subject)
        if subject is None:
            row = await t._one(Q["active_run_no_subject"], (workflow, domain), lock=lock)
        else:
            row = await t._one(Q["active_run"], (workflow, domain, subject), lock=lock)
        return row[0] if row else None

    async def unserved(self, keys: Sequence[str], now: float, limit: int) -> builtins.list[str]:
        params = dict(keys=builtins.list(keys), now=now, limit=limit)
        return [row[0] for row in await self._t._all(FLEET["unserved_runs"], params)]
