"""What the replay machine asks of its driver, and the answers it takes back.

The machine (:mod:`parkway.replay.machine`) never does I/O: where an operation
needs something done or read, it returns one of these, with a token naming the
operation, and is resumed with ``resume(token, answer)``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, TypeAlias

from parkway.replay.commands import StepCmd


@dataclass(frozen=True)
class RunStep:
    """Run one attempt of a step; answer with a :class:`StepResult`.

    Commit the writes first unless ``Writes.may_wait_for_commit``: every result
    before a step must be durable before its side effect starts.
    """

    cmd: StepCmd
    attempt: int
    # Where the step is journaled: its attempts' idempotency key names it.
    position: int = 0
    # The JSON details the latest earlier attempt recorded by a heartbeat (None: none).
    last_heartbeat: bytes | None = None
    # Where a heartbeat journals its details: the step's branch, and its entry's seq.
    branch: str | None = None
    seq: int | None = None


@dataclass(frozen=True)
class StepResult:
    """What an attempt of a step returned (``value``) or raised (``error``)."""

    value: Any = None
    error: BaseException | None = None
    # The JSON details of this attempt's last heartbeat, if it recorded one.
    heartbeat: bytes | None = None


@dataclass(frozen=True)
class Flush:
    """Commit the writes so far (their publishes with them); answer with the journal
    entries the commit wrote for those publishes, by position."""


@dataclass(frozen=True)
class ReadMailbox:
    """Answer with the run's mailbox (its buffered signals, oldest first)."""


@dataclass(frozen=True)
class ReadRun:
    """Answer with the row of run ``run_id`` (``None`` if there is none)."""

    run_id: str


@dataclass(frozen=True)
class ReadHolder:
    """Answer with the live wait for message ``(name, key)``, if any."""

    name: str
    key: str


@dataclass(frozen=True)
class AwaitFuture:
    """Await ``future``, a plain asyncio awaitable the workflow awaited (an event, a
    lock, ``asyncio.sleep``); answer with ``None``. It is not journaled."""

    future: asyncio.Future[Any]


Request: TypeAlias = RunStep | Flush | ReadMailbox | ReadRun | ReadHolder | AwaitFuture
