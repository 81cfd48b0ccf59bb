"""The in-process fast path: a run this process gives a task goes straight to its worker.

A sender (publish, correlate, signal, start) whose process runs a worker with a
free place leases the run it gives a task to, in that same transaction; once
the transaction has committed, the worker advances the run with what came
back with the lease, with no claim (a round trip and a commit on PostgreSQL).
Without a worker, or a free place in it, the run is left to a claim.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from parkway.core.runtime import Runtime
from parkway.store.base import Lease, Tx


class HandOver:
    """One run handed to this process's worker (see :func:`handing_over`)."""

    def __init__(self, rt: Runtime, owner: str | None) -> None:
        self.rt, self.owner = rt, owner
        self.lease: Lease | None = None

    async def __call__(self, tx: Tx, run_id: str) -> None:
        """Lease ``run_id`` to this process's worker in ``tx`` (once, if there is a place)."""
        terms = self.terms()
        if terms:
            self.took(await tx.runs.lease(run_id, now=self.rt.now(), **terms))

    def terms(self) -> dict[str, Any]:
        """The lease's terms (owner, wall_now, lease_until); none once it was used,
        or without a free place in the worker."""
        if self.owner is None or self.lease is not None:
            return {}
        wall = time.time()
        return {"owner": self.owner, "wall_now": wall, "lease_until": wall + self.rt.settings.lease}

    def took(self, lease: Lease | None) -> None:
        if lease is not None:
            self.lease = lease

    @property
    def handed(self) -> bool:
        """The run was leased to this process's worker: a task the transaction gave
        it only, it needs no claim, and no poke of the claim loop (which would look
        for work, find the task's run leased, and claim nothing)."""
        return self.lease is not None and self.lease.taken is True

    def forget(self) -> None:
        """The lease taken was for nothing (the operation found no run): unused again."""
        self.lease = None


@contextlib.contextmanager
def handing_over(rt: Runtime) -> Iterator[HandOver]:
    """Yields ``hand_over``: ``await hand_over(tx, run_id)`` inside the transaction,
    for (at most) one run; or, for a store operation that leases the run it finds
    (``deliver_message``), ``hand_over.terms()`` as its arguments and
    ``hand_over.took(lease)`` with what it got. The run is handed over once the
    block has exited (the transaction committed).
    """
    worker = rt.worker
    hand_over = HandOver(rt, worker.reserve() if worker is not None else None)
    try:
        yield hand_over
    except BaseException:
        if hand_over.lease is not None:
            # Rolled back, most likely; but a commit cut off may have gone
            # through. The worker loads the run and sees whose lease it is
            # (unless which run it was is not known: then its lease expires).
            run_id = hand_over.lease.run_id
            hand_over.lease = Lease(run_id) if run_id else None
        raise
    finally:
        if worker is not None and hand_over.owner is not None:
            worker.adopt(hand_over.lease)
