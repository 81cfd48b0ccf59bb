"""Signals: a payload addressed to one run by id, kept in its mailbox until consumed.

One path for both client operations: :func:`signal` buffers the signal with
its task in one store operation (``tx.signals.send``, which refuses a missing or
ended run); ``signal_with_start`` is the same, after inserting the run in the
same transaction if it does not exist, so the signal is never lost to a race
with the start.
"""

from __future__ import annotations

from parkway.core.conflicts import again_on_conflict
from parkway.core.handover import handing_over
from parkway.core.runs import insert_run
from parkway.core.runtime import Runtime
from parkway.errors import RunClosedError, RunNotFoundError, StoreError
from parkway.store.base import ENDED, Sent


async def signal(
    rt: Runtime,
    run_id: str,
    name: str,
    data: bytes,
    *,
    start: tuple[str, str, bytes] | None = None,
    priority: int | None = None,
) -> None:
    """Send signal ``name`` (``data``: its payload, encoded) to run ``run_id``.

    ``start``: the workflow name, version and encoded input of
    ``signal_with_start``: the run is inserted first, in the same transaction, if
    no run has that id (``priority``: its place if its workflow queues it).

    Raises:
        RunNotFoundError: No run has that id (and none was to be started).
        RunClosedError: The run has finished.
    """
    sent, handed = await again_on_conflict(lambda: _send(rt, run_id, name, data, start, priority))
    if not sent.known:
        raise StoreError(f"signal {name!r} to {run_id!r}: the store did not say what it found")
    if sent.status is None:
        raise RunNotFoundError(run_id)
    if sent.status in ENDED:
        raise RunClosedError(run_id, sent.status, f"signal {name!r}")
    if not handed:
        rt.after_commit()


async def _send(
    rt: Runtime,
    run_id: str,
    name: str,
    data: bytes,
    start: tuple[str, str, bytes] | None,
    priority: int | None,
) -> tuple[Sent, bool]:
    with handing_over(rt) as hand_over:
        async with rt.store.transaction() as tx:
            startable = True
            if start is not None and await tx.runs.get(run_id) is None:
                workflow, version, input_data = start
                startable = await insert_run(
                    rt, tx, workflow, version, run_id, input_data, priority=priority
                )
            sent = await tx.signals.send(
                run_id, name, data, rt.now(), task_payload=rt.telemetry.task_payload()
            )
            # Unless known refused: a store may learn what the signal found only
            # at commit, and the lease it rides with is only taken for a live run.
            # (Not a run its limit queues: its worker would only put it back.)
            live = not sent.known or (sent.status is not None and sent.status not in ENDED)
            if live and startable:
                await hand_over(tx, run_id)
    # Whether its one task went with the run to this worker (a start's insert may
    # have given others tasks: its admission's cancel_oldest).
    return sent, hand_over.handed and start is None
