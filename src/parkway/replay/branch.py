"""The lines of execution inside one run: the workflow's own, and each gather branch's.

A run's code is one :class:`Branch` (path ``""``) until it calls ``ctx.gather``:
each awaitable given to it becomes a branch of its own, with a path naming where
it came from (``"3.1"``: branch 1 of the gather at the workflow's 4th operation;
``"3.1/0.2"`` nests). An operation is identified by its branch and its index in
that branch, never by when it ran, so a replay finds each operation's journal
entry whatever order the branches finished in.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any

from parkway.replay.commands import Command
from parkway.replay.requests import Request
from parkway.store.base import JournalEntry

Op = Generator[Request, Any, Any]

ROOT = ""


@dataclass(eq=False)
class Branch:
    """One line of execution: a coroutine and its journal entries, in order."""

    path: str
    coro: Coroutine[Any, Any, Any]
    entries: list[JournalEntry]
    group: Group | None = None  # the gather it is a branch of
    slot: int = 0  # its place in that gather's results
    index: int = 0  # operations issued so far
    # Withdrawn by its gather (another branch failed): it is not advanced again; a
    # step it had in flight still settles (and is journaled).
    withdrawn: bool = False
    done: bool = False
    blocked: Pending | None = None  # the operation it waits on
    # An update's handler: the update it answers.
    update_id: str | None = None
    update_name: str | None = None

    @property
    def journal_path(self) -> str | None:
        """Its path as journaled (``None`` for the workflow's own line)."""
        return self.path or None

    def child_path(self, index: int, slot: int) -> str:
        """The path of branch ``slot`` of the gather at this branch's ``index``."""
        own = f"{index}.{slot}"
        return f"{self.path}/{own}" if self.path else own


@dataclass(eq=False)
class Pending:
    """An operation a branch waits on: its command, its journal entry (if it has one
    yet), and its handler while that waits on a request's answer."""

    branch: Branch
    index: int
    cmd: Command
    entry: JournalEntry | None
    gen: Op | None = None
    requested: bool = False  # a request of it is out (a step in flight, a read)
    # A step's position, taken when its first attempt starts (before any entry): the
    # attempt's idempotency key names it, and its entries are journaled there.
    reserved: int | None = None
    group: Group | None = None  # a gather's: its branches


@dataclass(eq=False)
class Group:
    """A ``ctx.gather`` in progress: its branches, their results, how it ends."""

    parent: Pending
    branches: list[Branch]
    return_exceptions: bool
    results: list[Any] = field(default_factory=list)
    failure: BaseException | None = None  # the first exception, once one came

    def settled(self) -> bool:
        """Every branch has ended, or was withdrawn and has nothing in flight."""
        return all(
            b.done or (b.withdrawn and (b.blocked is None or not b.blocked.requested))
            for b in self.branches
        )
