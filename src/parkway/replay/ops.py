"""The replay machine's plain operations: which one a command is, steps, children
and publishes (the waits are :mod:`parkway.replay.waits`).

Each operation is given the machine's state and carried out live
(:func:`live_plain`) when the journal has no result for it, or given the result
its entry records (:func:`replay_plain`). A live operation answers at once,
raises :class:`~parkway.replay.state.Park` (its input has not come), or is a
generator that yields requests (:mod:`parkway.replay.requests`) and returns its
answer.
"""

from __future__ import annotations

import logging
from typing import Any

from parkway import _json
from parkway.errors import (
    RunCancelledError,
    RunNotFoundError,
    SerializationError,
    StepFailedError,
    WorkflowFailedError,
)
from parkway.events import Event, PublishResult
from parkway.models import ErrorInfo, Retry, RunStatus, error_dict, exception_text
from parkway.replay.branch import Op, Pending
from parkway.replay.commands import (
    ChildResultCmd,
    EventCmd,
    MessageCmd,
    PublishCmd,
    SignalCmd,
    SleepCmd,
    StartChildCmd,
    StepCmd,
)
from parkway.replay.requests import Flush, ReadRun, RunStep, StepResult
from parkway.replay.state import MachineState, Park, replayed
from parkway.replay.waits import already_consumed, sleep, wait_event, wait_message, wait_signal
from parkway.store.base import AttemptRecord, JournalEntry, NewTask, RunRecord
from parkway.store.vocabulary import EntryKind, EntryState, TaskKind

log = logging.getLogger("parkway.replay")

NO_RETRY = Retry(max_attempts=1, backoff=0)


def replay_plain(st: MachineState, op: Pending) -> Any:
    """The result ``op``'s journal entry records (done or error)."""
    entry = op.entry
    assert entry is not None
    if entry.state == EntryState.DONE:
        if entry.kind == EntryKind.EVENT:
            return _json.loads(entry.value)["event"]["payload"]
        if entry.kind == EntryKind.MESSAGE:
            already_consumed(st, entry)
            return _json.loads(entry.value)["message"]["payload"]
        if entry.kind == EntryKind.PUBLISH:
            return PublishResult.from_dict(_json.loads(entry.value))
    return replayed(entry)


def live_plain(st: MachineState, op: Pending) -> Any:
    """Carry out ``op`` (a plain operation) live."""
    cmd = op.cmd
    if isinstance(cmd, StepCmd):
        return step(st, op, cmd)
    if isinstance(cmd, SleepCmd):
        return sleep(st, op, cmd)
    if isinstance(cmd, SignalCmd):
        return wait_signal(st, op, cmd)
    if isinstance(cmd, EventCmd):
        return wait_event(st, op, cmd)
    if isinstance(cmd, MessageCmd):
        return wait_message(st, op, cmd)
    if isinstance(cmd, StartChildCmd):
        return start_child(st, op, cmd)
    if isinstance(cmd, ChildResultCmd):
        return child_result(st, op, cmd)
    if isinstance(cmd, PublishCmd):
        return publish(st, op, cmd)
    raise TypeError(f"no operation for {cmd!r}")


# -- steps -------------------------------------------------------------------------------


def step(st: MachineState, op: Pending, cmd: StepCmd) -> Op:
    entry = op.entry
    attempt = 1
    heartbeat: bytes | None = None  # the latest an earlier attempt recorded
    if entry is not None:  # a retry's backoff (its timer fired, or will), or a
        # heartbeat of an attempt cut short (a crash, a lost lease)
        if entry.deadline is not None and st.clock_now() < entry.deadline:
            st.backing_off()
            raise Park
        info = _json.loads(entry.value)
        # (An attempt cut short after a heartbeat counts as one: the step ran.)
        attempt = info["attempt"] + 1
        if "heartbeat" in info:
            heartbeat = _json.dumps(info["heartbeat"])
        position = entry.pos
    else:
        if op.reserved is None:
            op.reserved = st.alloc()
        position = op.reserved
    retry = cmd.retry or NO_RETRY
    while True:
        started = st.clock_now()
        result: StepResult = yield RunStep(
            cmd,
            attempt,
            position,
            heartbeat,
            op.branch.journal_path,
            op.entry.seq if op.entry is not None else None,
        )
        if result.heartbeat is not None:
            heartbeat = result.heartbeat
        exc = result.error
        if exc is None:
            try:
                data = _json.dumps(result.value, f"the result of step {cmd.name!r}")
            except SerializationError as error:
                # Deterministic: retrying would give the same value again.
                failure = StepFailedError(cmd.name, attempt, type(error).__name__, str(error))
                raise st.fail_op(op, EntryKind.STEP, failure, entry is not None) from error
            st.record(op, EntryKind.STEP, EntryState.DONE, data)
            if entry is not None:
                st.writes.finished_waits.append(op.entry.pos)  # type: ignore[union-attr]
            return _json.loads(data)
        text = exception_text(exc)
        log.debug("run %s step %r attempt %d failed: %s", st.run.id, cmd.name, attempt, text)
        st.writes.attempts.append(
            AttemptRecord(
                st.run.id,
                position,
                cmd.name,
                attempt,
                _json.dumps(error_dict(exc)),
                started,
                st.clock_now(),
            )
        )
        # (A branch withdrawn by its gather is not retried: nobody awaits it.)
        if attempt < retry.max_attempts and not op.branch.withdrawn and retry.retries(exc):
            delay = retry.delay(attempt)
            if delay <= 0:
                attempt += 1
                continue
            deadline = st.clock_now() + delay
            info = {
                "attempt": attempt,
                "max_attempts": retry.max_attempts,
                "error": error_dict(exc),
            }
            if heartbeat is not None:
                info["heartbeat"] = _json.loads(heartbeat)
            pos = st.record(op, EntryKind.STEP, EntryState.PENDING, _json.dumps(info), deadline).pos
            st.writes.tasks.append(NewTask(st.run.id, deadline, TaskKind.TIMER, pos))
            st.backing_off()
            raise Park from None
        failure = StepFailedError(cmd.name, attempt, type(exc).__name__, text)
        raise st.fail_op(op, EntryKind.STEP, failure, entry is not None) from exc


# -- children and publishes --------------------------------------------------------------


def start_child(st: MachineState, op: Pending, cmd: StartChildCmd) -> str:
    wf = st.registry.latest(cmd.name)
    data = _json.dumps(wf.check_input(cmd.input), f"the input of workflow {cmd.name!r}")
    pos = st.alloc()
    domain, subject = st.run.domain, st.run.subject
    parent: str | None = st.run.id
    trigger: bytes | None = None
    if cmd.trigger is not None:
        child_id = f"evt:{cmd.trigger['id']}:{wf.name}"
        domain, subject = cmd.trigger["domain"], cmd.trigger["subject"]
        parent, trigger = None, _json.dumps(cmd.trigger)
    else:
        child_id = cmd.run_id or (
            f"{st.run.id}/{pos}"
            if not st.run.generation
            else f"{st.run.id}/g{st.run.generation}/{pos}"
        )
    now = st.clock_now()
    st.writes.runs.append(
        RunRecord(
            id=child_id,
            workflow=wf.name,
            version=wf.version,
            status=RunStatus.PENDING,
            input=data,
            output=None,
            error=None,
            domain=domain,
            subject=subject,
            parent_id=parent,
            trigger=trigger,
            generation=0,
            created_at=now,
            updated_at=now,
        )
    )
    st.writes.tasks.append(NewTask(child_id, now, TaskKind.START))
    st.record(op, cmd.entry_kind(), EntryState.DONE, _json.dumps(child_id), pos=pos)
    return child_id


def child_result(st: MachineState, op: Pending, cmd: ChildResultCmd) -> Op:
    child = yield from read_child(st, cmd.name)
    if child.status == RunStatus.COMPLETED:
        st.record(op, EntryKind.CHILD_RESULT, EntryState.DONE, child.output or b"null")
        return _json.loads(child.output)
    if child.status == RunStatus.FAILED:
        error = ErrorInfo.from_dict(_json.loads(child.error))
        raise st.fail_op(op, EntryKind.CHILD_RESULT, WorkflowFailedError(child.id, error), False)
    if child.status == RunStatus.CANCELLED:
        raise st.fail_op(op, EntryKind.CHILD_RESULT, RunCancelledError(child.id), False)
    if op.entry is None:
        st.record(op, EntryKind.CHILD_RESULT, EntryState.PENDING, None)
    raise Park


def read_child(st: MachineState, run_id: str) -> Op:
    """The row of child ``run_id``: one this advance started, or read."""
    child: RunRecord | None = next((r for r in st.writes.runs if r.id == run_id), None)
    if child is None:
        child = yield ReadRun(run_id)
    if child is None:
        raise RunNotFoundError(run_id)
    return child


def publish(st: MachineState, op: Pending, cmd: PublishCmd) -> Op:
    pos = st.alloc()
    event_id = cmd.event_id or f"{st.run.id}:{st.run.generation}:{pos}"
    event, payload = st.prepare_event(
        Event(cmd.name, cmd.payload, id=event_id, domain=st.run.domain, subject=cmd.subject)
    )
    if event.subject is None and st.run.subject is not None:
        event = Event(
            event.name,
            event.payload,
            id=event.id,
            domain=event.domain,
            subject=st.run.subject,
        )
    st.writes.publishes.append((pos, event, payload, op.branch.journal_path))
    committed: dict[int, JournalEntry] = yield Flush()
    entry = committed[pos]
    op.entry = entry
    st.keep(entry)
    return PublishResult.from_dict(_json.loads(entry.value))
