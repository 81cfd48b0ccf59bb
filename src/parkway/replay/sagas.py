"""Compensations (sagas) and how a run stops: cancelled, or past its deadline.

A step given ``compensate=`` registers its undo once it succeeds: the workflow's
code calls :meth:`Sagas.register_compensation` right after the step's result,
which journals a marker (kind ``compensation.registered``) the first time and
finds it again on replay, so the code re-registers the same callable, with the
same argument, at the same point of every replay. A compensation is run as a
step of its own (:class:`CompensateCmd`, kind ``compensation``, named after the
step it undoes), so it is journaled, retried and replayed like one: a crash
between two compensations runs neither again that had completed.

The workflow's coroutine is wrapped (:func:`guarded`): when its body raises, the
compensations not run yet run newest first before the run ends ``failed``.

A run told to stop (a cancel, its deadline) while compensations are registered
is driven by a worker in *stopping* mode: its code replays its journal but
carries out nothing new; once it has nothing left to replay the machine
journals a ``stop`` entry (on branch ``!stop``, with the reason) and throws the
reason into the workflow, whose wrapper runs the compensations and ends the run
``cancelled`` or ``failed`` with :class:`~parkway.errors.RunTimeoutError`. A
replay meets the ``stop`` entry at the same point and throws there again, so the
compensations' entries that follow replay in order.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from parkway import _json
from parkway.errors import (
    CompensationFailedError,
    RunCancelledError,
    RunTimeoutError,
    StepFailedError,
)
from parkway.models import Retry, RunStatus, error_dict, rebuild_error
from parkway.replay.branch import Branch, Pending
from parkway.replay.commands import CompensateCmd
from parkway.replay.state import MachineState, close_branch
from parkway.replay.writes import Outcome
from parkway.store.base import JournalEntry
from parkway.store.vocabulary import EntryKind, EntryState

# The journal's kinds: a registered compensation, a compensation run, a stop.
REGISTERED = EntryKind.COMPENSATION_REGISTERED
COMPENSATION = EntryKind.COMPENSATION
STOP = EntryKind.STOP
# The branch a stop entry is journaled on: no operation's, so no line meets it.
STOP_BRANCH = "!stop"
# A run with a timeout: its deadline, journaled when it is inserted (position 0, on a
# branch of its own), so that its code knows it without a read of its own.
DEADLINE = EntryKind.DEADLINE
DEADLINE_BRANCH = "!deadline"


@dataclass(eq=False)
class Compensation:
    """A registered compensation: the step it undoes, its undo and the step's result."""

    step: str
    fn: Callable[..., Any]
    arg: Any
    retry: Retry | None
    ran: bool = False


class Sagas:
    """Registered compensations, running them, and stopping a run that must end,
    over the machine's state."""

    def __init__(self, state: MachineState, stop: BaseException | None) -> None:
        self._st = state
        self.compensations: list[Compensation] = []
        self.unwound = False  # the reason was thrown into the workflow
        self.compensating = False  # the wrapper runs the compensations (the body ended)
        self.deadline_entry: JournalEntry | None = None
        self._deadline_at: float | None = None
        self._timeout = 0.0
        deadline = state.by_branch.get(DEADLINE_BRANCH)
        if deadline:
            entry = self.deadline_entry = deadline[0]
            self._deadline_at = entry.deadline
            self._timeout = float(_json.loads(entry.value)["timeout"])
            state.applied.add(entry.pos)  # (no operation's: the replay passes it by)
        # Why the run stops (a cancel, its deadline), if it does; None: it runs on.
        self.stop: BaseException | None
        journaled = state.by_branch.get(STOP_BRANCH)
        if journaled:  # a stop decided earlier stands (its reason, not a later one)
            self.stop = rebuild_error(_json.loads(journaled[0].value))
        else:
            self.stop = stop

    # -- what the workflow's code calls ------------------------------------------------------

    def register_compensation(
        self, step: str, fn: Callable[..., Any], arg: Any, retry: Retry | None
    ) -> None:
        """Step ``step`` succeeded with ``arg``: ``fn(arg)`` is its undo from now on."""
        st = self._st
        branch = st.branch_now()
        entry = st.next_entry(branch, REGISTERED, step)
        if entry is None:
            st.record_new(branch, REGISTERED, step, EntryState.DONE, b"null")
        elif st.cursor < len(st.schedule) and st.schedule[st.cursor] is entry:
            st.cursor += 1  # (the usual case: the very next entry)
        else:
            st.applied.add(entry.pos)
        self.compensations.append(Compensation(step, fn, arg, retry))

    async def run_compensations(self) -> tuple[list[Any], list[str]]:
        """Run the compensations not run yet, newest first: their results, and the
        names of the steps whose compensation failed."""
        results: list[Any] = []
        failed: list[str] = []
        for comp in reversed(self.compensations):
            if comp.ran:
                continue
            comp.ran = True
            try:
                results.append(await CompensateCmd(comp.fn, (comp.arg,), {}, comp.step, comp.retry))
            except StepFailedError:
                failed.append(comp.step)
        return results, failed

    @property
    def stopping(self) -> bool:
        """Whether the run stops (a cancel, its deadline), now or since an earlier advance."""
        return self.stop is not None

    @property
    def has_unrun_compensations(self) -> bool:
        return any(not comp.ran for comp in self.compensations)

    # -- stopping ----------------------------------------------------------------------------

    @property
    def holding_back(self) -> bool:
        """Whether the run's own operations must not be carried out: it stops, and its
        compensations have not begun."""
        return self.stop is not None and not self.unwound and not self.compensating

    def check_deadline(self) -> None:
        """Past the run's deadline, nothing new is done: it stops (once, and not while
        its compensations run already)."""
        deadline = self._deadline_at
        if (
            deadline is not None
            and self.stop is None
            and not self.compensating
            and self._st.clock_now() >= deadline
        ):
            self.stop = RunTimeoutError(self._st.run.id, self._timeout)

    def stop_now(self) -> None:
        """The stopping run has replayed all it had: journal the stop, and unwind."""
        assert self.stop is not None
        st = self._st
        value = _json.dumps(error_dict(self.stop))
        pos = st.alloc()
        entry = JournalEntry(
            pos,
            STOP,
            _stop_name(self.stop),
            EntryState.DONE,
            value,
            None,
            st.clock_now(),
            STOP_BRANCH,
        )
        st.keep(entry)
        st.writes.journal[pos] = entry
        self.unwind()

    def unwind(self) -> None:
        """Throw the stop's reason into the workflow where it waits: its other lines
        (gather branches) are let go, its waits are left to the run's end."""
        st = self._st
        self.unwound = True
        root = st.root
        ops: list[Pending] = [*st.live, *st.parked, *st.waiting.values()]
        st.live.clear()
        st.parked.clear()
        st.waiting.clear()
        st.conditions.clear()
        for op in ops:
            if op.branch is not root:
                _let_go(op.branch)
        if root is None or root.done:
            return
        blocked, root.blocked = root.blocked, None
        if blocked is not None and blocked.group is not None:
            for branch in blocked.group.branches:
                _let_go(branch)
            blocked.group = None
        st.ready.append((root, None, self.stop))

    def ending(self, error: BaseException) -> Outcome:
        """How the run ends when its workflow raised ``error``."""
        if error is self.stop and isinstance(error, RunCancelledError):
            return Outcome(RunStatus.CANCELLED)
        return self._st.failed(error)

    def stranded(self) -> Outcome | None:
        """The workflow caught the stop and waits on: the run ends anyway."""
        if self.stop is not None and self.unwound and not self.compensating:
            return self.ending(self.stop)
        return None


def _let_go(branch: Branch) -> None:
    if not branch.done:
        branch.withdrawn = True
        close_branch(branch)


def _stop_name(reason: BaseException) -> str:
    return "cancel" if isinstance(reason, RunCancelledError) else "timeout"


async def guarded(sagas: Sagas, st: MachineState, body: Coroutine[Any, Any, Any]) -> Any:
    """The workflow's body, with its compensations run when it raises or stops."""
    try:
        value = await body
    except Exception as exc:
        if st.held is not None:
            raise  # (the run is held: nothing more is done)
        error: BaseException = exc
    else:
        if sagas.stop is None or not sagas.unwound:
            return value
        error = sagas.stop  # (the body caught the stop and returned: it stops all the same)
    if not sagas.has_unrun_compensations:
        raise error
    sagas.compensating = True
    _, failed = await sagas.run_compensations()
    if failed:
        raise CompensationFailedError(st.run.id, failed) from error
    raise error
