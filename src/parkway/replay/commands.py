"""The operations a workflow asks of the engine, as plain data.

A workflow coroutine never touches the store: every ``ctx`` operation yields
one of these commands up through the workflow's ``await`` chain to the
executor (see :mod:`parkway.replay`), which answers it from the journal or
carries it out, and sends the result back in.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from parkway.errors import WorkflowUsageError
from parkway.models import Retry
from parkway.store.vocabulary import EntryKind

# How many replay machines are driving a workflow's code right now (0 or 1: each
# drives synchronously). A command awaited outside of that (in an asyncio task
# the workflow made, say with asyncio.gather) has nobody to answer it.
driving = 0


class Command:
    """Base of every command; ``kind`` and ``name`` identify it in the journal."""

    kind: ClassVar[str] = ""
    name: str

    def __await__(self) -> Generator[Command, Any, Any]:
        if not driving:
            raise WorkflowUsageError(
                f"ctx operation {self.describe()} was awaited outside of its workflow's own "
                "code (in an asyncio task, say with asyncio.gather or a TaskGroup); run "
                "several ctx operations at once with ctx.gather"
            )
        return (yield self)

    def describe(self) -> str:
        return f"{self.entry_kind()} {self.name!r}"

    def entry_kind(self) -> str:
        """The ``kind`` of its journal entry."""
        return self.kind


@dataclass
class StepCmd(Command):
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str
    retry: Retry | None
    timeout: float | None = None  # seconds each attempt may take
    kind: ClassVar[str] = EntryKind.STEP


@dataclass
class CompensateCmd(StepCmd):
    """A registered compensation run as a step (journaled under its own kind, named
    after the step it undoes)."""

    kind: ClassVar[str] = EntryKind.COMPENSATION


@dataclass
class SleepCmd(Command):
    seconds: float | None = None
    until: float | None = None
    name: str = "sleep"
    kind: ClassVar[str] = EntryKind.SLEEP


@dataclass
class SignalCmd(Command):
    name: str
    timeout: float | None
    kind: ClassVar[str] = EntryKind.SIGNAL


@dataclass
class PersonCmd(SignalCmd):
    """``cb.wait()`` and ``ctx.human_task``: a wait on the run's own signal ``name``,
    which only the callback's completion or the task's sends (its name has a
    character no caller's signal name may have).

    ``what`` names the wait in a timeout's error; ``task``: the human task's id (it
    expires with the wait's timeout, and is cancelled if the run stops waiting);
    ``convert``: turns the signal's payload into the wait's result, or raises.
    """

    what: str = ""
    task: str | None = None
    convert: Callable[[Any], Any] | None = None

    def describe(self) -> str:
        return self.what or super().describe()


@dataclass
class StartChildCmd(Command):
    name: str  # the child's workflow name
    input: Any
    run_id: str | None
    # Internal (accumulators): a top-level run started by an event, not a child.
    trigger: dict[str, Any] | None = None
    kind: ClassVar[str] = EntryKind.CHILD_START

    def entry_kind(self) -> str:
        return EntryKind.CHILD_START if self.trigger is None else EntryKind.RUN_START


@dataclass
class EventCmd(Command):
    name: str
    match: dict[str, Any] | None
    subject: str | None
    timeout: float | None
    since_start: bool
    ttl: float | None = None
    kind: ClassVar[str] = EntryKind.EVENT


@dataclass
class MessageCmd(Command):
    name: str
    key: str
    timeout: float | None
    kind: ClassVar[str] = EntryKind.MESSAGE


@dataclass
class PublishCmd(Command):
    name: str
    payload: Any
    event_id: str | None
    subject: str | None
    kind: ClassVar[str] = EntryKind.PUBLISH


@dataclass
class ChildResultCmd(Command):
    name: str  # the child's run id
    kind: ClassVar[str] = EntryKind.CHILD_RESULT


@dataclass
class GatherCmd(Command):
    """``ctx.gather``: run ``branches`` (coroutines) concurrently."""

    branches: tuple[Coroutine[Any, Any, Any], ...]
    return_exceptions: bool
    name: str = ""
    kind: ClassVar[str] = EntryKind.GATHER

    def __post_init__(self) -> None:
        self.name = str(len(self.branches))


@dataclass
class FirstCmd(Command):
    """``ctx.first``: one park on several waits (``waits``: keyword -> wait command)."""

    waits: dict[str, Command]
    name: str = ""
    kind: ClassVar[str] = EntryKind.FIRST

    def __post_init__(self) -> None:
        self.name = ",".join(self.waits)


@dataclass
class WaitUntilCmd(Command):
    """``ctx.wait_until``: park until ``predicate()`` is true."""

    predicate: Callable[[], Any]
    timeout: float | None
    name: str = "wait_until"
    kind: ClassVar[str] = EntryKind.WAIT_UNTIL


@dataclass
class ContinueAsNew(BaseException):
    """Raised by ``ctx.continue_as_new``; a BaseException so ``except Exception`` keeps out."""

    input: Any = field(default=None)
