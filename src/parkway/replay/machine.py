"""Deterministic replay, without I/O: a run's code driven against its journal.

A run is advanced by running its workflow function from the top. Each ``ctx``
operation is identified by its branch and its index in that branch (see
:mod:`parkway.replay.branch`): an operation already in the journal gets its
recorded result without doing anything; the first one past the journal is
carried out (a wait checks its input, a step is handed to the worker to run)
and recorded. When every branch waits on an input that has not come, the run
parks; its next wake-up replays it again. Parking therefore costs nothing (no
coroutine, no thread is kept) and the store is the only truth.

Replay applies the journal's entries in the order their results were first
applied (``seq``, else ``pos``), so branches that share the workflow's state
see it change in the same order on every replay, whatever order their steps
finished in.

:class:`Machine` is a pure state machine over what the worker loaded (the run,
its journal, its due tasks, maybe its mailbox): it never touches the store.
Where an operation needs something done or read it says so with a request
(:mod:`parkway.replay.requests`) and a token; the worker's driver
(:mod:`parkway.worker.advance`) does it and resumes the machine with the
answer. Several requests may be out at once (the steps of a gather's
branches). What the run decided accumulates in :attr:`Machine.writes` (see
:mod:`parkway.replay.writes`); how it ended is :attr:`Machine.outcome`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from types import GeneratorType
from typing import Any, cast

from parkway import _json
from parkway.errors import NonDeterminismError, SerializationError, WorkflowUsageError
from parkway.events import Event
from parkway.models import RunStatus, error_dict
from parkway.registry import Registry, WorkflowDef
from parkway.replay import commands
from parkway.replay.branch import ROOT, Branch, Op, Pending
from parkway.replay.commands import (
    Command,
    ContinueAsNew,
    FirstCmd,
    GatherCmd,
    StepCmd,
    WaitUntilCmd,
)
from parkway.replay.composite import Composites
from parkway.replay.context import WorkflowContext
from parkway.replay.requests import AwaitFuture, Request
from parkway.replay.sagas import STOP_BRANCH, Sagas, guarded
from parkway.replay.state import LATER, Park, close_branch
from parkway.replay.updates import UPDATES, Updates
from parkway.replay.writes import Outcome
from parkway.store.base import JournalEntry, RunRecord, SignalRecord, TaskRecord, UpdateRecord
from parkway.store.vocabulary import Ending, EntryKind, EntryState

log = logging.getLogger("parkway.replay")

Token = Pending

# How a machine that may be kept and woken ended its advance: parked on its waits,
# or waiting on a step's retry backoff (its run stays ``running`` meanwhile).
PARKED_STATUSES = frozenset({RunStatus.PARKED, RunStatus.RUNNING})
# The journal length past which a run had better continue as new: a cached run's
# resume costs the same at any length, but a replay (a restart, another worker)
# grows with the journal, reading it included.
HISTORY_THRESHOLD = 10_000


class Machine(Composites, Updates, Sagas):
    """One advance of one run's code over what the worker loaded; no I/O.

    Args:
        wf: The workflow (its code and input model).
        run: The run's row.
        journal: Its journal (the current generation's).
        tasks: Its tasks due now (deliveries, timers, signals, the start).
        registry: The workflows a child may be started from.
        clock: Engine time (what ``ctx.now()`` records on first execution).
        prepare_event: Validates and routes an event ``ctx.publish`` publishes.
        event_retention: How far back ``since_start`` may look.
        signals: The run's mailbox, if the worker read it with the run.
        updates: The updates sent to the run not handled yet, if any came.
        history_threshold: The journal length past which the run is told it had
            better continue as new (``ctx.continue_as_new_suggested``).
        stop: Why the run must stop (a :class:`RunCancelledError`, a
            :class:`RunTimeoutError`), if it must: its code replays its journal,
            carries out nothing new, and its compensations run (see
            :mod:`parkway.replay.sagas`).

    Call :meth:`start`; then, while :attr:`outcome` is ``None``, do each request
    :meth:`take_requests` hands out and :meth:`resume` with its answer.
    :attr:`writes` holds what is to be committed; :meth:`take_writes` hands it
    over at each commit.

    A machine that parked may be kept (the worker's cache of runs) and, once its
    parking has been committed, woken with the inputs that came since
    (:meth:`wake`) instead of being built and replayed again: it goes on from
    where it parked, exactly as a replay of its journal would have.
    """

    def __init__(
        self,
        wf: WorkflowDef,
        run: RunRecord,
        journal: list[JournalEntry],
        tasks: list[TaskRecord],
        *,
        registry: Registry,
        clock: Callable[[], float],
        prepare_event: Callable[[Event], tuple[Event, bytes]],
        event_retention: float,
        signals: list[SignalRecord] | None = None,
        updates: list[UpdateRecord] | None = None,
        history_threshold: int = HISTORY_THRESHOLD,
        public_url: str | None = None,
        stop: BaseException | None = None,
    ) -> None:
        self.wf, self.run = wf, run
        self.public_url = public_url
        self.tasks = tasks
        self.registry = registry
        self.clock_now = clock
        self.prepare_event = prepare_event
        self.event_retention = event_retention
        self.entries = {}
        self._holding, self._event_ids = set(), set()
        # One pass over the journal (a replay's may hold thousands of entries): each
        # kept, and whether it came in position order (a store's does) with no entry
        # applied out of it (seq), which spares the sorts below.
        last, sorted_by_pos, reordered = -1, True, False
        for entry in journal:
            self._keep(entry)
            if entry.pos <= last:
                sorted_by_pos = False
            last = entry.pos
            if entry.seq is not None:
                reordered = True
        self.reached = 0
        self.history_threshold = history_threshold
        in_order = list(journal) if sorted_by_pos else sorted(journal, key=lambda e: e.pos)
        by_branch: dict[str, list[JournalEntry]] = {ROOT: []}
        for entry in in_order:
            if entry.branch is None:
                by_branch[ROOT].append(entry)
            else:
                by_branch.setdefault(entry.branch, []).append(entry)
        self._by_branch = by_branch
        # Replay applies entries in the order their results were applied first.
        if reordered:
            self._schedule = sorted(in_order, key=lambda e: e.pos if e.seq is None else e.seq)
            self.next_pos = 1 + max(e.pos if e.seq is None else max(e.pos, e.seq) for e in journal)
        else:
            self._schedule = in_order
            self.next_pos = 1 + (last if sorted_by_pos else max(self.entries))
        self._cursor = 0
        self._applied: set[int] = set()  # entries answered out of order (side values)
        self._init_sagas(stop)
        self._waiting: dict[int, Pending] = {}  # issued, their entry not reached yet
        self._live: collections.deque[Pending] = collections.deque()  # after the journal
        self._parked: list[Pending] = []  # waiting on an input that has not come
        self._ready: collections.deque[tuple[Branch, Any, BaseException | None]] = (
            collections.deque()
        )
        self._requests: list[tuple[Pending, Request]] = []
        self._outstanding = 0
        self._withdrawn_paths: list[str] = []
        self._conditions: list[Pending] = []
        self._handlers: dict[str, Any] = {}
        self._updates: list[UpdateRecord] = list(updates or [])
        self._handled: set[str] = set()
        self._closed_streams: set[str] = set()
        self.consumed_tasks: set[int] = set()
        self.claimed = frozenset(t.id for t in tasks)
        self.delivered: set[int] = set()
        self.writes = self._new_writes()
        self.park_status = RunStatus.PARKED
        self.held: NonDeterminismError | None = None
        self.outcome: Outcome | None = None
        # The run's mailbox, read once per advance (None: not yet).
        self._mailbox: list[SignalRecord] | None = None if signals is None else list(signals)
        self._root: Branch | None = None
        self._current: Branch | None = None
        self._loaded = len(self.entries)

    # -- the driver's side -------------------------------------------------------------------

    def start(self) -> None:
        """Run the workflow's code from the top until it needs something or ends."""
        trigger = _json.loads(self.run.trigger)
        ctx = WorkflowContext(
            run_id=self.run.id,
            workflow=self.run.workflow,
            version=self.run.version,
            domain=self.run.domain,
            subject=self.run.subject,
            trigger=Event.from_dict(trigger) if trigger else None,
            sides=self,
            public_url=self.public_url,
        )
        try:
            arg = self.wf.model_validate(_json.loads(self.run.input))
            coro = self.wf.fn(ctx, arg)
        except Exception as exc:
            self.outcome = self._failed(exc)
            return
        if not asyncio.iscoroutine(coro):
            self.outcome = self._failed(
                WorkflowUsageError(f"workflow {self.wf.name!r} did not return a coroutine")
            )
            return
        body = guarded(self, self.run.id, coro)
        self._root = Branch(ROOT, body, self._by_branch.get(ROOT, []))
        self._ready.append((self._root, None, None))
        self._run()

    def wake(
        self,
        run: RunRecord,
        tasks: list[TaskRecord],
        *,
        signals: list[SignalRecord] | None = None,
        updates: list[UpdateRecord] | None = None,
    ) -> None:
        """Go on from where the run parked, with ``tasks`` (and the mailbox and updates)
        that came since: each parked wait looks for its input again, in the order a
        replay of the journal would reach it.

        Only for a machine whose parked outcome was committed, and whose journal no
        one has advanced since (the worker's cache checks both).
        """
        assert self.outcome is not None and self.outcome.status in PARKED_STATUSES, self.outcome
        self.run, self.tasks = run, tasks
        self.consumed_tasks, self.delivered = set(), set()
        self.claimed = frozenset(t.id for t in tasks)
        self.writes = self._new_writes()
        self.park_status = RunStatus.PARKED
        self.outcome = None
        self._mailbox = None if signals is None else list(signals)
        self._updates = list(updates or [])
        self._loaded = len(self.entries)
        # (wait_until's register again as they are examined.)
        self._conditions = []
        parked, self._parked = self._parked, []
        self._live.extend(sorted(parked, key=_journal_order))
        self._run()

    @property
    def parked(self) -> bool:
        """Whether the machine parked (it may be kept and woken, see :meth:`wake`)."""
        return self.outcome is not None and self.outcome.status in PARKED_STATUSES

    @property
    def waiting(self) -> list[JournalEntry]:
        """The journal entries of the waits the run parked on, in journal order."""
        entries = [op.entry for op in self._parked if op.entry is not None]
        return sorted(entries, key=lambda e: e.pos)

    @property
    def history_crossed(self) -> bool:
        """Whether this advance took the journal past :attr:`history_threshold`."""
        return self._loaded <= self.history_threshold < len(self.entries)

    def take_requests(self) -> list[tuple[Token, Request]]:
        """The requests made since the last call, each with the token to answer it by."""
        requests, self._requests = self._requests, []
        return requests

    def resume(self, token: Token, answer: Any) -> None:
        """Answer the request of ``token`` and go on."""
        self._outstanding -= 1
        token.requested = False
        gen = token.gen
        assert gen is not None, "an answer to no request"
        self._pump(token, gen, answer)
        self._run()

    def close(self) -> None:
        """Let go of the workflow's coroutines (their ``finally`` blocks run)."""
        for branch in self._branches():
            close_branch(branch)

    # -- scheduling --------------------------------------------------------------------------

    def _run(self) -> None:
        """Advance what can be advanced: the branches that have an answer, then the
        journal's next entry, then the operations past the journal."""
        while self.outcome is None:
            if self._ready:
                self._advance(*self._ready.popleft())
            elif self._cursor < len(self._schedule):
                if not self._replay_next():
                    return  # a branch waits on an answer before it can reach that entry
            elif self._live:
                self._carry_out(self._live.popleft())
            elif self._outstanding:
                return  # the driver answers
            elif self._holding_back and self._root is not None:
                self._stop_now()  # (the run stops: it has replayed all it had)
            elif not self._when_quiet():
                self.outcome = self._stranded() or Outcome(self.park_status)

    def _advance(self, branch: Branch, send: Any, throw: BaseException | None) -> None:
        """Run ``branch`` until it awaits an operation, or ends.

        A step whose result the journal's next entry records is answered here, and
        the branch goes on at once (see :meth:`_replayed_step`).
        """
        if branch.done or branch.withdrawn:
            return
        while True:
            self._current = branch
            commands.driving += 1
            try:
                yielded = branch.coro.throw(throw) if throw is not None else branch.coro.send(send)
            except StopIteration as stop:
                self._ended(branch, stop.value, None)
                return
            except ContinueAsNew as cont:
                if self.held is not None:
                    self._hold(self.held)
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
                self._current = None
            if self.held is None and type(yielded) is StepCmd and not self._ready:
                entry = self._replayed_step(branch, yielded)
                if entry is not None:
                    try:
                        send, throw = _json.loads(entry.value), None
                    except Exception as exc:  # (as _apply answers it)
                        send, throw = None, exc
                    continue
            break
        if self.held is not None:
            self._hold(self.held)
        elif isinstance(yielded, Command):
            self._issue(branch, yielded)
        elif yielded is None:  # a bare `await asyncio.sleep(0)`: nothing to wait for
            self._ready.append((branch, None, None))
        elif isinstance(yielded, asyncio.Future):
            # A plain asyncio awaitable (an event, a lock, asyncio.sleep): awaited as
            # it is, not journaled, so it must not decide what the workflow does.
            # (ctx operations inside asyncio tasks are refused: see Command.)
            op = Pending(branch, -1, cast(Command, None), None)
            branch.blocked = op
            self._pump(op, _await(yielded), None)
        else:
            error = WorkflowUsageError(
                f"workflow {self.wf.name!r} awaited {yielded!r}; workflows may only await "
                "ctx operations (put other I/O inside ctx.step)"
            )
            self._ready.append((branch, None, error))

    def _replayed_step(self, branch: Branch, cmd: StepCmd) -> JournalEntry | None:
        """The journal entry that answers ``cmd`` at once, taken, if it is the usual
        one: the step's own entry, done, and the next the journal applies.

        Replaying a long journal is mostly this, and it is what :meth:`_issue`,
        :meth:`_apply` and :meth:`_answer` would do for it, without the operation
        they track or the turn of :meth:`_run` between the answer and the branch
        going on (the branch's answer would be the only one ready). ``None``: any
        other case, which :meth:`_issue` takes (a different operation there holds
        the run).
        """
        index, cursor = branch.index, self._cursor
        if index >= len(branch.entries) or cursor >= len(self._schedule):
            return None
        entry = branch.entries[index]
        if (
            entry is not self._schedule[cursor]
            or entry.state != EntryState.DONE
            or entry.kind != EntryKind.STEP
            or entry.name != cmd.name
        ):
            return None
        branch.index = index + 1
        self.reached += 1
        self._cursor = cursor + 1
        return entry

    def _issue(self, branch: Branch, cmd: Command) -> None:
        """``branch`` awaits ``cmd``: match it with its journal entry, if it has one."""
        try:
            entry = self._next_entry(branch, cmd.entry_kind(), cmd.name)
        except NonDeterminismError as exc:
            self._hold(exc)
            return
        op = Pending(branch, branch.index - 1, cmd, entry)
        branch.blocked = op
        if entry is None:
            if self._cursor < len(self._schedule):
                self._live.append(op)  # carried out once the journal is replayed
            else:
                self._carry_out(op)
        elif self._cursor < len(self._schedule) and self._schedule[self._cursor] is entry:
            self._cursor += 1  # (the usual case: the very next entry)
            self._apply(op)
        else:
            self._waiting[entry.pos] = op

    def _replay_next(self) -> bool:
        """Apply the journal's next entry; ``False`` if it must wait for an answer."""
        entry = self._schedule[self._cursor]
        if entry.pos in self._applied:
            self._cursor += 1
            return True
        op = self._waiting.pop(entry.pos, None)
        if op is None:
            if self._outstanding:
                return False
            self._cursor += 1
            if entry.branch == STOP_BRANCH:
                if not self._unwound and not self._compensating:
                    self._unwind()  # (where the run stopped before: it stops there again)
                return True
            if entry.kind == EntryKind.UPDATE and entry.branch == UPDATES:
                self._replay_update(entry)  # an update applied here the first time
                return True
            if entry.state != EntryState.WITHDRAWN and not self._in_withdrawn(entry.branch):
                self._hold(
                    NonDeterminismError(
                        self.run.id, entry.pos, f"{entry.kind} {entry.name!r}",
                        "no such operation (the workflow now waits elsewhere, or has ended)",
                    )
                )  # fmt: skip
            return True
        self._cursor += 1
        self._apply(op)
        return True

    def _apply(self, op: Pending) -> None:
        """Give ``op`` the result its journal entry records (a pending one: later)."""
        entry = op.entry
        assert entry is not None
        if entry.state == EntryState.PENDING:
            self._live.append(op)  # re-examined once the journal is replayed
            return
        try:
            value = self._replay(op)
        except NonDeterminismError as exc:
            self._hold(exc)
        except Exception as exc:
            self._answer(op, None, exc)
        else:
            if value is not LATER:
                self._answer(op, value, None)

    def _carry_out(self, op: Pending) -> None:
        """Carry out ``op`` now (its journal has no result for it)."""
        if op.branch.withdrawn:
            return
        self._check_deadline()
        if self._holding_back:  # (the run stops: nothing new is done)
            self._parked.append(op)
            return
        try:
            result = self._live_op(op)
        except Park:
            self._parked.append(op)
        except NonDeterminismError as exc:
            self._hold(exc)
        except Exception as exc:  # errors meant for the workflow (StepFailedError...)
            self._answer(op, None, exc)
        else:
            if isinstance(result, GeneratorType):
                self._pump(op, cast(Op, result), None)
            elif result is not LATER:
                self._answer(op, result, None)

    def _pump(self, op: Pending, gen: Op, answer: Any) -> None:
        """Send ``answer`` into ``op``'s handler; it asks for more, or finishes."""
        try:
            request = gen.send(answer)
        except StopIteration as stop:
            op.gen = None
            self._answer(op, stop.value, None)
        except Park:
            op.gen = None
            self._parked.append(op)
        except NonDeterminismError as exc:
            self._hold(exc)
        except Exception as exc:
            op.gen = None
            self._answer(op, None, exc)
        else:
            op.gen, op.requested = gen, True
            self._outstanding += 1
            self._requests.append((op, request))

    def _answer(self, op: Pending, value: Any, error: BaseException | None) -> None:
        """``op`` is over: its branch goes on with ``value`` (or ``error`` raised)."""
        branch = op.branch
        branch.blocked = None
        if branch.withdrawn:
            # (Its gather taken first: closing the branch cuts it from its group, and
            # a group never told its last step settled never answers: the run parked
            # on nothing when a sibling's failure came before this step's result.)
            group = branch.group
            close_branch(branch)
            self._withdrawn_settled(branch, group)
            return
        self._ready.append((branch, value, error))

    def _ended(self, branch: Branch, value: Any, error: BaseException | None) -> None:
        branch.done = True
        if self.held is not None:  # (ctx.now() found the journal otherwise)
            self._hold(self.held)
            return
        if branch.update_id is not None:
            self._update_ended(branch, value, error)
            return
        if error is None and branch.index < len(branch.entries):
            entry = branch.entries[branch.index]
            ending = "the workflow returning" if branch is self._root else "its branch returning"
            self._hold(
                NonDeterminismError(self.run.id, entry.pos, f"{entry.kind} {entry.name!r}", ending)
            )
            return
        if branch is self._root:
            self.outcome = self._ending(error) if error is not None else self._completed(value)
        else:
            self._branch_ended(branch, value, error)

    def _continued(self, cont: ContinueAsNew) -> None:
        try:
            data = _json.dumps(cont.input, "the input passed to ctx.continue_as_new")
        except SerializationError as exc:
            self.outcome = self._failed(exc)
            return
        self.outcome = Outcome(Ending.CONTINUED, new_input=data)

    def _hold(self, exc: NonDeterminismError) -> None:
        self.held = exc
        log.error("%s", exc)
        self.outcome = Outcome(RunStatus.HELD, error=error_dict(exc))

    def _replay(self, op: Pending) -> Any:
        """The result ``op``'s (done or error) journal entry records."""
        cmd, entry = op.cmd, op.entry
        assert entry is not None
        if isinstance(cmd, GatherCmd):
            return self._gather(op, cmd)
        if isinstance(cmd, FirstCmd) and entry.state == EntryState.DONE:
            first = _json.loads(entry.value)
            return first["name"], first["value"]
        return self._replay_plain(op)

    def _live_op(self, op: Pending) -> Any:
        cmd = op.cmd
        if isinstance(cmd, GatherCmd):
            return self._gather(op, cmd)
        if isinstance(cmd, FirstCmd):
            return self._first(op, cmd)
        if isinstance(cmd, WaitUntilCmd):
            return self._wait_until(op, cmd)
        return self._live_plain(op)

    def _when_quiet(self) -> bool:
        """Every branch waits on an input: whether anything goes on after all (an
        update's handler, a ``wait_until`` whose predicate now holds)."""
        return self._handle_updates() or self._check_conditions()

    @property
    def unhandled_updates(self) -> bool:
        """Whether updates were given that the run did not get to (it ended, or went
        on as new, before it was quiet)."""
        return any(u.id not in self._handled for u in self._updates)


def _journal_order(op: Pending) -> int:
    """Where a replay of the journal reaches ``op``'s entry (see ``_schedule``)."""
    entry = op.entry
    assert entry is not None
    return entry.pos if entry.seq is None else entry.seq


def _await(future: asyncio.Future[Any]) -> Op:
    yield AwaitFuture(future)
