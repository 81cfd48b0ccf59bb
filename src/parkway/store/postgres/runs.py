"""A PostgreSQL transaction's operations on runs and their leases.

The lease a sender's transaction takes for this process's worker (a signal, a
delivery, a start, then the run leased in the same commit) is here too: it is
what the other operations hand their run to, and it may take over the
notification or the insert of the write queued just before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from parkway.store.base import RUN_MUTABLE, Lease, LoadedRun, RunRecord
from parkway.store.postgres.rows import leased_run, run_row, started_run
from parkway.store.postgres.statements import LEASE_RUN, Q, listing, subject_lock, update_run
from parkway.store.postgres.transport import Transport
from parkway.store.postgres.wire import Result
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
    """start_run's parameters: the run's columns, its start task's due time and
    payload, and the notification (None: none); with ``lease`` (owner, until), the
    run inserted leased to that owner, running."""
    return (*run_row(run, lease), due_at, payload, note)


class RunOps(Transport):
    """Runs: read, insert, start, update, lease, list."""

    # The start_run queued last (the run, its due time and the statement's
    # parameters), which lease_run may turn into a leased insert, and the
    # send_signal (its run and parameters), whose notification it may take over.
    # (None until set: class defaults, so that a transaction costs no __init__ here.)
    _started: tuple[RunRecord, float, bytes | None, tuple[Any, ...]] | None = None
    _signal: tuple[str, dict[str, Any]] | None = None

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self._one(Q["get_run" if self._ro else "get_run_locked"], (run_id,))
        return RunRecord(*row) if row else None

    async def insert_run(self, run: RunRecord) -> None:
        await self._write(Q["insert_run"], run_row(run))

    async def start_run(
        self, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
    ) -> None:
        params = start_params(run, due_at, task_payload, self._announce(due_at))
        await self._write(Q["start_run"], params, idempotent=True)
        self._task_runs.add(run.id)
        self._started = (run, due_at, task_payload, params)

    async def update_run(
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
        return (await self._exec(query, params)).rowcount == 1

    async def update_leased(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
    ) -> None:
        if not set(changes) <= RUN_MUTABLE:
            raise ValueError(f"not updatable: {set(changes) - RUN_MUTABLE}")
        if self._ro:
            raise ValueError("update_leased in a read-only transaction")
        await self._write_fenced(run_id, changes, owner=owner, release=release)

    def _took(self, lease: Lease, loaded: LoadedRun | None) -> None:
        """What a lease's claim returned, once its statement's result has come."""
        lease.loaded = loaded
        # Sent again after a lost connection, it finds the lease taken (by the
        # first send, maybe): then whether it is is not known (the worker looks).
        lease.taken = loaded is not None or (None if self._resent else False)
        if loaded is not None:
            self._leased.add(loaded.run.id)

    async def drop_cache_marks(self, run_ids: Sequence[str], owner: str) -> None:
        if run_ids:  # queued: it rides with the worker's commit (see drop_cache_marks)
            await self._write(
                Q["drop_cache_marks"], dict(ids=list(run_ids), owner=owner), idempotent=True
            )

    async def lease_run(
        self, run_id: str, *, owner: str, now: float, wall_now: float, lease_until: float
    ) -> Lease:
        lease = Lease(run_id)

        def taken(loaded: LoadedRun | None) -> None:
            self._took(lease, loaded)

        # The signal just queued leaves its notification to this lease, which sends
        # it only if it does not lease the run (see lease_from).
        signal = self._signal
        if signal is not None and signal[0] == run_id and self._last_params() is signal[1]:
            signal[1]["quiet"] = True
        started = self._started
        if started is not None and started[0].id == run_id and self._last_params() is started[3]:
            # The run this transaction starts (its start_run is the last write): that
            # statement inserts it leased instead, with no notification (no one
            # else need hear of it), and returns it with its start task.
            run, due_at, payload, _ = started
            params = start_params(run, due_at, payload, None, lease=(owner, lease_until))
            self._queued[-1] = step = (Q["start_run"], params)
            self._started = (run, due_at, payload, params)

            def inserted(result: Result) -> None:
                taken(started_run(result.rows[0]) if result.rows else None)

            self._on_result.append((step, inserted))
            return lease
        # Queued: it rides with the commit, and the lease is known when that returns.
        await self._write(
            LEASE_RUN,
            dict(run=run_id, owner=owner, now=now, wall=wall_now, until=lease_until),
            on_result=lambda result: taken(leased_run(result, owner)),
            idempotent=True,
        )
        return lease

    async def _deliver(
        self,
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
        """Queue a delivery statement (deliver_message, deliver_event) after ``lock``:
        ``found`` gets its one-column result, or what its commit mark recorded; with
        ``owner``, the lease of the run it delivered to (left in ``parkway.delivered``)
        after it, whose run is filled in once that is known; that lease then sends
        the delivery's notification, only if it leases nothing (``quiet``, see
        lease_from)."""
        params["quiet"] = owner is not None
        await self._write(
            query, params, lock=lock, shared=shared,
            on_result=lambda result: found(str(result.rows[0][0]) if result.rows else None),
        )  # fmt: skip
        await self._mark(params, found)
        if owner is None:
            return None
        lease = Lease("")

        def took(result: Result) -> None:
            self._took(lease, leased_run(result, owner))

        await self._write(
            LEASE_RUN, dict(run=None, owner=owner, now=now, wall=wall_now, until=lease_until),
            on_result=took, idempotent=True,
        )  # fmt: skip
        return lease

    async def list_runs(
        self,
        *,
        workflow: str | None,
        status: str | None,
        subject: str | None,
        domain: str | None,
        parent_id: str | None,
        limit: int,
        search: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        before: str | None = None,
    ) -> list[RunRecord]:
        given = (
            ("workflow", workflow),
            ("status", status),
            ("subject", subject),
            ("domain", domain),
            ("parent_id", parent_id),
        )
        columns = tuple(column for column, value in given if value is not None)
        params: list[Any] = [value for _, value in given if value is not None]
        # Internal runs are listed only by their own name.
        extra, more = run_conditions(search, created_after, created_before, before)
        query = listing(
            "list_runs", columns, RUNS_ORDER, hide_internal=workflow is None, extra=extra
        )
        if workflow is None:
            params.append("parkway.%")
        rows = await self._all(query, (*params, *more, limit))
        return [RunRecord(*row) for row in rows]

    async def run_counts(self) -> list[tuple[str, str, int]]:
        return [(w, s, n) for w, s, n in await self._all(Q["run_counts"], ("parkway.%",))]

    async def find_runs(
        self,
        *,
        statuses: Sequence[str],
        workflow: str | None,
        subject: str | None,
        created_before: float | None,
        after: str | None,
        limit: int,
    ) -> list[RunRecord]:
        params = dict(
            statuses=list(statuses), workflow=workflow, subject=subject,
            before=created_before, after=after, limit=limit,
        )  # fmt: skip
        return [RunRecord(*row) for row in await self._all(Q["find_runs"], params)]

    async def expired_runs(
        self, before: float, *, workflow: str | None, exclude: Sequence[str], limit: int
    ) -> list[str]:
        if workflow is not None:
            rows = await self._all(Q["expired_runs_of"], (before, workflow, limit))
        else:
            rows = await self._all(Q["expired_runs_except"], (before, list(exclude), limit))
        return [row[0] for row in rows]

    async def delete_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            await self._exec(Q["delete_runs"], dict(ids=list(run_ids)))

    async def active_run(self, workflow: str, domain: str, subject: str | None) -> str | None:
        lock = None if self._ro else subject_lock(domain, subject)
        if subject is None:
            row = await self._one(Q["active_run_no_subject"], (workflow, domain), lock=lock)
        else:
            row = await self._one(Q["active_run"], (workflow, domain, subject), lock=lock)
        return row[0] if row else None
