"""What the replay machine's operations share: its state, and the journal's helpers.

The machine (:mod:`parkway.replay.machine`) schedules; its operations
(:mod:`parkway.replay.ops`, :mod:`parkway.replay.composite`) decide. Both read
and write the state declared here.
"""

from __future__ import annotations

import collections
import contextlib
import secrets
import uuid
from collections.abc import Callable
from typing import Any

from parkway import _json
from parkway.errors import NonDeterminismError, SerializationError, WorkflowUsageError
from parkway.events import Event
from parkway.models import RunStatus, error_dict, rebuild_error
from parkway.registry import Registry, WorkflowDef
from parkway.replay.branch import Branch, Op, Pending
from parkway.replay.writes import Outcome, Writes
from parkway.store.base import JournalEntry, NewTask, RunRecord, SignalRecord, TaskRecord
from parkway.store.people import TASK_OPEN, CallbackRecord, HumanTaskRecord, token_digest
from parkway.store.vocabulary import EntryKind, EntryState, TaskKind

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

    wf: WorkflowDef
    run: RunRecord
    tasks: list[TaskRecord]
    registry: Registry
    clock_now: Callable[[], float]
    prepare_event: Callable[[Event], tuple[Event, bytes]]
    event_retention: float
    entries: dict[int, JournalEntry]
    next_pos: int
    writes: Writes
    consumed_tasks: set[int]
    claimed: frozenset[int]
    delivered: set[int]
    park_status: RunStatus
    held: NonDeterminismError | None
    _mailbox: list[SignalRecord] | None
    _by_branch: dict[str, list[JournalEntry]]
    _ready: Any
    _withdrawn_paths: list[str]
    _conditions: list[Pending]  # wait_until's parked, checked when the run is quiet
    _applied: set[int]  # entries answered out of order (side values, markers)
    # Kept as entries are journaled, so that nothing an advance asks of the journal
    # costs more as it grows (a cached run's resume must not): the positions of
    # the waits that may hold a delivery the run did not take, and the ids of
    # the events the run took.
    _holding: set[int]
    _event_ids: set[str]
    reached: int  # the operations the code has reached so far (ctx.history_length)
    _root: Branch | None
    _current: Branch | None  # the branch whose code runs now
    _waiting: dict[int, Pending]  # issued, their entry not reached yet
    _live: collections.deque[Pending]  # after the journal
    _parked: list[Pending]  # waiting on an input that has not come
    _requests: list[tuple[Pending, Any]]

    # The scheduler's side, which operations call.
    def _answer(self, op: Pending, value: Any, error: BaseException | None) -> None:
        raise NotImplementedError

    def _pump(self, op: Pending, gen: Op, answer: Any) -> None:
        raise NotImplementedError

    # -- the branches' lines through the journal ------------------------------------------

    def _next_entry(self, branch: Branch, kind: str, name: str) -> JournalEntry | None:
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

    def _branch_now(self) -> Branch:
        branch = self._current
        if branch is None:
            raise WorkflowUsageError(
                "ctx.now(), ctx.uuid() and ctx.random() may only be called from the "
                "workflow's own code while it runs"
            )
        return branch

    def _in_withdrawn(self, path: str | None) -> bool:
        return path is not None and any(
            path == p or path.startswith(p + "/") for p in self._withdrawn_paths
        )

    def _branches(self) -> list[Branch]:
        seen = [self._root] if self._root is not None else []
        for op in [*self._waiting.values(), *self._live, *self._parked]:
            seen.append(op.branch)
        seen.extend(branch for branch, _, _ in self._ready)
        for token, _ in self._requests:
            seen.append(token.branch)
        return list(dict.fromkeys(seen))

    def _unpark(self, op: Pending) -> None:
        if op in self._parked:
            self._parked.remove(op)

    def _forget(self, op: Pending) -> None:
        """``op`` will never be answered (its branch was withdrawn)."""
        if op.entry is not None and self._waiting.get(op.entry.pos) is op:
            del self._waiting[op.entry.pos]
        if op in self._live:
            self._live.remove(op)
        if op in self._parked:
            self._parked.remove(op)

    def _close_branch(self, branch: Branch) -> None:
        close_branch(branch)

    # -- what ctx.now()/uuid()/random() and ctx.patched() call ----------------------------

    def side(self, name: str, produce: Callable[[], Any]) -> Any:
        branch = self._branch_now()
        entry = self._next_entry(branch, EntryKind.VALUE, name)
        if entry is not None:
            self._applied.add(entry.pos)
            return _json.loads(entry.value)
        value = produce()
        self._record_new(branch, EntryKind.VALUE, name, EntryState.DONE, _json.dumps(value))
        return value

    def open_callback(self, timeout: float | None) -> dict[str, Any]:
        """``ctx.callback``: a new token (journaled: the same on every replay) and its
        row, which the commit writes before any step can hand the token out."""
        branch = self._branch_now()
        entry = self._next_entry(branch, EntryKind.VALUE, "callback")
        if entry is not None:
            self._applied.add(entry.pos)
            found: dict[str, Any] = _json.loads(entry.value)
            return found
        now = self.clock_now()
        # 256 random bits from the operating system: unguessable, so the token
        # alone may complete the callback, with no API token.
        token = secrets.token_urlsafe(32)
        signal = CALLBACK_SIGNAL + secrets.token_hex(8)
        deadline = None if timeout is None else now + timeout
        value = {"token": token, "signal": signal, "deadline": deadline}
        self._record_new(branch, EntryKind.VALUE, "callback", EntryState.DONE, _json.dumps(value))
        self.writes.callbacks.append(CallbackRecord(token_digest(token), self.run.id, signal, now))
        return value

    def open_task(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``ctx.human_task``: a new task (its id journaled) and its row."""
        branch = self._branch_now()
        entry = self._next_entry(branch, EntryKind.VALUE, "human_task")
        if entry is not None:
            self._applied.add(entry.pos)
            found: dict[str, Any] = _json.loads(entry.value)
            return found
        now = self.clock_now()
        task_id = str(uuid.uuid4())
        signal = TASK_SIGNAL + task_id
        timeout = spec["timeout"]
        deadline = None if timeout is None else now + timeout
        form = spec["form_schema"]
        record = HumanTaskRecord(
            task_id, self.run.id, self.run.workflow, spec["name"], spec["title"],
            None if form is None else _json.dumps(form), spec["form_model"],
            _json.dumps(spec["data"], "the data of a human task"),
            _json.dumps(list(spec["assignees"])).decode(), signal, TASK_OPEN, now, deadline,
        )  # fmt: skip
        value = {"id": task_id, "name": spec["name"], "signal": signal, "deadline": deadline}
        self._record_new(branch, EntryKind.VALUE, "human_task", EntryState.DONE, _json.dumps(value))
        self.writes.human_tasks.append(record)
        return value

    def patched(self, change_id: str, *, deprecated: bool = False) -> bool:
        branch = self._branch_now()
        if branch.index < len(branch.entries):  # replaying: the journal decides
            entry = branch.entries[branch.index]
            if entry.kind == EntryKind.PATCH and entry.name == change_id:
                branch.index += 1
                self.reached += 1
                self._applied.add(entry.pos)
                return True
            return False
        if deprecated:
            return True
        self._record_new(branch, EntryKind.PATCH, change_id, EntryState.DONE, b"true")
        branch.index += 1
        self.reached += 1
        return True

    # -- the journal -------------------------------------------------------------------------

    def _alloc(self) -> int:
        """A position no entry of this generation has."""
        pos = self.next_pos
        self.next_pos += 1
        return pos

    def _record(
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
                seq = self._alloc()
        elif pos is None and op.reserved is not None:
            # A step answered after entries taken since its start records the order of
            # its answer, as an operation answered late does.
            pos = op.reserved
            if pos != self.next_pos - 1:
                seq = self._alloc()
        elif pos is None:
            pos = self._alloc()
        entry = JournalEntry(
            pos, kind, op.cmd.name, state, value, deadline, self.clock_now(),
            op.branch.journal_path, seq,
        )  # fmt: skip
        op.entry = entry
        self._keep(entry)
        self.writes.journal[pos] = entry
        return entry

    def _record_new(
        self, branch: Branch, kind: str, name: str, state: str, value: bytes | None
    ) -> JournalEntry:
        """Journal an operation answered at once (a side value, a marker)."""
        pos = self._alloc()
        entry = JournalEntry(
            pos, kind, name, state, value, None, self.clock_now(), branch.journal_path
        )
        self._keep(entry)
        self.writes.journal[pos] = entry
        return entry

    def _keep(self, entry: JournalEntry) -> None:
        """``entry`` is the journal's at its position now."""
        self.entries[entry.pos] = entry
        if (
            entry.kind == EntryKind.MESSAGE and entry.state != EntryState.DONE
        ) or entry.kind == EntryKind.FIRST:
            self._holding.add(entry.pos)
        else:
            self._holding.discard(entry.pos)
        if entry.kind == EntryKind.EVENT and entry.state == EntryState.DONE:
            self._event_ids.add(_json.loads(entry.value)["event"]["id"])

    @staticmethod
    def _deadline(
        entry: JournalEntry | None, timeout: float | None, now: float
    ) -> tuple[float | None, float | None]:
        """A wait's deadline and timeout: fixed when it was first reached, kept on replay."""
        if entry is not None:
            return entry.deadline, _json.loads(entry.value).get("timeout")
        return (None if timeout is None else now + timeout), timeout

    def _resolve(self, op: Pending, kind: str, value: bytes) -> None:
        """Journal a wait's input; a wait parked earlier also loses its timer."""
        parked = op.entry
        entry = self._record(op, kind, EntryState.DONE, value)
        # A signal wait without a timeout left nothing behind to clean up: no timer
        # and no subscription (its signal task carries no position).
        if parked is not None and (kind != EntryKind.SIGNAL or parked.deadline is not None):
            self.writes.finished_waits.append(entry.pos)

    def _park(self, op: Pending, kind: str, info: dict[str, Any], deadline: float | None) -> int:
        """Journal a wait as pending, with a timer task at its deadline if it has one.

        ``info`` is what the wait is (its timeout, match, key...): what it leaves
        out (``None``) is not written, as a parked run's bytes count by the million.
        """
        value = {key: item for key, item in info.items() if item is not None}
        entry = self._record(op, kind, EntryState.PENDING, _json.dumps(value), deadline)
        if deadline is not None:
            self.writes.tasks.append(NewTask(self.run.id, deadline, TaskKind.TIMER, entry.pos))
        return entry.pos

    def _fail_op(self, op: Pending, kind: str, exc: Exception, waited: bool) -> Exception:
        entry = self._record(op, kind, EntryState.ERROR, _json.dumps(error_dict(exc)))
        if waited:
            self.writes.finished_waits.append(entry.pos)
        return exc

    @staticmethod
    def _replayed(entry: JournalEntry) -> Any:
        if entry.state == EntryState.DONE:
            return _json.loads(entry.value)
        raise rebuild_error(_json.loads(entry.value))

    @staticmethod
    def _subscription_ttl(timeout: float | None, ttl: float | None = None) -> float:
        if ttl is not None:
            return ttl
        return (timeout + TTL_PAST_TIMEOUT) if timeout is not None else TTL_WITHOUT_TIMEOUT

    def _backing_off(self) -> None:
        """The run waits on a retry's backoff: it stays ``running`` meanwhile."""
        self.park_status = RunStatus.RUNNING

    # -- what is decided ---------------------------------------------------------------

    def take_writes(self) -> Writes:
        """The writes to commit now; the machine buffers anew after them."""
        writes, self.writes = self.writes, self._new_writes()
        return writes

    @property
    def may_hold_deliveries(self) -> bool:
        """Whether a message may have reached the run that it did not take: one of its
        message waits did not end with a delivery (it is pending, or timed out). A
        wait that took its delivery cannot have another: its subscription went
        with the first."""
        return bool(self._holding)

    def _completed(self, value: Any) -> Outcome:
        try:
            data = _json.dumps(value, f"the output of workflow {self.wf.name!r}")
        except SerializationError as exc:
            return self._failed(exc)
        return Outcome(RunStatus.COMPLETED, output=data)

    def _failed(self, exc: BaseException) -> Outcome:
        return Outcome(RunStatus.FAILED, error=error_dict(exc, with_traceback=True))

    def _new_writes(self) -> Writes:
        return Writes(
            self.run.id, consumed_tasks=self.consumed_tasks, claimed_tasks=self.claimed,
            delivered=self.delivered,
        )  # fmt: skip


def close_branch(branch: Branch) -> None:
    """Let go of ``branch``'s coroutine (a ``finally`` that awaits again is cut short)."""
    with contextlib.suppress(RuntimeError):  # it awaited again on its way out
        branch.coro.close()
    # A parked branch and the operation it waits on refer to each other: a cycle that
    # only the cyclic collector frees. Cut here, a closed machine goes by reference
    # counting; left, every evicted or replaced parked run was garbage for a full
    # collection, whose pause grows with the heap and lands on the tail latency
    # of every resume under load.
    op, branch.blocked, branch.group = branch.blocked, None, None
    if op is not None:
        group, op.group, op.gen = op.group, None, None
        if group is not None:  # (a gather: it and its parent operation, likewise)
            group.branches = []
