"""The store's part of the fleet: the workers that serve it, who did what to a run
(operator entries), and which runs each event started and resumed (a part of the
:class:`parkway.store.base.Tx` protocol).

A worker's row says which ``(workflow, version)`` pairs it serves; the worker
renews it with its lease heartbeat, so a row not renewed for a few lease periods
is a worker that died. A claim is given the keys of the pairs its worker serves
(:func:`serve_keys`) and leases only runs whose key is among them. Operator
entries go with their run; event links with their event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

# Between a workflow's name and its version in a claim's keys: a character that
# limits.name refuses in names, so no two pairs make one key.
KEY_SEPARATOR = "\x1f"

# An event link's kinds.
STARTED = "started"
RESUMED = "resumed"


def run_key(workflow: str, version: str) -> str:
    """The key a claim matches a run by (see :func:`serve_keys`)."""
    return f"{workflow}{KEY_SEPARATOR}{version}"


def serve_keys(workflows: Mapping[str, Sequence[str]]) -> list[str]:
    """The keys of the runs a worker serving ``workflows`` (``{name: [versions]}``)
    may claim: each pair's, and each name's with no version (a run started by name,
    whose version the first worker to run it pins: any worker serving the name)."""
    keys = []
    for name, versions in workflows.items():
        keys.append(run_key(name, ""))
        keys += [run_key(name, version) for version in versions]
    return sorted(keys)


def served_by(workers: Iterable[WorkerRecord]) -> frozenset[str]:
    """The keys served by any of ``workers``."""
    keys: set[str] = set()
    for worker in workers:
        keys.update(serve_keys(worker.workflows))
    return frozenset(keys)


@dataclass
class WorkerRecord:
    """One worker's row: who it is and what it serves (``{name: [versions]}``).
    ``started_at``, ``last_seen`` and ``alive_until`` (three of its own lease
    periods after ``last_seen``; 0: it stopped) are wall-clock seconds, as leases
    are."""

    id: str
    host: str
    pid: int
    started_at: float
    last_seen: float
    alive_until: float
    workflows: dict[str, list[str]]


@dataclass
class OperatorRecord:
    """One operator action on a run: ``action`` (``pause``, ``cancel``...), ``by``
    whom (free-form; ``None``: not said), ``at`` engine seconds."""

    run_id: str
    action: str
    by: str | None
    at: float


@dataclass
class EventLink:
    """A run an event started or resumed (``how``: ``started`` or ``resumed``)."""

    event_id: str
    how: str
    run_id: str


class FleetTx(Protocol):
    """Workers, operator entries and event links inside a transaction."""

    async def beat_worker(self, worker: WorkerRecord) -> None:
        """Insert the worker's row, or renew it (all but ``started_at``)."""
        ...

    async def list_workers(self, now: float) -> list[WorkerRecord]:
        """The workers alive at ``now`` (``alive_until`` after it), the longest
        running first."""
        ...

    async def prune_workers(self, now: float) -> int:
        """Forget the workers dead at ``now``; how many."""
        ...

    async def unserved_runs(self, keys: Sequence[str], now: float, limit: int) -> list[str]:
        """Up to ``limit`` runs (ids, sorted) with a task due at ``now``, not paused,
        whose key (:func:`run_key`) is not among ``keys``: no worker serves them."""
        ...

    async def add_operator_entry(self, entry: OperatorRecord) -> None: ...

    async def operator_entries(self, run_id: str) -> list[OperatorRecord]:
        """The run's operator entries, in the order they were recorded."""
        ...

    async def link_event(self, event_id: str, at: float, how: str, run_ids: Sequence[str]) -> None:
        """Record that event ``event_id`` (published at ``at``) started or resumed
        ``run_ids``; links go with their event (``prune_events``)."""
        ...

    async def list_events(
        self,
        *,
        name: str | None,
        subject: str | None,
        since: float | None,
        limit: int,
    ) -> list[tuple[str, str, str, str | None, bytes | None, float]]:
        """Events (``id, name, domain, subject, payload, published_at``), newest
        first, of that name and subject (``None``: any), published at or after
        ``since``."""
        ...

    async def event_links(self, event_ids: Sequence[str]) -> list[EventLink]:
        """The runs those events started and resumed, in the order linked."""
        ...
