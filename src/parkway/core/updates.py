"""Updates and values: what callers ask of a run and get back, and what it publishes.

An update is recorded with the run's task in one transaction; the worker that
advances the run handles it when the run is quiet (see
:mod:`parkway.replay.updates`) and records the answer with the journal, in one
commit. So an accepted update is applied exactly once, and a caller that asks
again with the same id (after a crash, say) gets that same answer. Callers in
this process are woken by the commit; others read again, more slowly each time
(see :mod:`parkway.core.polling`), as ``result()`` does.
"""

from __future__ import annotations

import time
from typing import Any

from parkway import _json
from parkway.core import operators
from parkway.core.polling import Polls
from parkway.core.runtime import Runtime
from parkway.errors import (
    ResultTimeoutError,
    RunClosedError,
    RunNotFoundError,
    UpdateFailedError,
    UpdateRejectedError,
)
from parkway.models import ErrorInfo
from parkway.store.base import ENDED, NewTask, UpdateRecord
from parkway.store.records import UPDATE_PENDING
from parkway.store.vocabulary import TaskKind, UpdateStatus


async def update(
    rt: Runtime,
    run_id: str,
    name: str,
    payload: bytes,
    update_id: str,
    timeout: float,
    by: str | None = None,
) -> Any:
    """Send update ``name`` to the run and wait for its answer (see ``Engine.update``);
    ``by``: who sent it (see :mod:`parkway.core.operators`)."""
    now = rt.now()
    record = UpdateRecord(run_id, update_id, name, payload, UPDATE_PENDING, None, now)
    async with rt.store.transaction() as tx:
        run = await tx.runs.get(run_id)
        if run is None:
            raise RunNotFoundError(run_id)
        existing = await tx.updates.add(record)
        if existing is None:
            if run.status in ENDED:
                # (Raised inside the transaction: the update is not kept.)
                raise RunClosedError(run_id, run.status, f"update {name!r}")
            await tx.tasks.add(
                [NewTask(run_id, now, TaskKind.UPDATE, payload=rt.telemetry.task_payload())]
            )
    if existing is None:
        rt.after_commit()
    try:
        result = await answer(rt, run_id, update_id, timeout)
    except UpdateFailedError:  # (taken and journaled: its handler raised)
        if existing is None:
            await _recorded(rt, run_id, by)
        raise
    if existing is None:
        await _recorded(rt, run_id, by)
    return result


async def _recorded(rt: Runtime, run_id: str, by: str | None) -> None:
    """The operator entry of an update the run took (one it refused, or sent again
    with the same id, records none: it changed nothing)."""
    async with rt.store.transaction() as tx:
        await operators.record(rt, tx, run_id, "update", by)


async def answer(rt: Runtime, run_id: str, update_id: str, timeout: float) -> Any:
    """The answer to update ``update_id``, once the run has given it."""
    deadline = time.monotonic() + timeout
    polls = Polls(rt.store)
    while True:
        async with rt.store.transaction(readonly=True) as tx:
            # The run first: where each statement reads its own snapshot (PostgreSQL's
            # READ COMMITTED), an update read after a run that ended is final.
            run = await tx.runs.get(run_id)
            found = await tx.updates.get(run_id, update_id)
        if found is None or run is None:
            raise RunNotFoundError(run_id)
        if found.status != UPDATE_PENDING:
            return _answered(found)
        if run.status in ENDED:  # it ended before it was quiet: nobody will answer
            raise RunClosedError(run_id, run.status, f"update {found.name!r}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ResultTimeoutError(run_id, timeout)
        await rt.results.wait(run_id, polls.next(remaining))


def _answered(found: UpdateRecord) -> Any:
    value = _json.loads(found.result)
    if found.status == UpdateStatus.DONE:
        return value
    if found.status == UpdateStatus.REJECTED:
        raise UpdateRejectedError(found.run_id, found.name, str(value))
    if found.status == UpdateStatus.FAILED:
        raise UpdateFailedError(found.run_id, found.name, ErrorInfo.from_dict(value))
    raise RunClosedError(found.run_id, found.status, f"update {found.name!r}")


async def values(rt: Runtime, run_id: str) -> dict[str, Any]:
    """The run's values, by key."""
    async with rt.store.transaction(readonly=True) as tx:
        if await tx.runs.get(run_id) is None:
            raise RunNotFoundError(run_id)
        found = await tx.values.of_runs([run_id])
    return {k: _json.loads(v) for k, v in found.get(run_id, {}).items()}


async def value(rt: Runtime, run_id: str, key: str, timeout: float) -> Any:
    """The run's value ``key``, waiting up to ``timeout`` seconds for it to be set
    (``None`` if it was not)."""
    deadline = time.monotonic() + timeout
    polls = Polls(rt.store)
    while True:
        found = await values(rt, run_id)
        if key in found:
            return found[key]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        await rt.results.wait(run_id, polls.next(remaining))
