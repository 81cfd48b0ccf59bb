"""A transaction's runs: their rows, leases and listings (``tx.runs``)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from parkway.store.records import (
    Lease,
    RunRecord,
)

# Columns of ``runs`` that ``Runs.update`` may change.
RUN_MUTABLE = frozenset(
    {
        "status",
        "input",
        "output",
        "error",
        "generation",
        "updated_at",
        "workflow",
        "version",
        "advanced_by",
        "paused",
        "forked_from",
        "forked_at",
    }
)


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs ``Runs.list`` returns, newest first (``created_at`` then ``id``,
    both descending); without ``workflow``, internal runs (``parkway.*``) are left out.

    ``search``: only runs whose id or subject starts with it (case-sensitive).
    ``created_after`` / ``created_before``: ``created_after <= created_at <
    created_before``. ``before``: a run id, the keyset cursor of the previous
    page; only runs after it in this order (none if no run has that id).
    """

    workflow: str | None = None
    status: str | None = None
    subject: str | None = None
    domain: str | None = None
    parent_id: str | None = None
    limit: int = 100
    search: str | None = None
    created_after: float | None = None
    created_before: float | None = None
    before: str | None = None


@dataclass(frozen=True, slots=True)
class RunSelection:
    """A bulk operation's next batch for ``Runs.find``: runs in one of ``statuses``
    matching the filters given, by id, those after ``after`` (an id) only. Without
    ``workflow``, internal runs (``parkway.*``) are left out."""

    statuses: Sequence[str]
    workflow: str | None = None
    subject: str | None = None
    created_before: float | None = None
    after: str | None = None
    limit: int = 100


class Runs(Protocol):
    """Runs inside one transaction."""

    async def get(self, run_id: str) -> RunRecord | None: ...

    async def insert(self, run: RunRecord) -> None: ...

    async def start(
        self, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
    ) -> None:
        """Insert ``run`` and its start task due at ``due_at``, unless the id exists.

        Idempotent: a second start of the same id changes nothing. ``task_payload``:
        the start task's (the starter's trace context, see :mod:`parkway.core.telemetry`).
        """
        ...

    async def update(
        self,
        run_id: str,
        changes: dict[str, Any],
        *,
        owner: str | None = None,
        release: bool = True,
    ) -> bool:
        """Apply ``changes``; with ``owner``, only while that worker holds the lease.

        With ``owner`` and ``release`` the lease is also dropped. Returns whether
        the row changed (``False`` = the lease was lost: roll back).
        """
        ...

    async def update_leased(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
    ) -> None:
        """``tx.runs.update`` for the worker that leases the run: fenced by the lease.

        Raises :class:`parkway.errors.LeaseLostError` when ``owner`` no longer
        holds the lease, either at once or when the transaction commits (then
        nothing of it is saved). A store that fences at commit need not wait
        for an answer here, so a worker's commit can be a single round trip.
        With ``release`` the lease is dropped.
        """
        ...

    async def drop_cache_marks(self, run_ids: Sequence[str], owner: str) -> None:
        """Clear ``advanced_by`` of those of ``run_ids`` whose row still names ``owner``:
        its worker no longer holds their machines (evicted from its cache), so a
        load for it reads their journals with the rest instead of leaving them out.

        A hint, never waited for: a row another transaction holds locked is
        skipped (a mark left in place costs the load of that run a read of its
        own, as before; a mark cleared too early, a replay).
        """
        ...

    async def lease(
        self, run_id: str, *, owner: str, now: float, wall_now: float, lease_until: float
    ) -> Lease:
        """Lease the run to ``owner``, as a claim would, if no one holds its lease, it
        has not ended and it is neither paused nor held: the worker of the process that gives
        a run a task can
        then advance it without a claim. What it needs (its tasks due at ``now``,
        this transaction's among them) comes with the lease.
        """
        ...

    async def list(self, query: RunFilter) -> builtins.list[RunRecord]:
        """The runs ``query`` selects, in its order (see :class:`RunFilter`)."""
        ...

    async def counts(self) -> builtins.list[tuple[str, str, int]]:
        """``(workflow, status, runs)`` for every pair that has runs, internal runs left
        out, by workflow then status."""
        ...

    async def find(self, query: RunSelection) -> builtins.list[RunRecord]:
        """A bulk operation's next batch (see :class:`RunSelection`)."""
        ...

    async def expired(
        self, before: float, *, workflow: str | None, exclude: Sequence[str], limit: int
    ) -> builtins.list[str]:
        """Ids of runs that ended (``ENDED``) before ``before`` (their ``updated_at``),
        oldest first: of ``workflow``, or (``None``) of any workflow not in ``exclude``."""
        ...

    async def delete(self, run_ids: Sequence[str]) -> None:
        """Delete the runs and everything kept for them: journal, tasks, mailbox,
        subscriptions, values, updates and streams."""
        ...

    async def active(self, workflow: str, domain: str, subject: str | None) -> str | None:
        """The id of an unfinished run of ``workflow`` in this domain and subject, if any."""
        ...

    async def unserved(self, keys: Sequence[str], now: float, limit: int) -> builtins.list[str]:
        """Up to ``limit`` runs (ids, sorted) with a task due at ``now``, not paused,
        whose key (:func:`run_key`) is not among ``keys``: no worker serves them."""
        ...
