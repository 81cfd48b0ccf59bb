"""The store's part of callbacks and human tasks: their rows, and the operations on
them inside a transaction (a part of the :class:`parkway.store.base.Tx` protocol).

A callback's row is found by the SHA-256 of its token, never by the token: the
store holds nothing a reader of its tables could complete a callback with. A
human task's row is its definition (form, data, assignees) and where it stands
(``open``, then ``completed``, ``cancelled`` or ``expired``). Both go with their
run.
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# A human task's statuses; only an open one can be completed.
TASK_OPEN = "open"
TASK_STATUSES = ("open", "completed", "cancelled", "expired")


def token_digest(token: str) -> str:
    """What a callback's row is found by: the SHA-256 of its token, in hex. (No salt
    is needed: a token is 256 random bits, nothing a table of guesses could hold.)"""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class CallbackRecord:
    """One callback's row. ``status``: ``open``, ``completed`` or ``failed``;
    ``outcome``: the value completed with (JSON) or the failure's message (JSON
    string). Times are engine seconds."""

    token_hash: str
    run_id: str
    signal: str
    created_at: float
    status: str = "open"
    outcome: bytes | None = None
    completed_at: float | None = None


CALLBACK_COLUMNS = (
    "token_hash",
    "run_id",
    "signal",
    "created_at",
    "status",
    "outcome",
    "completed_at",
)


@dataclass
class HumanTaskRecord:
    """One human task's row. ``form_schema``, ``data`` and ``result`` are JSON,
    ``assignees`` a JSON list as text (the stores filter on it); ``form_model``
    names the pydantic model of the form (``module:qualname``), if it has one.
    Times are engine seconds."""

    id: str
    run_id: str
    workflow: str
    name: str
    title: str | None
    form_schema: bytes | None
    form_model: str | None
    data: bytes | None
    assignees: str
    signal: str
    status: str
    created_at: float
    due_at: float | None = None
    completed_by: str | None = None
    completed_at: float | None = None
    result: bytes | None = None


TASK_COLUMNS = (
    "id",
    "run_id",
    "workflow",
    "name",
    "title",
    "form_schema",
    "form_model",
    "data",
    "assignees",
    "signal",
    "status",
    "created_at",
    "due_at",
    "completed_by",
    "completed_at",
    "result",
)

_TASK_BYTES = (5, 7, 15)


def callback_row(record: CallbackRecord) -> tuple[object, ...]:
    """The record's columns, in :data:`CALLBACK_COLUMNS` order."""
    return tuple(getattr(record, column) for column in CALLBACK_COLUMNS)


def callback_record(row: Sequence[Any]) -> CallbackRecord:
    """A record from a row of :data:`CALLBACK_COLUMNS`."""
    values = list(row)
    if values[5] is not None:
        values[5] = bytes(values[5])  # (a memoryview, on PostgreSQL)
    return CallbackRecord(*values)


def task_row(record: HumanTaskRecord) -> tuple[object, ...]:
    """The record's columns, in :data:`TASK_COLUMNS` order."""
    return tuple(getattr(record, column) for column in TASK_COLUMNS)


def task_record(row: Sequence[Any]) -> HumanTaskRecord:
    """A record from a row of :data:`TASK_COLUMNS`."""
    values = list(row)
    for index in _TASK_BYTES:
        if values[index] is not None:
            values[index] = bytes(values[index])
    return HumanTaskRecord(*values)


@dataclass(frozen=True, slots=True)
class HumanTaskFilter:
    """Which human tasks ``HumanTasks.list`` returns."""

    status: str | None = None
    assignee: str | None = None
    workflow: str | None = None
    limit: int = 100


class Callbacks(Protocol):
    """Callbacks inside one transaction (``tx.callbacks``)."""

    async def add(self, record: CallbackRecord) -> None:
        """Insert the callback (a token hash already there is left as it is)."""
        ...

    async def get(self, token_hash: str) -> CallbackRecord | None:
        """The callback whose token hashes to ``token_hash`` (locked until the
        transaction ends, in a writing one)."""
        ...

    async def finish(self, token_hash: str, status: str, outcome: bytes, at: float) -> None:
        """Record the callback's outcome (``completed`` or ``failed``)."""
        ...


class HumanTasks(Protocol):
    """Human tasks inside one transaction (``tx.human_tasks``)."""

    async def add(self, records: Sequence[HumanTaskRecord]) -> None:
        """Insert the tasks (an id already there is left as it is)."""
        ...

    async def get(self, task_id: str) -> HumanTaskRecord | None:
        """The task (locked until the transaction ends, in a writing one)."""
        ...

    async def list(self, query: HumanTaskFilter) -> builtins.list[HumanTaskRecord]:
        """Tasks, oldest first: of ``status`` if given, of ``workflow`` if given, and
        with ``assignee`` given, those it may complete (assigned to it, or to
        nobody in particular)."""
        ...

    async def finish(
        self,
        task_id: str,
        status: str,
        at: float,
        *,
        by: str | None = None,
        result: bytes | None = None,
    ) -> bool:
        """Move an open task to ``status``; whether it was open."""
        ...

    async def close_run(self, run_id: str, at: float) -> None:
        """Cancel the run's open tasks (it ended)."""
        ...


__all__ = [
    "CALLBACK_COLUMNS",
    "TASK_COLUMNS",
    "TASK_OPEN",
    "TASK_STATUSES",
    "CallbackRecord",
    "Callbacks",
    "HumanTaskFilter",
    "HumanTaskRecord",
    "HumanTasks",
    "callback_record",
    "callback_row",
    "task_record",
    "task_row",
    "token_digest",
]
