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

import builtins
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


class Workers(Protocol):
    """The workers serving the store, inside one transaction (``tx.workers``)."""

    async def beat(self, worker: WorkerRecord) -> None:
        """Insert the worker's row, or renew it (all but ``started_at``)."""
        ...

    async def list(self, now: float) -> builtins.list[WorkerRecord]:
        """The workers alive at ``now`` (``alive_until`` after it), the longest
        running first."""
        ...

    async def prune(self, now: float) -> int:
        """Forget the workers dead at ``now``; how many."""
        ...


class Operators(Protocol):
    """Operator entries (who did what to a run) inside one transaction (``tx.operators``)."""

    async def add(self, entry: OperatorRecord) -> None: ...

    async def list(self, run_id: str) -> builtins.list[OperatorRecord]:
        """The run's operator entries, in the order they were recorded."""
        ...
