"""The replay machine's scheduler: which branch runs next, and what its operations get.

:class:`Scheduler` is given the advance's state and the parts that keep their
own (its updates, its compensations). It runs the branches that have an
answer, applies the journal's entries in the order their results were first
applied (``seq``, else ``pos``), then carries out the operations past the
journal; when every branch waits on an input, the run is quiet: an update's
handler or a ``wait_until`` may go on, else the advance ends.

Replaying a long journal is mostly :meth:`Scheduler._advance` answering a
step from its entry (:func:`_replayed_step`): the hot loops read the state
through a local bound once, so composing the machine costs them no lookup
an operation.
"""

from __future__ import annotations

import asyncio
from types import GeneratorType
from typing import Any, cast

from parkway import _json
from parkway.errors import NonDeterminismError, SerializationError, WorkflowUsageError
from parkway.replay import commands
from parkway.replay.branch import Branch, Op, Pending
from parkway.replay.commands import (
    Command,
    ContinueAsNew,
    FirstCmd,
    GatherCmd,
    StepCmd,
    WaitUntilCmd,
)
from parkway.replay.composite import answer, branch_ended, check_conditions, first, gather
from parkway.replay.composite import wait_until as wait_until_op
from parkway.replay.ops import live_plain, replay_plain
from parkway.replay.requests import AwaitFuture
from parkway.replay.sagas import STOP_BRANCH, Sagas
from parkway.replay.state import LATER, MachineState, Park
from parkway.replay.updates import UPDATES, Updates
from parkway.replay.writes import Outcome
from parkway.store.base import JournalEntry
from parkway.store.vocabulary import Ending, EntryKind, EntryState


class Scheduler:
    """Drives a run's branches over its journal, and its operations past it."""

    def __init__(self, state: MachineState, sagas: Sagas, updates: Updates) -> None:
        self._st = state
        self._sagas = sagas
        self._updates = updates

    def run(self) -> None:
        """Advance what can be advanced: the branches that have an answer, then the
        journal's next entry, then the operations past the journal."""
        st = self._st
        ready, schedule, live = st.ready, st.schedule, st.live
        while st.outcome is None:
            if ready:
                self._advance(*ready.popleft())
            elif st.cursor < len(schedule):
                if not self._replay_next():
                    return  # a branch waits on an answer before it can reach that entry
            elif live:
                self._carry_out(live.popleft())
            elif st.outstanding:
                return  # the driver answers
            elif self._sagas.holding_back and st.root is not None:
                self._sagas.stop_now()  # (the run stops: it has replayed all it had)
            elif not self._when_quiet():
                st.outcome = self._sagas.stranded() or Outcome(st.park_status)

    def _advance(self, branch: Branch, send: Any, throw: BaseException | None) -> None:
        """Run ``branch`` until it awaits an operation, or ends.

        A step whose result the journal's next entry records is answered here, and
        the branch goes on at once (see :func:`_replayed_step`).
        """
        if branch.done or branch.withdrawn:
            return
        st = self._st
        while True:
            st.current = branch
            commands.driving += 1
            try:
                yielded = branch.coro.throw(throw) if throw is not None else branch.coro.send(send)
            except StopIteration as stop:
                self._ended(branch, stop.value, None)
                return
            except ContinueAsNew as cont:
                if st.held is not None:
                    st.hold(st.held)
                else:
                    self._continued(cont)
                return
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # (a sys.exit() in its code too: the run's failure)
                self._ended(branch, None, exc)
                return
            finally:
                commands.driving -= 1
                st.current = None
            if st.held is None and type(yielded) is StepCmd and not st.ready:
                entry = _replayed_step(st, branch, yielded)
                if entry is not None:
                    try:
                        send, throw = _json.loads(entry.value), None
                    except Exception as exc:  # (as _apply answers it)
                        send, throw = None, exc
                    continue
            break
        if st.held is not None:
            st.hold(st.held)
        elif isinstance(yielded, Command):
            self._issue(branch, yielded)
        elif yielded is None:  # a bare `await asyncio.sleep(0)`: nothing to wait for
            st.ready.append((branch, None, None))
        elif isinstance(yielded, asyncio.Future):
            # A plain asyncio awaitable (an event, a lock, asyncio.sleep): awaited as
            # it is, not journaled, so it must not decide what the workflow does.
            # (ctx operations inside asyncio tasks are refused: see Command.)
            op = Pending(branch, -1, cast(Command, None), None)
            branch.blocked = op
            self.pump(op, _await(yielded), None)
        else:
            error = WorkflowUsageError(
                f"workflow {st.wf.name!r} awaited {yielded!r}; workflows may only await "
                "ctx operations (put other I/O inside ctx.step)"
            )
            st.ready.append((branch, None, error))

    def _issue(self, branch: Branch, cmd: Command) -> None:
        """``branch`` awaits ``cmd``: match it with its journal entry, if it has one."""
        st = self._st
        try:
            entry = st.next_entry(branch, cmd.entry_kind(), cmd.name)
        except NonDeterminismError as exc:
            st.hold(exc)
            return
        op = Pending(branch, branch.index - 1, cmd, entry)
        branch.blocked = op
        if entry is None:
            if st.cursor < len(st.schedule):
                st.live.append(op)  # carried out once the journal is replayed
            else:
                self._carry_out(op)
        elif st.cursor < len(st.schedule) and st.schedule[st.cursor] is entry:
            st.cursor += 1  # (the usual case: the very next entry)
            self._apply(op)
        else:
            st.waiting[entry.pos] = op

    def _replay_next(self) -> bool:
        """Apply the journal's next entry; ``False`` if it must wait for an answer."""
        st = self._st
        entry = st.schedule[st.cursor]
        if entry.pos in st.applied:
            st.cursor += 1
            return True
        op = st.waiting.pop(entry.pos, None)
        if op is None:
            if st.outstanding:
                return False
            st.cursor += 1
            if entry.branch == STOP_BRANCH:
                sagas = self._sagas
                if not sagas.unwound and not sagas.compensating:
                    sagas.unwind()  # (where the run stopped before: it stops there again)
                return True
            if entry.kind == EntryKind.UPDATE and entry.branch == UPDATES:
                self._updates.replay(entry)  # an update applied here the first time
                return True
            if entry.state != EntryState.WITHDRAWN and not st.in_withdrawn(entry.branch):
                st.hold(
                    NonDeterminismError(
                        st.run.id,
                        entry.pos,
                        f"{entry.kind} {entry.name!r}",
                        "no such operation (the workflow now waits elsewhere, or has ended)",
                    )
                )
            return True
        st.cursor += 1
        self._apply(op)
        return True

    def _apply(self, op: Pending) -> None:
        """Give ``op`` the result its journal entry records (a pending one: later)."""
        st = self._st
        entry = op.entry
        assert entry is not None
        if entry.state == EntryState.PENDING:
            st.live.append(op)  # re-examined once the journal is replayed
            return
        try:
            value = self._replay(op)
        except NonDeterminismError as exc:
            st.hold(exc)
        except Exception as exc:
            answer(st, op, None, exc)
        else:
            if value is not LATER:
                answer(st, op, value, None)

    def _carry_out(self, op: Pending) -> None:
        """Carry out ``op`` now (its journal has no result for it)."""
        if op.branch.withdrawn:
            return
        st, sagas = self._st, self._sagas
        sagas.check_deadline()
        if sagas.holding_back:  # (the run stops: nothing new is done)
            st.parked.append(op)
            return
        try:
            result = self._live_op(op)
        except Park:
            st.parked.append(op)
        except NonDeterminismError as exc:
            st.hold(exc)
        except Exception as exc:  # errors meant for the workflow (StepFailedError...)
            answer(st, op, None, exc)
        else:
            if isinstance(result, GeneratorType):
                self.pump(op, cast(Op, result), None)
            elif result is not LATER:
                answer(st, op, result, None)

    def pump(self, op: Pending, gen: Op, reply: Any) -> None:
        """Send ``reply`` into ``op``'s handler; it asks for more, or finishes."""
        st = self._st
        try:
            request = gen.send(reply)
        except StopIteration as stop:
            op.gen = None
            answer(st, op, stop.value, None)
        except Park:
            op.gen = None
            st.parked.append(op)
        except NonDeterminismError as exc:
            st.hold(exc)
        except Exception as exc:
            op.gen = None
            answer(st, op, None, exc)
        else:
            op.gen, op.requested = gen, True
            st.outstanding += 1
            st.requests.append((op, request))

    def _ended(self, branch: Branch, value: Any, error: BaseException | None) -> None:
        st = self._st
        branch.done = True
        if st.held is not None:  # (ctx.now() found the journal otherwise)
            st.hold(st.held)
            return
        if branch.update_id is not None:
            self._updates.ended(branch, value, error)
            return
        if error is None and branch.index < len(branch.entries):
            entry = branch.entries[branch.index]
            ending = "the workflow returning" if branch is st.root else "its branch returning"
            st.hold(
                NonDeterminismError(st.run.id, entry.pos, f"{entry.kind} {entry.name!r}", ending)
            )
            return
        if branch is st.root:
            st.outcome = self._sagas.ending(error) if error is not None else st.completed(value)
        else:
            branch_ended(st, branch, value, error)

    def _continued(self, cont: ContinueAsNew) -> None:
        st = self._st
        try:
            data = _json.dumps(cont.input, "the input passed to ctx.continue_as_new")
        except SerializationError as exc:
            st.outcome = st.failed(exc)
            return
        st.outcome = Outcome(Ending.CONTINUED, new_input=data)

    def _replay(self, op: Pending) -> Any:
        """The result ``op``'s (done or error) journal entry records."""
        cmd, entry = op.cmd, op.entry
        assert entry is not None
        if isinstance(cmd, GatherCmd):
            return gather(self._st, op, cmd)
        if isinstance(cmd, FirstCmd) and entry.state == EntryState.DONE:
            won = _json.loads(entry.value)
            return won["name"], won["value"]
        return replay_plain(self._st, op)

    def _live_op(self, op: Pending) -> Any:
        cmd = op.cmd
        if isinstance(cmd, GatherCmd):
            return gather(self._st, op, cmd)
        if isinstance(cmd, FirstCmd):
            return first(self._st, op, cmd)
        if isinstance(cmd, WaitUntilCmd):
            return wait_until_op(self._st, op, cmd)
        return live_plain(self._st, op)

    def _when_quiet(self) -> bool:
        """Every branch waits on an input: whether anything goes on after all (an
        update's handler, a ``wait_until`` whose predicate now holds)."""
        return self._updates.handle() or check_conditions(self._st)


def _replayed_step(st: MachineState, branch: Branch, cmd: StepCmd) -> JournalEntry | None:
    """The journal entry that answers ``cmd`` at once, taken, if it is the usual
    one: the step's own entry, done, and the next the journal applies.

    Replaying a long journal is mostly this, and it is what :meth:`Scheduler._issue`,
    :meth:`Scheduler._apply` and :func:`~parkway.replay.composite.answer` would do for
    it, without the operation they track or the turn of :meth:`Scheduler.run` between
    the answer and the branch going on (the branch's answer would be the only one
    ready). ``None``: any other case, which :meth:`Scheduler._issue` takes (a
    different operation there holds the run).
    """
    index, cursor = branch.index, st.cursor
    if index >= len(branch.entries) or cursor >= len(st.schedule):
        return None
    entry = branch.entries[index]
    if (
        entry is not st.schedule[cursor]
        or entry.state != EntryState.DONE
        or entry.kind != EntryKind.STEP
        or entry.name != cmd.name
    ):
        return None
    branch.index = index + 1
    st.reached += 1
    st.cursor = cursor + 1
    return entry


def journal_order(op: Pending) -> int:
    """Where a replay of the journal reaches ``op``'s entry (see ``schedule``)."""
    entry = op.entry
    assert entry is not None
    return entry.pos if entry.seq is None else entry.seq


def _await(future: asyncio.Future[Any]) -> Op:
    yield AwaitFuture(future)
