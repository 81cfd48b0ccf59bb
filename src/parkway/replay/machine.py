"""Deterministic replay, without I/O: a run's code driven against its journal.

A run is advanced by running its workflow function from the top. Each ``ctx``
operation takes the next journal position: an operation already in the
journal returns its recorded result without doing anything; the first one
past the journal is carried out (a wait checks its input, a step is handed to
the worker to run) and recorded. When the workflow reaches a wait whose input
is not there yet, the run parks; its next wake-up replays it again. Parking
therefore costs nothing (no coroutine, no thread is kept) and the store is the
only truth.

:class:`Machine` is a pure state machine over what the worker loaded (the run,
its journal, its due tasks, maybe its mailbox): it never touches the store.
Where it needs something it was not given, or something done, it stops and
says so with a request: :class:`RunStep` (run one attempt of a step),
:class:`Flush` (commit what was decided so far: a ``ctx.publish`` needs its
effects committed before its result is known), :class:`ReadMailbox`,
:class:`ReadRun`, :class:`ReadHolder`. The worker's driver
(:mod:`parkway.worker.advance`) does it and resumes the machine with the
answer. What the run decided accumulates in :attr:`Machine.writes` (see
:mod:`parkway.replay.writes`); how it ended is an :class:`Outcome`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from types import GeneratorType
from typing import Any, TypeAlias, cast

from parkway import _json
from parkway.errors import (
    DuplicateSubscriptionError,
    NonDeterminismError,
    RunCancelledError,
    RunNotFoundError,
    SerializationError,
    StepFailedError,
    WaitTimeoutError,
    WorkflowFailedError,
    WorkflowUsageError,
)
from parkway.events import Event, PublishResult
from parkway.matching import match_digest, shape_of
from parkway.models import ErrorInfo, Retry, RunStatus, error_dict, rebuild_error
from parkway.registry import Registry, WorkflowDef
from parkway.replay import commands
from parkway.replay.commands import (
    ChildResultCmd,
    Command,
    ContinueAsNew,
    EventCmd,
    MessageCmd,
    PublishCmd,
    SignalCmd,
    SleepCmd,
    StartChildCmd,
    StepCmd,
)
from parkway.replay.context import WorkflowContext
from parkway.replay.writes import EventWait, MessageWait, Outcome, Writes
from parkway.store.base import (
    MESSAGE_TASK,
    JournalEntry,
    NewTask,
    RunRecord,
    SignalRecord,
    SubscriptionRecord,
    TaskRecord,
)

log = logging.getLogger("parkway.replay")

NO_RETRY = Retry(max_attempts=1, backoff=0)
DELIVERY_KINDS = frozenset({"delivery", MESSAGE_TASK})
# A subscription's safety-net lifetime beyond its wait's timeout, and without one.
TTL_PAST_TIMEOUT = 86400.0
TTL_WITHOUT_TIMEOUT = 90 * 86400.0


# -- requests: what the machine needs done before it can go on ---------------------------------


@dataclass(frozen=True)
class RunStep:
    """Run one attempt of a step; resume with a :class:`StepResult`.

    Commit the writes first unless ``Writes.may_wait_for_commit``: every result
    before a step must be durable before its side effect starts.
    """

    cmd: StepCmd
    attempt: int


@dataclass(frozen=True)
class StepResult:
    """What an attempt of a step returned (``value``) or raised (``error``)."""

    value: Any = None
    error: BaseException | None = None


@dataclass(frozen=True)
class Flush:
    """Commit the writes so far (their publishes with them); resume with the journal
    entries the commit wrote for those publishes, by position."""


@dataclass(frozen=True)
class ReadMailbox:
    """Resume with the run's mailbox (its buffered signals, oldest first)."""


@dataclass(frozen=True)
class ReadRun:
    """Resume with the row of run ``run_id`` (``None`` if there is none)."""

    run_id: str


@dataclass(frozen=True)
class ReadHolder:
    """Resume with the live wait for message ``(name, key)``, if any."""

    name: str
    key: str


@dataclass(frozen=True)
class AwaitFuture:
    """Await ``future``, a plain asyncio awaitable the workflow awaited (an event, a
    lock, ``asyncio.sleep``); resume with ``None``. It is not journaled."""

    future: asyncio.Future[Any]


Request: TypeAlias = RunStep | Flush | ReadMailbox | ReadRun | ReadHolder | AwaitFuture
Op: TypeAlias = Generator[Request, Any, Any]


class Park(Exception):
    """Internal: the workflow reached a wait whose input has not arrived."""


class Machine:
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

    Call :meth:`start`, then :meth:`resume` with the answer to each request,
    until an :class:`Outcome` comes back. :attr:`writes` holds what is to be
    committed; :meth:`take_writes` hands it over at each commit.
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
    ) -> None:
        self.wf, self.run = wf, run
        self.entries = {e.pos: e for e in journal}
        self.journal_len = max(self.entries, default=-1) + 1
        self.tasks = tasks
        self.registry = registry
        self.clock_now = clock
        self.prepare_event = prepare_event
        self.event_retention = event_retention
        self.pos = 0
        self.consumed_tasks: set[int] = set()
        self.claimed = frozenset(t.id for t in tasks)
        self.delivered: set[int] = set()
        self.writes = self._new_writes()
        self.park_status = RunStatus.PARKED.value
        self.held: NonDeterminismError | None = None
        # The run's mailbox, read once per advance (None: not yet).
        self._mailbox: list[SignalRecord] | None = None if signals is None else list(signals)
        self._coro: Coroutine[Any, Any, Any] | None = None
        self._op: Op | None = None  # the operation waiting on a request's answer

    # -- what ctx.now()/uuid()/random() call -------------------------------------------------

    def side(self, name: str, produce: Callable[[], Any]) -> Any:
        pos, entry = self._begin("value", name)
        if entry is not None:
            return _json.loads(entry.value)
        value = produce()
        self._record(pos, "value", name, "done", _json.dumps(value))
        return value

    # -- driving -----------------------------------------------------------------------------

    def start(self) -> Request | Outcome:
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
        )
        try:
            arg = self.wf.model_validate(_json.loads(self.run.input))
            coro = self.wf.fn(ctx, arg)
        except Exception as exc:
            return self._failed(exc)
        if not inspect.iscoroutine(coro):
            return self._failed(
                WorkflowUsageError(f"workflow {self.wf.name!r} did not return a coroutine")
            )
        self._coro = coro
        return self._drive(None, None)

    def resume(self, answer: Any) -> Request | Outcome:
        """Go on with ``answer`` to the last request."""
        op, self._op = self._op, None
        if op is None:  # an AwaitFuture: the workflow itself goes on
            return self._drive(None, None)
        return self._continue(op, answer)

    def close(self) -> None:
        """Let go of the workflow's coroutine (its ``finally`` blocks run)."""
        if self._coro is not None:
            self._coro.close()
            self._coro = None

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
        return any(e.kind == "message" and e.state != "done" for e in self.entries.values())

    def _continue(self, op: Op, answer: Any) -> Request | Outcome:
        """Send ``answer`` into the operation ``op``, then drive on with what it gives."""
        try:
            request = op.send(answer)
        except StopIteration as stop:
            return self._drive(stop.value, None)
        except Park:
            return Outcome(self.park_status)
        except NonDeterminismError as exc:
            self.held = exc
            return self._held()
        except Exception as exc:  # errors meant for the workflow (StepFailedError...)
            return self._drive(None, exc)
        self._op = op
        return request

    def _drive(self, send: Any, throw: BaseException | None) -> Request | Outcome:
        coro = self._coro
        assert coro is not None
        while True:
            commands.driving += 1
            try:
                yielded = coro.throw(throw) if throw is not None else coro.send(send)
            except StopIteration as stop:
                return self._completed(stop.value)
            except ContinueAsNew as cont:
                if self.held:
                    return self._held()
                try:
                    data = _json.dumps(cont.input, "the input passed to ctx.continue_as_new")
                except SerializationError as exc:
                    return self._failed(exc)
                return Outcome("continued", new_input=data)
            except Exception as exc:
                return self._held() if self.held else self._failed(exc)
            finally:
                commands.driving -= 1
            send, throw = None, None
            if self.held:
                return self._held()
            if isinstance(yielded, Command):
                handler = _HANDLERS.get(type(yielded))
                if handler is None:
                    throw = WorkflowUsageError(f"unknown ctx operation {yielded!r}")
                    continue
                try:
                    result = handler(self, yielded)
                except Park:
                    return Outcome(self.park_status)
                except NonDeterminismError as exc:
                    self.held = exc
                    return self._held()
                except Exception as exc:  # errors meant for the workflow (StepFailedError...)
                    throw = exc
                    continue
                if isinstance(result, GeneratorType):
                    return self._continue(cast(Op, result), None)
                send = result
            elif yielded is None:  # a bare `await asyncio.sleep(0)`: nothing to wait for
                continue
            elif isinstance(yielded, asyncio.Future):
                # A plain asyncio awaitable (an event, a lock, asyncio.sleep): awaited
                # as it is, not journaled, so it must not decide what the workflow does.
                # (ctx operations inside asyncio tasks are refused: see Command.)
                return AwaitFuture(yielded)
            else:
                throw = WorkflowUsageError(
                    f"workflow {self.wf.name!r} awaited {yielded!r}; workflows may only await "
                    "ctx operations (put other I/O inside ctx.step)"
                )

    # -- journal helpers ---------------------------------------------------------------------

    def _begin(self, kind: str, name: str) -> tuple[int, JournalEntry | None]:
        pos = self.pos
        self.pos += 1
        entry = self.entries.get(pos)
        if entry is not None and (entry.kind != kind or entry.name != name):
            self.held = NonDeterminismError(
                self.run.id, pos, f"{entry.kind} {entry.name!r}", f"{kind} {name!r}"
            )
            raise self.held
        return pos, entry

    def _record(
        self,
        pos: int,
        kind: str,
        name: str,
        state: str,
        value: bytes | None,
        deadline: float | None = None,
    ) -> None:
        entry = JournalEntry(pos, kind, name, state, value, deadline, self.clock_now())
        self.entries[pos] = entry
        self.writes.journal[pos] = entry

    @staticmethod
    def _deadline(
        entry: JournalEntry | None, timeout: float | None, now: float
    ) -> tuple[float | None, float | None]:
        """A wait's deadline and timeout: fixed when it was first reached, kept on replay."""
        if entry is not None:
            return entry.deadline, _json.loads(entry.value)["timeout"]
        return (None if timeout is None else now + timeout), timeout

    def _resolve(
        self, pos: int, kind: str, name: str, value: bytes, entry: JournalEntry | None
    ) -> None:
        """Journal a wait's input; a wait parked earlier also loses its timer."""
        self._record(pos, kind, name, "done", value)
        # A signal wait without a timeout left nothing behind to clean up: no timer
        # and no subscription (its signal task carries no position).
        if entry is not None and (kind != "signal" or entry.deadline is not None):
            self.writes.finished_waits.append(pos)

    def _park(
        self, pos: int, kind: str, name: str, info: dict[str, Any], deadline: float | None
    ) -> None:
        """Journal a wait as pending, with a timer task at its deadline if it has one."""
        self._record(pos, kind, name, "pending", _json.dumps(info), deadline)
        if deadline is not None:
            self.writes.tasks.append(NewTask(self.run.id, deadline, "timer", pos))

    @staticmethod
    def _replayed(entry: JournalEntry) -> Any:
        if entry.state == "done":
            return _json.loads(entry.value)
        raise rebuild_error(_json.loads(entry.value))

    def _fail_op(self, pos: int, kind: str, name: str, exc: Exception, waited: bool) -> Exception:
        self._record(pos, kind, name, "error", _json.dumps(error_dict(exc)))
        if waited:
            self.writes.finished_waits.append(pos)
        return exc

    def _subscription_ttl(self, timeout: float | None, ttl: float | None = None) -> float:
        if ttl is not None:
            return ttl
        return (timeout + TTL_PAST_TIMEOUT) if timeout is not None else TTL_WITHOUT_TIMEOUT

    # -- operations --------------------------------------------------------------------------

    def _step(self, cmd: StepCmd) -> Op:
        pos, entry = self._begin("step", cmd.name)
        attempt = 1
        if entry is not None:
            if entry.state != "pending":
                return self._replayed(entry)
            if entry.deadline is not None and self.clock_now() < entry.deadline:
                self.park_status = RunStatus.RUNNING.value  # waiting out a retry backoff
                raise Park
            attempt = _json.loads(entry.value)["attempt"] + 1
        retry = cmd.retry or NO_RETRY
        while True:
            result: StepResult = yield RunStep(cmd, attempt)
            exc = result.error
            if exc is None:
                try:
                    data = _json.dumps(result.value, f"the result of step {cmd.name!r}")
                except SerializationError as error:
                    # Deterministic: retrying would give the same value again.
                    raise self._fail_op(
                        pos, "step", cmd.name,
                        StepFailedError(cmd.name, attempt, type(error).__name__, str(error)),
                        entry is not None,
                    ) from error  # fmt: skip
                self._record(pos, "step", cmd.name, "done", data)
                if entry is not None:
                    self.writes.finished_waits.append(pos)
                return _json.loads(data)
            log.info("run %s step %r attempt %d failed: %r", self.run.id, cmd.name, attempt, exc)
            if attempt < retry.max_attempts:
                delay = retry.delay(attempt)
                if delay <= 0:
                    attempt += 1
                    continue
                deadline = self.clock_now() + delay
                info = {"attempt": attempt, "error": error_dict(exc)}
                self._record(pos, "step", cmd.name, "pending", _json.dumps(info), deadline)
                self.writes.tasks.append(NewTask(self.run.id, deadline, "timer", pos))
                self.park_status = RunStatus.RUNNING.value
                raise Park from None
            failure = StepFailedError(cmd.name, attempt, type(exc).__name__, str(exc))
            raise self._fail_op(pos, "step", cmd.name, failure, entry is not None) from exc

    def _sleep(self, cmd: SleepCmd) -> None:
        pos, entry = self._begin("sleep", "sleep")
        if entry is not None and entry.state != "pending":
            return self._replayed(entry)  # type: ignore[no-any-return]
        now = self.clock_now()
        if entry is not None and entry.deadline is not None:
            deadline = entry.deadline
        else:
            deadline = cmd.until if cmd.until is not None else now + (cmd.seconds or 0.0)
        if now >= deadline:
            self._record(pos, "sleep", "sleep", "done", b"null")
            if entry is not None:
                self.writes.finished_waits.append(pos)
            return None
        if entry is None:
            self._record(pos, "sleep", "sleep", "pending", None, deadline)
            self.writes.tasks.append(NewTask(self.run.id, deadline, "timer", pos))
        raise Park

    def _signal(self, cmd: SignalCmd) -> Any:
        pos, entry = self._begin("signal", cmd.name)
        if entry is not None and entry.state != "pending":
            return self._replayed(entry)
        return self._signal_live(pos, entry, cmd)

    def _signal_live(self, pos: int, entry: JournalEntry | None, cmd: SignalCmd) -> Op:
        now = self.clock_now()
        deadline, timeout = self._deadline(entry, cmd.timeout, now)
        if self._mailbox is None:
            self._mailbox = yield ReadMailbox()
        signal = self._take_signal(cmd.name)
        if signal is not None:
            self._resolve(pos, "signal", cmd.name, signal.payload or b"null", entry)
            self.writes.consumed_signals.append(signal.id)
            return _json.loads(signal.payload)
        if deadline is not None and now >= deadline:
            error = WaitTimeoutError(f"wait_for_signal({cmd.name!r})", timeout or 0.0)
            raise self._fail_op(pos, "signal", cmd.name, error, entry is not None)
        if entry is None:
            self._park(pos, "signal", cmd.name, {"timeout": timeout}, deadline)
        raise Park

    def _take_signal(self, name: str) -> SignalRecord | None:
        assert self._mailbox is not None
        for signal in self._mailbox:
            if signal.name == name:
                self._mailbox.remove(signal)
                return signal
        return None

    def _start_child(self, cmd: StartChildCmd) -> str:
        kind = "child.start" if cmd.trigger is None else "run.start"
        pos, entry = self._begin(kind, cmd.name)
        if entry is not None:
            return self._replayed(entry)  # type: ignore[no-any-return]
        wf = self.registry.latest(cmd.name)
        data = _json.dumps(wf.check_input(cmd.input), f"the input of workflow {cmd.name!r}")
        domain, subject = self.run.domain, self.run.subject
        parent: str | None = self.run.id
        trigger: bytes | None = None
        if cmd.trigger is not None:
            child_id = f"evt:{cmd.trigger['id']}:{wf.name}"
            domain, subject = cmd.trigger["domain"], cmd.trigger["subject"]
            parent, trigger = None, _json.dumps(cmd.trigger)
        else:
            child_id = cmd.run_id or (
                f"{self.run.id}/{pos}" if not self.run.generation
                else f"{self.run.id}/g{self.run.generation}/{pos}"
            )  # fmt: skip
        now = self.clock_now()
        self.writes.runs.append(
            RunRecord(
                id=child_id, workflow=wf.name, version=wf.version,
                status=RunStatus.PENDING.value, input=data, output=None, error=None,
                domain=domain, subject=subject, parent_id=parent,
                trigger=trigger, generation=0, created_at=now, updated_at=now,
            )
        )  # fmt: skip
        self.writes.tasks.append(NewTask(child_id, now, "start"))
        self._record(pos, kind, cmd.name, "done", _json.dumps(child_id))
        return child_id

    def _event(self, cmd: EventCmd) -> Any:
        pos, entry = self._begin("event", cmd.name)
        if entry is not None and entry.state == "done":
            return _json.loads(entry.value)["event"]["payload"]
        if entry is not None and entry.state == "error":
            return self._replayed(entry)
        now = self.clock_now()
        deadline, timeout = self._deadline(entry, cmd.timeout, now)
        envelope = self._delivery(pos, deadline)
        if envelope is not None:
            self._resolve(pos, "event", cmd.name, _json.dumps({"event": envelope}), entry)
            return envelope["payload"]
        if deadline is not None and now >= deadline:
            error = WaitTimeoutError(f"wait_for_event({cmd.name!r})", timeout or 0.0)
            raise self._fail_op(pos, "event", cmd.name, error, True)
        if entry is None:
            subject = cmd.subject or self.run.subject or "*"
            value = {"timeout": timeout, "subject": subject, "match": cmd.match}
            self._park(pos, "event", cmd.name, value, deadline)
            sub = SubscriptionRecord(
                run_id=self.run.id, pos=pos, kind="event", domain=self.run.domain,
                name=cmd.name, subject=subject, shape=shape_of(cmd.match),
                digest=match_digest(cmd.match),
                match=None if cmd.match is None else _json.dumps(cmd.match),
                wait=f"wait_for_event:{cmd.name}#{pos}",
                expires_at=now + self._subscription_ttl(timeout, cmd.ttl), created_at=now,
                deadline=deadline,
            )  # fmt: skip
            since = None
            if cmd.since_start:
                since = max(self.run.created_at, now - self.event_retention)
            self.writes.subscriptions.append(EventWait(sub, since, self._consumed_events()))
        raise Park

    def _message(self, cmd: MessageCmd) -> Any:
        pos, entry = self._begin("message", cmd.name)
        if entry is not None and entry.state == "done":
            self._already_consumed(pos, entry)
            return _json.loads(entry.value)["message"]["payload"]
        if entry is not None and entry.state == "error":
            return self._replayed(entry)
        return self._message_live(pos, entry, cmd)

    def _message_live(self, pos: int, entry: JournalEntry | None, cmd: MessageCmd) -> Op:
        now = self.clock_now()
        if entry is not None:
            info = _json.loads(entry.value)
            deadline, timeout, key = entry.deadline, info["timeout"], info["key"]
        else:
            timeout, key = cmd.timeout, cmd.key
            deadline = None if timeout is None else now + timeout
        delivery = self._delivery(pos, deadline)
        if delivery is not None:
            self._resolve(pos, "message", cmd.name, _json.dumps({"message": delivery}), entry)
            return delivery["payload"]
        holder: SubscriptionRecord | None = yield ReadHolder(cmd.name, key)
        if holder is not None and holder.run_id != self.run.id:
            error = DuplicateSubscriptionError(cmd.name, key, holder.run_id)
            raise self._fail_op(pos, "message", cmd.name, error, True)
        if deadline is not None and now >= deadline:
            error2 = WaitTimeoutError(f"wait_for_message({cmd.name!r}, {key!r})", timeout or 0.0)
            raise self._fail_op(pos, "message", cmd.name, error2, True)
        if entry is None or holder is None:
            # (A pending wait with no holder lost a registration race to a run that
            # has since finished waiting: register it now.)
            if entry is None:
                self._park(pos, "message", cmd.name, {"timeout": timeout, "key": key}, deadline)
            sub = SubscriptionRecord(
                run_id=self.run.id, pos=pos, kind="message", domain=self.run.domain,
                name=cmd.name, subject=key, shape="", digest="", match=None,
                wait=f"wait_for_message:{cmd.name}#{pos}",
                expires_at=now + self._subscription_ttl(timeout), created_at=now,
                deadline=deadline,
            )  # fmt: skip
            self.writes.subscriptions.append(MessageWait(sub))
        raise Park

    def _delivery(self, pos: int, deadline: float | None) -> Any:
        """The payload envelope of a delivery task aimed at wait ``pos``, if one came.

        A delivery published after the wait's deadline does not count: the timeout
        passed first, even if no worker had handled it yet.
        """
        for task in self.tasks:
            if task.kind in DELIVERY_KINDS and task.pos == pos and pos not in self.delivered:
                if deadline is not None and task.due_at > deadline:
                    continue
                self.delivered.add(pos)
                self.consumed_tasks.add(task.id)
                return _json.loads(task.payload)
        return None

    def _already_consumed(self, pos: int, entry: JournalEntry) -> None:
        """A delivery for a wait the journal has done was consumed before a crash: keep it
        from being buffered again (it is the same message, not a second one)."""
        if entry.state != "done":
            return
        body = _json.loads(entry.value).get("message")
        for task in self.tasks:
            if task.kind == MESSAGE_TASK and task.pos == pos and _json.loads(task.payload) == body:
                self.consumed_tasks.add(task.id)

    def _consumed_events(self) -> frozenset[str]:
        ids = set()
        trigger = _json.loads(self.run.trigger)
        if trigger:
            ids.add(trigger.get("id"))
        for entry in self.entries.values():
            if entry.kind == "event" and entry.state == "done":
                ids.add(_json.loads(entry.value)["event"]["id"])
        return frozenset(i for i in ids if i)

    def _publish(self, cmd: PublishCmd) -> Any:
        pos, entry = self._begin("publish", cmd.name)
        if entry is not None:
            return PublishResult.from_dict(_json.loads(entry.value))
        return self._publish_live(pos, cmd)

    def _publish_live(self, pos: int, cmd: PublishCmd) -> Op:
        event_id = cmd.event_id or f"{self.run.id}:{self.run.generation}:{pos}"
        event, payload = self.prepare_event(
            Event(cmd.name, cmd.payload, id=event_id, domain=self.run.domain, subject=cmd.subject)
        )
        if event.subject is None and self.run.subject is not None:
            event = Event(
                event.name, event.payload, id=event.id, domain=event.domain,
                subject=self.run.subject,
            )  # fmt: skip
        self.writes.publishes.append((pos, event, payload))
        committed: dict[int, JournalEntry] = yield Flush()
        self.entries[pos] = committed[pos]
        return PublishResult.from_dict(_json.loads(committed[pos].value))

    def _child_result(self, cmd: ChildResultCmd) -> Any:
        pos, entry = self._begin("child.result", cmd.name)
        if entry is not None and entry.state != "pending":
            return self._replayed(entry)
        return self._child_result_live(pos, entry, cmd)

    def _child_result_live(self, pos: int, entry: JournalEntry | None, cmd: ChildResultCmd) -> Op:
        child = next((r for r in self.writes.runs if r.id == cmd.name), None)
        if child is None:
            child = yield ReadRun(cmd.name)
        if child is None:
            raise RunNotFoundError(cmd.name)
        if child.status == RunStatus.COMPLETED:
            self._record(pos, "child.result", cmd.name, "done", child.output or b"null")
            return _json.loads(child.output)
        if child.status == RunStatus.FAILED:
            error = ErrorInfo.from_dict(_json.loads(child.error))
            raise self._fail_op(
                pos, "child.result", cmd.name, WorkflowFailedError(child.id, error), False
            )
        if child.status == RunStatus.CANCELLED:
            raise self._fail_op(pos, "child.result", cmd.name, RunCancelledError(child.id), False)
        if entry is None:
            self._record(pos, "child.result", cmd.name, "pending", None)
        raise Park

    # -- endings -----------------------------------------------------------------------------

    def _completed(self, value: Any) -> Outcome:
        if self.held:
            return self._held()
        if self.pos < self.journal_len:
            entry = self.entries[self.pos]
            self.held = NonDeterminismError(
                self.run.id, self.pos, f"{entry.kind} {entry.name!r}", "the workflow returning"
            )
            return self._held()
        try:
            data = _json.dumps(value, f"the output of workflow {self.wf.name!r}")
        except SerializationError as exc:
            return self._failed(exc)
        return Outcome(RunStatus.COMPLETED.value, output=data)

    def _failed(self, exc: BaseException) -> Outcome:
        return Outcome(RunStatus.FAILED.value, error=error_dict(exc, with_traceback=True))

    def _held(self) -> Outcome:
        assert self.held is not None
        log.error("%s", self.held)
        return Outcome("held", error=error_dict(self.held))

    def _new_writes(self) -> Writes:
        return Writes(
            self.run.id, consumed_tasks=self.consumed_tasks, claimed_tasks=self.claimed,
            delivered=self.delivered,
        )  # fmt: skip


# Each command's operation: a plain method (answers at once or raises Park), or one
# that returns a generator (an Op) when it needs a request answered first.
_HANDLERS: dict[type[Command], Callable[[Machine, Any], Any]] = {
    StepCmd: Machine._step,
    SleepCmd: Machine._sleep,
    SignalCmd: Machine._signal,
    StartChildCmd: Machine._start_child,
    ChildResultCmd: Machine._child_result,
    EventCmd: Machine._event,
    PublishCmd: Machine._publish,
    MessageCmd: Machine._message,
}
