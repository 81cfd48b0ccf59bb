"""Deterministic replay: drive a workflow coroutine against its journal.

A run is advanced by re-running its workflow function from the top. Each
``ctx`` operation takes the next journal position: an operation already in
the journal returns its recorded result without doing anything; the first
operation past the journal is carried out (a step runs, a wait checks its
input) and recorded. When the workflow reaches a wait whose input is not
there yet, the coroutine is closed and the run parks; the next wake-up
replays it again. Workflows are therefore cheap to park (no coroutine, no
thread) and the store is the only truth.

Writes accumulate in a buffer and are committed together: before a step's
function runs (so every result before it is durable before its side effect
starts; the input a wait took may wait, see ``Writes.may_wait_for_commit``),
and at the end, with the run's new status. Every commit is fenced by
the worker's lease, so a worker that lost its lease can never write.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from parkway import _json
from parkway.core.committer import Job
from parkway.core.intake import prepare, publish_in_tx
from parkway.core.messages import MessageWait, rebuffer
from parkway.core.runtime import Runtime
from parkway.errors import (
    DuplicateSubscriptionError,
    LeaseLostError,
    NonDeterminismError,
    ParkwayError,
    RunCancelledError,
    RunNotFoundError,
    SerializationError,
    StepFailedError,
    StoreFailedError,
    WaitTimeoutError,
    WorkflowFailedError,
)
from parkway.events import Event, PublishResult
from parkway.matching import match_digest, matches, shape_of
from parkway.models import ErrorInfo, Retry, RunStatus, error_dict, rebuild_error
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
from parkway.store.base import (
    MESSAGE_TASK,
    JournalEntry,
    NewTask,
    RunRecord,
    SignalRecord,
    SubscriptionRecord,
    TaskRecord,
)

if TYPE_CHECKING:
    from parkway.registry import WorkflowDef
    from parkway.store.base import Tx

log = logging.getLogger("parkway.replay")

NO_RETRY = Retry(max_attempts=1, backoff=0)
DELIVERY_KINDS = frozenset({"delivery", MESSAGE_TASK})


class Park(Exception):
    """Internal: the workflow reached a wait whose input has not arrived."""


@dataclass
class Outcome:
    """How an execution ended."""

    status: str  # a RunStatus value, or "held" / "continued"
    output: bytes | None = None
    error: dict[str, Any] | None = None
    new_input: bytes | None = None


# Waits whose input a replay finds again the same (see Writes.may_wait_for_commit).
REPLAYABLE_WAITS = frozenset({"signal", "event", "message"})


@dataclass
class Writes:
    """Buffered changes of one run, committed in one transaction."""

    run_id: str
    journal: dict[int, JournalEntry] = field(default_factory=dict)
    tasks: list[NewTask] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    consumed_signals: list[int] = field(default_factory=list)
    finished_waits: list[int] = field(default_factory=list)
    subscriptions: list[Lookback | MessageWait] = field(default_factory=list)
    # Delivery tasks the run consumed: never buffered again.
    consumed_tasks: set[int] = field(default_factory=set)
    # Tasks the current advance claimed: deleted by its final commit only.
    claimed_tasks: frozenset[int] = frozenset()
    # Waits that took a delivery in the current advance.
    delivered: set[int] = field(default_factory=set)
    publishes: list[tuple[int, Event, bytes]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.journal or self.tasks or self.runs or self.consumed_signals
            or self.finished_waits or self.subscriptions or self.publishes
        )  # fmt: skip

    @property
    def may_wait_for_commit(self) -> bool:
        """Whether a step's side effect may run before these writes are committed.

        Only if they record nothing a replay could not find again the same: waits
        that took a signal, an event or a message (with what goes with them:
        status, deleted timers, consumed signals). Their input stays in the store
        until the commit that consumes it, and a replay after a crash takes the same
        one again (a name's oldest signal; a wait's one delivery, the subscription
        having gone with it). So the step after a wait needs no commit of its own
        before it runs: the wait's result commits with the step's. A step result, a
        side value (``ctx.now``), a child, a publish or a timer must be durable
        first: a replay could come out otherwise, and the step's side effect would
        follow a history that never was.
        """
        return not (self.tasks or self.runs or self.subscriptions or self.publishes) and all(
            entry.kind in REPLAYABLE_WAITS and entry.state == "done"
            for entry in self.journal.values()
        )

    async def apply(self, tx: Tx, rt: Runtime, *, ending: bool = False) -> None:
        """Write them in ``tx``.

        ``ending``: the run ends in this transaction, and ``transitions.finish``
        drops all its tasks and subscriptions after (buffering again each message
        delivery it did not take): no wait's need go one by one.
        """
        now = rt.now()
        for pos, event, payload in self.publishes:
            result = await publish_in_tx(rt, tx, event, payload, now)
            value = _json.dumps(result.to_dict())
            self.journal[pos] = JournalEntry(pos, "publish", event.name, "done", value, None, now)
        for run in self.runs:
            if await tx.get_run(run.id) is None:
                await tx.insert_run(run)
        if self.journal:
            await tx.put_journal(self.run_id, list(self.journal.values()))
        # Message waits that may have deliveries to buffer again. Not one that took
        # its delivery: the correlate that made it removed the wait's subscription
        # (under the key's lock), so no other message can have reached it.
        messages = [
            pos for pos in self.finished_waits
            if pos not in self.delivered
            and (pos not in self.journal or self.journal[pos].kind == "message")
        ]  # fmt: skip
        for pos in self.finished_waits:
            if pos not in messages and not ending:
                # No delivery to buffer again: its timer (say) goes without a read. The
                # tasks this advance claimed stay until its final commit (see below).
                await tx.delete_subscription(self.run_id, pos)
                await tx.delete_wait_tasks(self.run_id, pos, keep=sorted(self.claimed_tasks))
        if messages and not ending:  # (finish buffers again what the run did not take)
            keep = frozenset(self.consumed_tasks)
            # The tasks this advance claimed stay until its final commit: deleting
            # them in an earlier flush would leave a run that crashes mid-advance
            # with nothing due, so no worker would ever take it over.
            finished = set(messages)
            # One read serves both: the deliveries to buffer again, the rest to drop.
            tasks = await tx.due_tasks(self.run_id, float("inf"))
            rebuffered: set[int] = set()
            for pos in messages:
                rebuffered |= await rebuffer(
                    rt, tx, self.run_id, now, pos=pos, keep=keep, tasks=tasks
                )
                await tx.delete_subscription(self.run_id, pos)
            stale = [
                task.id
                for task in tasks
                if task.pos in finished
                and task.id not in self.claimed_tasks
                and task.id not in rebuffered
            ]
            await tx.delete_tasks(stale)
        for lookback in self.subscriptions:
            await lookback.register(tx, now)
        if self.tasks:
            await tx.add_tasks(self.tasks)
        if self.consumed_signals:
            await tx.delete_signals(self.consumed_signals)


@dataclass
class Lookback:
    """A subscription to register at commit, with the ``since_start`` look-back if asked.

    The look-back runs in the same transaction as the registration: an event
    committed before it is found by the look-back, one committed after it finds
    the subscription. Nothing falls between the two.
    """

    sub: SubscriptionRecord
    since: float | None = None
    consumed: frozenset[str] = frozenset()

    async def register(self, tx: Tx, now: float) -> None:
        sub = self.sub
        if self.since is not None:
            match = _json.loads(sub.match)
            for event in await tx.events_since(sub.domain, sub.name, self.since):
                if event.id in self.consumed:
                    continue
                if sub.subject != "*" and event.subject != sub.subject:
                    continue
                if matches(match, _json.loads(event.payload)):
                    envelope = Event(
                        event.name, _json.loads(event.payload), id=event.id,
                        domain=event.domain, subject=event.subject,
                    )  # fmt: skip
                    payload = _json.dumps(envelope.to_dict())
                    await tx.add_tasks([NewTask(sub.run_id, now, "delivery", sub.pos, payload)])
                    return
        await tx.add_subscription(sub)


class Execution:
    """One advance of one run by one worker."""

    def __init__(
        self,
        rt: Runtime,
        run: RunRecord,
        wf: WorkflowDef,
        journal: list[JournalEntry],
        tasks: list[TaskRecord],
        owner: str,
        commit: Callable[[Job], Awaitable[Any]] | None = None,
        signals: list[SignalRecord] | None = None,
    ) -> None:
        self.rt = rt
        # How a flush is committed: the worker's (lease-fenced, maybe grouped), or alone.
        self.commit = commit or self._commit_alone
        self.store = rt.store
        self.run = run
        self.wf = wf
        self.entries = {e.pos: e for e in journal}
        self.journal_len = max(self.entries, default=-1) + 1
        self.tasks = tasks
        self.owner = owner
        self.pos = 0
        self.consumed_tasks: set[int] = set()
        self.claimed = frozenset(t.id for t in tasks)
        self.delivered: set[int] = set()
        self.writes = self._new_writes()
        self.park_status = RunStatus.PARKED.value
        self.held: NonDeterminismError | None = None
        self._last_publish: JournalEntry | None = None
        # The run's mailbox, read once per advance (None: not yet); the worker may
        # hand it over already read with the run.
        self._mailbox: list[SignalRecord] | None = None if signals is None else list(signals)

    # -- what ctx.now()/uuid()/random() call -------------------------------------------------

    def clock_now(self) -> float:
        return self.rt.now()

    def side(self, name: str, produce: Any) -> Any:
        pos, entry = self._begin("value", name)
        if entry is not None:
            return _json.loads(entry.value)
        value = produce()
        self._record(pos, "value", name, "done", _json.dumps(value))
        return value

    # -- driving the coroutine ---------------------------------------------------------------

    async def execute(self) -> Outcome:
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
                ParkwayError(f"workflow {self.wf.name!r} did not return a coroutine")
            )
        try:
            return await self._drive(coro)
        finally:
            coro.close()

    async def _drive(self, coro: Coroutine[Any, Any, Any]) -> Outcome:
        send: Any = None
        throw: BaseException | None = None
        while True:
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
            send, throw = None, None
            if self.held:
                return self._held()
            if isinstance(yielded, Command):
                try:
                    send = await self._handle(yielded)
                except Park:
                    return Outcome(self.park_status)
                except NonDeterminismError as exc:
                    self.held = exc
                    return self._held()
                except (LeaseLostError, StoreFailedError):
                    raise  # the engine's trouble, not the workflow's: the worker retries
                except Exception as exc:  # errors meant for the workflow (StepFailedError...)
                    throw = exc
            elif yielded is None:  # a bare `await asyncio.sleep(0)`
                await asyncio.sleep(0)
            elif isinstance(yielded, asyncio.Future):
                # The workflow awaited a plain future (a lock, asyncio.sleep): let it finish.
                # It is not journaled, so it must not decide what the workflow does.
                yielded._asyncio_future_blocking = False
                await asyncio.wait([yielded])
            else:
                throw = ParkwayError(
                    f"workflow {self.wf.name!r} awaited {yielded!r}; workflows may only await "
                    "ctx operations (put other I/O inside ctx.step)"
                )

    async def _handle(self, cmd: Command) -> Any:
        if isinstance(cmd, StepCmd):
            return await self._step(cmd)
        if isinstance(cmd, SleepCmd):
            return self._sleep(cmd)
        if isinstance(cmd, SignalCmd):
            return await self._signal(cmd)
        if isinstance(cmd, StartChildCmd):
            return self._start_child(cmd)
        if isinstance(cmd, ChildResultCmd):
            return await self._child_result(cmd)
        if isinstance(cmd, EventCmd):
            return self._event(cmd)
        if isinstance(cmd, PublishCmd):
            return await self._publish(cmd)
        if isinstance(cmd, MessageCmd):
            return await self._message(cmd)
        raise ParkwayError(f"unknown command {cmd!r}")

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

    def _replayed(self, entry: JournalEntry) -> Any:
        if entry.state == "done":
            return _json.loads(entry.value)
        raise rebuild_error(_json.loads(entry.value))

    def _fail_op(self, pos: int, kind: str, name: str, exc: Exception, waited: bool) -> Exception:
        self._record(pos, kind, name, "error", _json.dumps(error_dict(exc)))
        if waited:
            self.writes.finished_waits.append(pos)
        return exc

    # -- operations --------------------------------------------------------------------------

    async def _step(self, cmd: StepCmd) -> Any:
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
            if not self.writes.may_wait_for_commit:
                await self.flush()
            try:
                result = await _call(cmd)
                data = _json.dumps(result, f"the result of step {cmd.name!r}")
            except SerializationError as exc:
                # Deterministic: retrying would give the same value again.
                raise self._fail_op(
                    pos, "step", cmd.name,
                    StepFailedError(cmd.name, attempt, type(exc).__name__, str(exc)),
                    entry is not None,
                ) from exc  # fmt: skip
            except Exception as exc:
                log.info(
                    "run %s step %r attempt %d failed: %r", self.run.id, cmd.name, attempt, exc
                )
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
            self._record(pos, "step", cmd.name, "done", data)
            if entry is not None:
                self.writes.finished_waits.append(pos)
            return _json.loads(data)

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

    async def _signal(self, cmd: SignalCmd) -> Any:
        pos, entry = self._begin("signal", cmd.name)
        if entry is not None and entry.state != "pending":
            return self._replayed(entry)
        now = self.clock_now()
        deadline, timeout = self._deadline(entry, cmd.timeout, now)
        signal = await self._take_signal(cmd.name)
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

    async def _take_signal(self, name: str) -> SignalRecord | None:
        if self._mailbox is None:
            async with self._store_call(readonly=True) as tx:
                self._mailbox = await tx.signals(self.run.id)
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
        wf = self.rt.registry.latest(cmd.name)
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
            ttl = cmd.ttl
            if ttl is None:
                ttl = (timeout + 86400.0) if timeout is not None else 90 * 86400.0
            sub = SubscriptionRecord(
                run_id=self.run.id, pos=pos, kind="event", domain=self.run.domain,
                name=cmd.name, subject=subject, shape=shape_of(cmd.match),
                digest=match_digest(cmd.match),
                match=None if cmd.match is None else _json.dumps(cmd.match),
                wait=f"wait_for_event:{cmd.name}#{pos}", expires_at=now + ttl, created_at=now,
                deadline=deadline,
            )  # fmt: skip
            since = None
            if cmd.since_start:
                since = max(self.run.created_at, now - self.rt.settings.event_retention)
            self.writes.subscriptions.append(Lookback(sub, since, self._consumed_events()))
        raise Park

    async def _message(self, cmd: MessageCmd) -> Any:
        pos, entry = self._begin("message", cmd.name)
        if entry is not None and entry.state == "done":
            self._already_consumed(pos, entry)
            return _json.loads(entry.value)["message"]["payload"]
        if entry is not None and entry.state == "error":
            return self._replayed(entry)
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
        async with self._store_call(readonly=True) as tx:
            holder = await tx.message_wait(cmd.name, key)
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
            ttl = (timeout + 86400.0) if timeout is not None else 90 * 86400.0
            sub = SubscriptionRecord(
                run_id=self.run.id, pos=pos, kind="message", domain=self.run.domain,
                name=cmd.name, subject=key, shape="", digest="", match=None,
                wait=f"wait_for_message:{cmd.name}#{pos}", expires_at=now + ttl, created_at=now,
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

    async def _publish(self, cmd: PublishCmd) -> PublishResult:
        pos, entry = self._begin("publish", cmd.name)
        if entry is not None:
            return PublishResult.from_dict(_json.loads(entry.value))
        event_id = cmd.event_id or f"{self.run.id}:{self.run.generation}:{pos}"
        event, payload = prepare(
            self.rt,
            Event(cmd.name, cmd.payload, id=event_id, domain=self.run.domain, subject=cmd.subject),
        )
        if event.subject is None and self.run.subject is not None:
            event = Event(
                event.name, event.payload, id=event.id, domain=event.domain,
                subject=self.run.subject,
            )  # fmt: skip
        self.writes.publishes.append((pos, event, payload))
        await self.flush()
        committed = self._last_publish
        assert committed is not None
        self.entries[pos] = committed
        return PublishResult.from_dict(_json.loads(committed.value))

    async def _child_result(self, cmd: ChildResultCmd) -> Any:
        pos, entry = self._begin("child.result", cmd.name)
        if entry is not None and entry.state != "pending":
            return self._replayed(entry)
        child = next((r for r in self.writes.runs if r.id == cmd.name), None)
        if child is None:
            async with self._store_call(readonly=True) as tx:
                child = await tx.get_run(cmd.name)
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

    @contextlib.asynccontextmanager
    async def _store_call(self, *, readonly: bool = False) -> AsyncIterator[Tx]:
        """A store transaction whose failure must never reach the workflow as its own error."""
        with self._store_errors():
            async with self.store.transaction(readonly=readonly) as tx:
                yield tx

    @contextlib.contextmanager
    def _store_errors(self) -> Iterator[None]:
        """The store's failures as :class:`StoreFailedError` (the worker retries the run)."""
        try:
            yield
        except (LeaseLostError, NonDeterminismError, Park):
            raise
        except Exception as exc:
            raise StoreFailedError(
                f"store failed while advancing run {self.run.id!r}: {exc}"
            ) from exc

    # -- commits -----------------------------------------------------------------------------

    async def _commit_alone(self, job: Job) -> Any:
        async with self.store.transaction() as tx:
            return await job(tx)

    async def flush(self) -> None:
        """Commit buffered writes (fenced by the lease) before a side effect runs."""
        if not self.writes:
            return
        writes = self.writes

        async def job(tx: Tx) -> None:
            changes = {"status": RunStatus.RUNNING.value, "updated_at": self.clock_now()}
            await tx.update_leased(self.run.id, changes, owner=self.owner, release=False)
            await writes.apply(tx, self.rt)

        with self._store_errors():
            await self.commit(job)
        for pos, _event, _payload in self.writes.publishes:
            self._last_publish = self.writes.journal[pos]
        self.writes = self._new_writes()
        self.rt.after_commit()

    @property
    def may_hold_deliveries(self) -> bool:
        """Whether a message may have reached the run that it did not take: one of its
        message waits did not end with a delivery (it is pending, or timed out). A
        wait that took its delivery cannot have another: its subscription went
        with the first (see Writes.apply)."""
        return any(e.kind == "message" and e.state != "done" for e in self.entries.values())

    def _new_writes(self) -> Writes:
        return Writes(
            self.run.id, consumed_tasks=self.consumed_tasks, claimed_tasks=self.claimed,
            delivered=self.delivered,
        )  # fmt: skip


async def _call(cmd: StepCmd) -> Any:
    if inspect.iscoroutinefunction(cmd.fn):
        result = await cmd.fn(*cmd.args, **cmd.kwargs)
    else:
        # A sync step may block (requests, file I/O): keep it off the event loop.
        result = await asyncio.to_thread(cmd.fn, *cmd.args, **cmd.kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result
