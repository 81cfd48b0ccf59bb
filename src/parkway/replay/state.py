"""The state of one advance of a run, and how its operations journal what they decide.

:class:`MachineState` is data: what the worker loaded (the run, its journal, its
due tasks, maybe its mailbox), where the code stands in the journal, the
operations waiting, and the writes decided so far. The machine
(:mod:`parkway.replay.machine`) schedules over it; the operations
(:mod:`parkway.replay.ops`, :mod:`parkway.replay.waits`,
:mod:`parkway.replay.composite`, :mod:`parkway.replay.sagas`,
:mod:`parkway.replay.updates`, :mod:`parkway.replay.sides`) are given it and
journal through its methods.
"""

from __future__ import annotations

import collections
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from parkway import _json
from parkway.errors import NonDeterminismError, SerializationError, WorkflowUsageError
from parkway.events import Event
from parkway.models import RunStatus, error_dict, rebuild_error
from parkway.registry import Registry, WorkflowDef
from parkway.replay.branch import ROOT, Branch, Pending
from parkway.replay.requests import Request
from parkway.replay.writes import Outcome, Writes
from parkway.store.base import JournalEntry, NewTask, RunRecord, SignalRecord, TaskRecord
from parkway.store.vocabulary import EntryKind, EntryState, TaskKind

log = logging.getLogger("parkway.replay")

# A subscription's safety-net lifetime beyond its wait's timeout, and without one.
TTL_PAST_TIMEOUT = 86400.0
TTL_WITHOUT_TIMEOUT = 90 * 86400.0


# The signals only a callback's completion or a human task's sends the run: a unit
# separator (U+001F), which no caller's signal name may hold, begins their names.
CALLBACK_SIGNAL = "\x1fcallback:"
TASK_SIGNAL = "\x1ftask:"


def wait_named(kind: str, name: str) -> tuple[str, str]:
    """A journal entry's kind and name as people read them: a callback's or a human
    task's wait (a signal under a name of its own) as ``callback``/``task`` and its id."""
    if kind == EntryKind.SIGNAL:
        if name.startswith(CALLBACK_SIGNAL):
            return "callback", name[len(CALLBACK_SIGNAL) :]
        if name.startswith(TASK_SIGNAL):
            return "task", name[len(TASK_SIGNAL) :]
    return kind, name


class Park(Exception):
    """Internal: the operation waits on an input that has not arrived."""


# An operation that answers later, not when it is carried out (a gather).
LATER = object()


class MachineState:
    """The state of one advance, and how operations journal what they decide."""

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
        signals: list[SignalRecord] | None,
        history_threshold: int,
        public_url: str | None,
    ) -> None:
        self.wf, self.run = wf, run
        self.public_url = public_url
        self.tasks = tasks
        self.registry = registry
        self.clock_now = clock
        self.prepare_event = prepare_event
        self.event_retention = event_retention
        self.history_threshold = history_threshold
        self.entries: dict[int, JournalEntry] = {}
        # Kept as entries are journaled, so that nothing an advance asks of the journal
        # costs more as it grows (a cached run's resume must not): the positions of
        # the waits that may hold a delivery the run did not take, and the ids of
        # the events the run took.
        self.holding: set[int] = set()
        self.event_ids: set[str] = set()
        # One pass over the journal (a replay's may hold thousands of entries): each
        # kept, and whether it came in position order (a store's does) with no entry
        # applied out of it (seq), which spares the sorts below.
        last, sorted_by_pos, reordered = -1, True, False
        for entry in journal:
            self.keep(entry)
            if entry.pos <= last:
                sorted_by_pos = False
            last = entry.pos
            if entry.seq is not None:
                reordered = True
        self.reached = 0  # the operations the code has reached so far (ctx.history_length)
        in_order = list(journal) if sorted_by_pos else sorted(journal, key=lambda e: e.pos)
        by_branch: dict[str, list[JournalEntry]] = {ROOT: []}
        for entry in in_order:
            if entry.branch is None:
                by_branch[ROOT].append(entry)
            else:
                by_branch.setdefault(entry.branch, []).append(entry)
        self.by_branch = by_branch
        # Replay applies entries in the order their results were applied first.
        self.schedule: list[JournalEntry]
        if reordered:
            self.schedule = sorted(in_order, key=lambda e: e.pos if e.seq is None else e.seq)
            self.next_pos = 1 + max(e.pos if e.seq is None else max(e.pos, e.seq) for e in journal)
        else:
            self.schedule = in_order
            self.next_pos = 1 + (last if sorted_by_pos else max(self.entries))
        self.cursor = 0  # the schedule's next entry to apply
        self.applied: set[int] = set()  # entries answered out of order (side values, markers)
        self.waiting: dict[int, Pending] = {}  # issued, their entry not reached yet
        self.live: collections.deque[Pending] = collections.deque()  # after the journal
        self.parked: list[Pending] = []  # waiting on an input that has not come
        self.ready: collections.deque[tuple[Branch, Any, BaseException | None]] = (
            collections.deque()
        )
        self.requests: list[tuple[Pending, Request]] = []
        self.outstanding = 0  # requests handed out and not answered yet
        self.withdrawn_paths: list[str] = []
        self.conditions: list[Pending] = []  # wait_until's parked, checked when quiet
        self.consumed_tasks: set[int] = set()
        self.claimed = frozenset(t.id for t in tasks)
        self.delivered: set[int] = set()
        self.writes = self.new_writes()
        self.park_status = RunStatus.PARKED
        self.held: NonDeterminismError | None = None
        self.outcome: Outcome | None = None
        # The run's mailbox, read once per advance (None: not yet).
        self.mailbox: list[SignalRecord] | None = None if signals is None else list(signals)
        self.root: Branch | None = None
        self.current: Branch | None = None  # the branch whose code runs now
        self.loaded = len(self.entries)

    # -- the branches' lines through the journal ------------------------------------------

    def next_entry(self, branch: Branch, kind: str, name: str) -> JournalEntry | None:
        """The journal entry of ``branch``'s next operation (``None`` past its journal);
        a different operation there holds the run."""
        index = branch.index
        branch.index += 1
        self.reached += 1
        if index >= len(branch.entries):
            return None
        entry = branch.entries[index]
        if entry.kind != kind or entry.name != name:
            self.held = NonDeterminismError(
                self.run.id, entry.pos, f"{entry.kind} {entry.name!r}", f"{kind} {name!r}"
            )
            raise self.held
        return entry

    def branch_now(self) -> Branch:
        """The branch whose code runs now (``ctx.now()`` and the like are called there)."""
        branch = self.current
        if branch is None:
            raise WorkflowUsageError(
                "ctx.now(), ctx.uuid() and ctx.random() may only be called from the "
                "workflow's own code while it runs"
            )
        return branch

    def in_withdrawn(self, path: str | None) -> bool:
        """Whether ``path`` is a withdrawn branch's, or nested in one."""
        return path is not None and any(
            path == p or path.startswith(p + "/") for p in self.withdrawn_paths
        )

    def branches(self) -> list[Branch]:
        """Every branch the machine knows of, the workflow's own first."""
        seen = [self.root] if self.root is not None else []
        for op in [*self.waiting.values(), *self.live, *self.parked]:
            seen.append(op.branch)
        seen.extend(branch for branch, _, _ in self.ready)
        for token, _ in self.requests:
            seen.append(token.branch)
        return list(dict.fromkeys(seen))

    def unpark(self, op: Pending) -> None:
        if op in self.parked:
            self.parked.remove(op)

    def forget(self, op: Pending) -> None:
        """``op`` will never be answered (its branch was withdrawn)."""
        if op.entry is not None and self.waiting.get(op.entry.pos) is op:
            del self.waiting[op.entry.pos]
        if op in self.live:
            self.live.remove(op)
        if op in self.parked:
            self.parked.remove(op)

    def hold(self, exc: NonDeterminismError) -> None:
        """The code no longer replays its journal: the run is held."""
        self.held = exc
        log.error("%s", exc)
        self.outcome = Outcome(RunStatus.HELD, error=error_dict(exc))

    # -- the journal -------------------------------------------------------------------------

    def alloc(self) -> int:
        """A position no entry of this generation has."""
        pos = self.next_pos
        self.next_pos += 1
        return pos

    def record(
        self,
        op: Pending,
        kind: str,
        state: str,
        value: bytes | None,
        deadline: float | None = None,
        *,
        pos: int | None = None,
    ) -> JournalEntry:
        """Journal ``op`` (at its entry's position, or a new one): the first record of
        an operation takes the next position; an operation answered after later
        entries were journaled keeps its position and records the order of its
        answer (``seq``)."""
        if kind == EntryKind.STEP:  # (a compensation is journaled as a step of its own kind)
            kind = op.cmd.kind
        old = op.entry
        seq = None
        if old is not None:
            pos = old.pos
            if old.seq is not None or pos != self.next_pos - 1:
                seq = self.alloc()
        elif pos is None and op.reserved is not None:
            # A step answered after entries taken since its start records the order of
            # its answer, as an operation answered late does.
            pos = op.reserved
            if pos != self.next_pos - 1:
                seq = self.alloc()
        elif pos is None:
            pos = self.alloc()
        entry = JournalEntry(
            pos,
            kind,
            op.cmd.name,
            state,
            value,
            deadline,
            self.clock_now(),
            op.branch.journal_path,
            seq,
        )
        op.entry = entry
        self.keep(entry)
        self.writes.journal[pos] = entry
        return entry

    def record_new(
        self, branch: Branch, kind: str, name: str, state: str, value: bytes | None
    ) -> JournalEntry:
        """Journal an operation answered at once (a side value, a marker)."""
        pos = self.alloc()
        entry = JournalEntry(
            pos, kind, name, state, value, None, self.clock_now(), branch.journal_path
        )
        self.keep(entry)
        self.writes.journal[pos] = entry
        return entry

    def keep(self, entry: JournalEntry) -> None:
        """``entry`` is the journal's at its position now."""
        self.entries[entry.pos] = entry
        if (
            entry.kind == EntryKind.MESSAGE and entry.state != EntryState.DONE
        ) or entry.kind == EntryKind.FIRST:
            self.holding.add(entry.pos)
        else:
            self.holding.discard(entry.pos)
        if entry.kind == EntryKind.EVENT and entry.state == EntryState.DONE:
            self.event_ids.add(_json.loads(entry.value)["event"]["id"])

    def resolve(self, op: Pending, kind: str, value: bytes) -> None:
        """Journal a wait's input; a wait parked earlier also loses its timer."""
        parked = op.entry
        entry = self.record(op, kind, EntryState.DONE, value)
        # A signal wait without a timeout left nothing behind to clean up: no timer
        # and no subscription (its signal task carries no position).
        if parked is not None and (kind != EntryKind.SIGNAL or parked.deadline is not None):
            self.writes.finished_waits.append(entry.pos)

    def park(self, op: Pending, kind: str, info: dict[str, Any], deadline: float | None) -> int:
        """Journal a wait as pending, with a timer task at its deadline if it has one.

        ``info`` is what the wait is (its timeout, match, key...): what it leaves
        out (``None``) is not written, as a parked run's bytes count by the million.
        """
        value = {key: item for key, item in info.items() if item is not None}
        entry = self.record(op, kind, EntryState.PENDING, _json.dumps(value), deadline)
        if deadline is not None:
            self.writes.tasks.append(NewTask(self.run.id, deadline, TaskKind.TIMER, entry.pos))
        return entry.pos

    def fail_op(self, op: Pending, kind: str, exc: Exception, waited: bool) -> Exception:
        """Journal ``op``'s failure; ``exc``, to raise (``waited``: its wait ends)."""
        entry = self.record(op, kind, EntryState.ERROR, _json.dumps(error_dict(exc)))
        if waited:
            self.writes.finished_waits.append(entry.pos)
        return exc

    def backing_off(self) -> None:
        """The run waits on a retry's backoff: it stays ``running`` meanwhile."""
        self.park_status = RunStatus.RUNNING

    # -- what is decided ---------------------------------------------------------------

    def take_writes(self) -> Writes:
        """The writes to commit now; the machine buffers anew after them."""
        writes, self.writes = self.writes, self.new_writes()
        return writes

    def new_writes(self) -> Writes:
        return Writes(
            self.run.id,
            consumed_tasks=self.consumed_tasks,
            claimed_tasks=self.claimed,
            delivered=self.delivered,
        )

    def completed(self, value: Any) -> Outcome:
        """The outcome of a workflow that returned ``value``."""
        try:
            data = _json.dumps(value, f"the output of workflow {self.wf.name!r}")
        except SerializationError as exc:
            return self.failed(exc)
        return Outcome(RunStatus.COMPLETED, output=data)

    def failed(self, exc: BaseException) -> Outcome:
        """The outcome of a workflow that raised ``exc``."""
        return Outcome(RunStatus.FAILED, error=error_dict(exc, with_traceback=True))


def wait_deadline(
    entry: JournalEntry | None, timeout: float | None, now: float
) -> tuple[float | None, float | None]:
    """A wait's deadline and timeout: fixed when it was first reached, kept on replay."""
    if entry is not None:
        return entry.deadline, _json.loads(entry.value).get("timeout")
    return (None if timeout is None else now + timeout), timeout


def replayed(entry: JournalEntry) -> Any:
    """The value a done entry records, or the error an error entry records, raised."""
    if entry.state == EntryState.DONE:
        return _json.loads(entry.value)
    raise rebuild_error(_json.loads(entry.value))


def subscription_ttl(timeout: float | None, ttl: float | None = None) -> float:
    """How long a wait's subscription may live at most (a safety net, see ``ttl``)."""
    if ttl is not None:
        return ttl
    return (timeout + TTL_PAST_TIMEOUT) if timeout is not None else TTL_WITHOUT_TIMEOUT


def close_branch(branch: Branch) -> None:
    """Let go of ``branch``'s coroutine (a ``finally`` that awaits again is cut short)."""
    with contextlib.suppress(RuntimeError):  # it awaited again on its way out
        branch.coro.close()
    # A parked branch and the operation it waits on refer to each other: a cycle that
    # only the cyclic collector frees. Cut here, a closed machine goes by reference
    # counting; left, every evicted or replaced parked run was garbage for a full
    # collection, whose pause grows with the heap and lands on the tail latency
    # of every resume under load (see docs/performance.md).
    op, branch.blocked, branch.group = branch.blocked, None, None
    if op is not None:
        group, op.group, op.gen = op.group, None, None
        if group is not None:  # (a gather: it and its parent operation, likewise)
            group.branches = []
