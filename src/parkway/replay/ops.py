"""The replay machine's plain operations: steps, timers, signals, events, messages,
children and publishes.

Each operation is carried out live (:meth:`Operations._live_op`) when the
journal has no result for it, or given the result its entry records
(:meth:`Operations._replay`). A live operation answers at once, raises
:class:`Park` (its input has not come), or is a generator that yields requests
(:mod:`parkway.replay.requests`) and returns its answer.
"""

from __future__ import annotations

import logging
from typing import Any

from parkway import _json
from parkway.errors import (
    DuplicateSubscriptionError,
    RunCancelledError,
    RunNotFoundError,
    SerializationError,
    StepFailedError,
    WaitTimeoutError,
    WorkflowFailedError,
)
from parkway.events import Event, PublishResult
from parkway.matching import match_digest, shape_of
from parkway.models import ErrorInfo, Retry, RunStatus, error_dict, exception_text
from parkway.replay.branch import Op, Pending
from parkway.replay.commands import (
    ChildResultCmd,
    EventCmd,
    MessageCmd,
    PersonCmd,
    PublishCmd,
    SignalCmd,
    SleepCmd,
    StartChildCmd,
    StepCmd,
)
from parkway.replay.requests import Flush, ReadHolder, ReadMailbox, ReadRun, RunStep, StepResult
from parkway.replay.state import MachineState, Park
from parkway.replay.writes import EventWait, MessageWait
from parkway.store.base import (
    MESSAGE_TASK,
    AttemptRecord,
    JournalEntry,
    NewTask,
    RunRecord,
    SignalRecord,
    SubscriptionRecord,
)
from parkway.store.vocabulary import EntryKind, EntryState, TaskKind, WaitKind

__all__ = ["Operations", "Park"]

log = logging.getLogger("parkway.replay")

NO_RETRY = Retry(max_attempts=1, backoff=0)
DELIVERY_KINDS = frozenset({TaskKind.DELIVERY, TaskKind.MESSAGE})


class Operations(MachineState):
    """Steps, timers, signals, events, messages, children and publishes."""

    def _replay_plain(self, op: Pending) -> Any:
        """The result ``op``'s journal entry records (done or error)."""
        entry = op.entry
        assert entry is not None
        if entry.state == EntryState.DONE:
            if entry.kind == EntryKind.EVENT:
                return _json.loads(entry.value)["event"]["payload"]
            if entry.kind == EntryKind.MESSAGE:
                self._already_consumed(entry)
                return _json.loads(entry.value)["message"]["payload"]
            if entry.kind == EntryKind.PUBLISH:
                return PublishResult.from_dict(_json.loads(entry.value))
        return self._replayed(entry)

    def _live_plain(self, op: Pending) -> Any:
        cmd = op.cmd
        if isinstance(cmd, StepCmd):
            return self._step(op, cmd)
        if isinstance(cmd, SleepCmd):
            return self._sleep(op, cmd)
        if isinstance(cmd, SignalCmd):
            return self._signal(op, cmd)
        if isinstance(cmd, EventCmd):
            return self._event(op, cmd)
        if isinstance(cmd, MessageCmd):
            return self._message(op, cmd)
        if isinstance(cmd, StartChildCmd):
            return self._start_child(op, cmd)
        if isinstance(cmd, ChildResultCmd):
            return self._child_result(op, cmd)
        if isinstance(cmd, PublishCmd):
            return self._publish(op, cmd)
        raise TypeError(f"no operation for {cmd!r}")

    # -- steps -------------------------------------------------------------------------------

    def _step(self, op: Pending, cmd: StepCmd) -> Op:
        entry = op.entry
        attempt = 1
        heartbeat: bytes | None = None  # the latest an earlier attempt recorded
        if entry is not None:  # a retry's backoff (its timer fired, or will), or a
            # heartbeat of an attempt cut short (a crash, a lost lease)
            if entry.deadline is not None and self.clock_now() < entry.deadline:
                self._backing_off()
                raise Park
            info = _json.loads(entry.value)
            # (An attempt cut short after a heartbeat counts as one: the step ran.)
            attempt = info["attempt"] + 1
            if "heartbeat" in info:
                heartbeat = _json.dumps(info["heartbeat"])
            position = entry.pos
        else:
            if op.reserved is None:
                op.reserved = self._alloc()
            position = op.reserved
        retry = cmd.retry or NO_RETRY
        while True:
            started = self.clock_now()
            result: StepResult = yield RunStep(
                cmd, attempt, position, heartbeat, op.branch.journal_path,
                op.entry.seq if op.entry is not None else None,
            )  # fmt: skip
            if result.heartbeat is not None:
                heartbeat = result.heartbeat
            exc = result.error
            if exc is None:
                try:
                    data = _json.dumps(result.value, f"the result of step {cmd.name!r}")
                except SerializationError as error:
                    # Deterministic: retrying would give the same value again.
                    failure = StepFailedError(cmd.name, attempt, type(error).__name__, str(error))
                    raise self._fail_op(op, EntryKind.STEP, failure, entry is not None) from error
                self._record(op, EntryKind.STEP, EntryState.DONE, data)
                if entry is not None:
                    self.writes.finished_waits.append(op.entry.pos)  # type: ignore[union-attr]
                return _json.loads(data)
            text = exception_text(exc)
            log.debug("run %s step %r attempt %d failed: %s", self.run.id, cmd.name, attempt, text)
            self.writes.attempts.append(
                AttemptRecord(
                    self.run.id, position, cmd.name, attempt, _json.dumps(error_dict(exc)),
                    started, self.clock_now(),
                )
            )  # fmt: skip
            # (A branch withdrawn by its gather is not retried: nobody awaits it.)
            if attempt < retry.max_attempts and not op.branch.withdrawn and retry.retries(exc):
                delay = retry.delay(attempt)
                if delay <= 0:
                    attempt += 1
                    continue
                deadline = self.clock_now() + delay
                info = {
                    "attempt": attempt, "max_attempts": retry.max_attempts,
                    "error": error_dict(exc),
                }  # fmt: skip
                if heartbeat is not None:
                    info["heartbeat"] = _json.loads(heartbeat)
                pos = self._record(
                    op, EntryKind.STEP, EntryState.PENDING, _json.dumps(info), deadline
                ).pos
                self.writes.tasks.append(NewTask(self.run.id, deadline, TaskKind.TIMER, pos))
                self._backing_off()
                raise Park from None
            failure = StepFailedError(cmd.name, attempt, type(exc).__name__, text)
            raise self._fail_op(op, EntryKind.STEP, failure, entry is not None) from exc

    # -- timers and signals ------------------------------------------------------------------

    def _sleep(self, op: Pending, cmd: SleepCmd) -> None:
        entry = op.entry
        now = self.clock_now()
        if entry is not None and entry.deadline is not None:
            deadline = entry.deadline
        else:
            deadline = cmd.until if cmd.until is not None else now + (cmd.seconds or 0.0)
        if now >= deadline:
            self._record(op, EntryKind.SLEEP, EntryState.DONE, b"null")
            if entry is not None:
                self.writes.finished_waits.append(entry.pos)
            return None
        if entry is None:
            pos = self._record(op, EntryKind.SLEEP, EntryState.PENDING, None, deadline).pos
            self.writes.tasks.append(NewTask(self.run.id, deadline, TaskKind.TIMER, pos))
        raise Park

    def _signal(self, op: Pending, cmd: SignalCmd) -> Op:
        entry = op.entry
        now = self.clock_now()
        deadline, timeout = self._deadline(entry, cmd.timeout, now)
        if self._mailbox is None:
            self._mailbox = yield ReadMailbox()
        signal = self._take_signal(cmd.name)
        if signal is not None:
            self._resolve(op, EntryKind.SIGNAL, signal.payload or b"null")
            self.writes.consumed_signals.append(signal.id)
            return _json.loads(signal.payload)
        if deadline is not None and now >= deadline:
            what = f"wait_for_signal({cmd.name!r})"
            if isinstance(cmd, PersonCmd):
                what = cmd.what or what
                if cmd.task is not None:
                    self.writes.ended_tasks.append((cmd.task, "expired"))
            error = WaitTimeoutError(what, timeout or 0.0)
            raise self._fail_op(op, EntryKind.SIGNAL, error, entry is not None)
        if entry is None:
            self._park(op, EntryKind.SIGNAL, {"timeout": timeout}, deadline)
        raise Park

    def _find_signal(self, name: str) -> SignalRecord | None:
        assert self._mailbox is not None
        return next((s for s in self._mailbox if s.name == name), None)

    def _take_signal(self, name: str) -> SignalRecord | None:
        signal = self._find_signal(name)
        if signal is not None:
            assert self._mailbox is not None
            self._mailbox.remove(signal)
        return signal

    # -- events and messages -----------------------------------------------------------------

    def _event(self, op: Pending, cmd: EventCmd) -> Any:
        entry = op.entry
        now = self.clock_now()
        deadline, timeout = self._deadline(entry, cmd.timeout, now)
        envelope = self._delivery(op, deadline)
        if envelope is not None:
            self._resolve(op, EntryKind.EVENT, _json.dumps({"event": envelope}))
            return envelope["payload"]
        if deadline is not None and now >= deadline:
            error = WaitTimeoutError(f"wait_for_event({cmd.name!r})", timeout or 0.0)
            raise self._fail_op(op, EntryKind.EVENT, error, True)
        if entry is None:
            subject = cmd.subject or self.run.subject or "*"
            # (Any subject, "*", is what a wait on no subject means: not written.)
            value = {"timeout": timeout, "subject": None if subject == "*" else subject,
                     "match": cmd.match}  # fmt: skip
            pos = self._park(op, EntryKind.EVENT, value, deadline)
            sub = self._event_subscription(pos, cmd, subject, timeout, deadline, now)
            since = None
            if cmd.since_start:
                since = max(self.run.created_at, now - self.event_retention)
            self.writes.subscriptions.append(EventWait(sub, since, self._consumed_events()))
        raise Park

    def _event_subscription(
        self,
        pos: int,
        cmd: EventCmd,
        subject: str,
        timeout: float | None,
        deadline: float | None,
        now: float,
    ) -> SubscriptionRecord:
        return SubscriptionRecord(
            run_id=self.run.id, pos=pos, kind=WaitKind.EVENT, domain=self.run.domain,
            name=cmd.name, subject=subject, shape=shape_of(cmd.match),
            digest=match_digest(cmd.match),
            match=None if cmd.match is None else _json.dumps(cmd.match),
            wait=f"wait_for_event:{cmd.name}#{pos}",
            expires_at=now + self._subscription_ttl(timeout, cmd.ttl), created_at=now,
            deadline=deadline,
        )  # fmt: skip

    def _message(self, op: Pending, cmd: MessageCmd) -> Op:
        entry = op.entry
        now = self.clock_now()
        if entry is not None:
            info = _json.loads(entry.value)
            deadline, timeout, key = entry.deadline, info.get("timeout"), info["key"]
        else:
            timeout, key = cmd.timeout, cmd.key
            deadline = None if timeout is None else now + timeout
        delivery = self._delivery(op, deadline)
        if delivery is not None:
            self._resolve(op, EntryKind.MESSAGE, _json.dumps({"message": delivery}))
            return delivery["payload"]
        holder: SubscriptionRecord | None = yield ReadHolder(cmd.name, key)
        if holder is not None and holder.run_id != self.run.id:
            error = DuplicateSubscriptionError(cmd.name, key, holder.run_id)
            raise self._fail_op(op, EntryKind.MESSAGE, error, True)
        if deadline is not None and now >= deadline:
            error2 = WaitTimeoutError(f"wait_for_message({cmd.name!r}, {key!r})", timeout or 0.0)
            raise self._fail_op(op, EntryKind.MESSAGE, error2, True)
        if entry is None or holder is None:
            # (A pending wait with no holder lost a registration race to a run that
            # has since finished waiting: register it now.)
            if entry is None:
                info = {"timeout": timeout, "key": key}
                pos = self._park(op, EntryKind.MESSAGE, info, deadline)
            else:
                pos = entry.pos
            sub = self._message_subscription(pos, cmd.name, key, timeout, deadline, now)
            self.writes.subscriptions.append(MessageWait(sub))
        raise Park

    def _message_subscription(
        self,
        pos: int,
        name: str,
        key: str,
        timeout: float | None,
        deadline: float | None,
        now: float,
    ) -> SubscriptionRecord:
        return SubscriptionRecord(
            run_id=self.run.id, pos=pos, kind=WaitKind.MESSAGE, domain=self.run.domain,
            name=name, subject=key, shape="", digest="", match=None,
            wait=f"wait_for_message:{name}#{pos}",
            expires_at=now + self._subscription_ttl(timeout), created_at=now,
            deadline=deadline,
        )  # fmt: skip

    def _delivery(self, op: Pending, deadline: float | None) -> Any:
        """The payload envelope of a delivery task aimed at ``op``'s wait, if one came."""
        if op.entry is None:
            return None  # (a wait reached only now has no subscription yet)
        return self._delivery_at(op.entry.pos, deadline, take=True)

    def _delivery_at(self, pos: int, deadline: float | None, *, take: bool) -> Any:
        """The payload envelope of a delivery task aimed at wait ``pos``, if one came
        (``take``: it is consumed).

        A delivery published after the wait's deadline does not count: the timeout
        passed first, even if no worker had handled it yet.
        """
        for task in self.tasks:
            if task.kind in DELIVERY_KINDS and task.pos == pos and pos not in self.delivered:
                if deadline is not None and task.due_at > deadline:
                    continue
                if take:
                    self.delivered.add(pos)
                    self.consumed_tasks.add(task.id)
                return _json.loads(task.payload)
        return None

    def _already_consumed(self, entry: JournalEntry) -> None:
        """A delivery for a wait the journal has done was consumed before a crash: keep it
        from being buffered again (it is the same message, not a second one)."""
        body = _json.loads(entry.value).get("message")
        for task in self.tasks:
            if (
                task.kind == MESSAGE_TASK
                and task.pos == entry.pos
                and _json.loads(task.payload) == body
            ):
                self.consumed_tasks.add(task.id)

    def _consumed_events(self) -> frozenset[str]:
        ids = set(self._event_ids)
        trigger = _json.loads(self.run.trigger)
        if trigger:
            ids.add(trigger.get("id"))
        return frozenset(i for i in ids if i)

    # -- children and publishes --------------------------------------------------------------

    def _start_child(self, op: Pending, cmd: StartChildCmd) -> str:
        wf = self.registry.latest(cmd.name)
        data = _json.dumps(wf.check_input(cmd.input), f"the input of workflow {cmd.name!r}")
        pos = self._alloc()
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
                status=RunStatus.PENDING, input=data, output=None, error=None,
                domain=domain, subject=subject, parent_id=parent,
                trigger=trigger, generation=0, created_at=now, updated_at=now,
            )
        )  # fmt: skip
        self.writes.tasks.append(NewTask(child_id, now, TaskKind.START))
        self._record(op, cmd.entry_kind(), EntryState.DONE, _json.dumps(child_id), pos=pos)
        return child_id

    def _child_result(self, op: Pending, cmd: ChildResultCmd) -> Op:
        child = yield from self._child(cmd.name)
        if child.status == RunStatus.COMPLETED:
            self._record(op, EntryKind.CHILD_RESULT, EntryState.DONE, child.output or b"null")
            return _json.loads(child.output)
        if child.status == RunStatus.FAILED:
            error = ErrorInfo.from_dict(_json.loads(child.error))
            raise self._fail_op(
                op, EntryKind.CHILD_RESULT, WorkflowFailedError(child.id, error), False
            )
        if child.status == RunStatus.CANCELLED:
            raise self._fail_op(op, EntryKind.CHILD_RESULT, RunCancelledError(child.id), False)
        if op.entry is None:
            self._record(op, EntryKind.CHILD_RESULT, EntryState.PENDING, None)
        raise Park

    def _child(self, run_id: str) -> Op:
        """The row of child ``run_id``: one this advance started, or read."""
        child: RunRecord | None = next((r for r in self.writes.runs if r.id == run_id), None)
        if child is None:
            child = yield ReadRun(run_id)
        if child is None:
            raise RunNotFoundError(run_id)
        return child

    def _publish(self, op: Pending, cmd: PublishCmd) -> Op:
        pos = self._alloc()
        event_id = cmd.event_id or f"{self.run.id}:{self.run.generation}:{pos}"
        event, payload = self.prepare_event(
            Event(cmd.name, cmd.payload, id=event_id, domain=self.run.domain, subject=cmd.subject)
        )
        if event.subject is None and self.run.subject is not None:
            event = Event(
                event.name, event.payload, id=event.id, domain=event.domain,
                subject=self.run.subject,
            )  # fmt: skip
        self.writes.publishes.append((pos, event, payload, op.branch.journal_path))
        committed: dict[int, JournalEntry] = yield Flush()
        entry = committed[pos]
        op.entry = entry
        self._keep(entry)
        return PublishResult.from_dict(_json.loads(entry.value))
