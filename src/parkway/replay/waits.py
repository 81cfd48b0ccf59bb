"""The replay machine's waits on an input: timers, signals, events and messages.

Each is given the machine's state (:class:`~parkway.replay.state.MachineState`)
and the operation it carries out live: it answers at once when its input came,
raises :class:`~parkway.replay.state.Park` (the input has not come: the wait is
journaled pending, with its timer and subscription), or fails at its deadline.
``ctx.first`` (:mod:`parkway.replay.composite`) looks for its members' inputs
with the helpers here.
"""

from __future__ import annotations

from typing import Any

from parkway import _json
from parkway.errors import DuplicateSubscriptionError, WaitTimeoutError
from parkway.matching import match_digest, shape_of
from parkway.replay.branch import Op, Pending
from parkway.replay.commands import EventCmd, MessageCmd, PersonCmd, SignalCmd, SleepCmd
from parkway.replay.requests import ReadHolder, ReadMailbox
from parkway.replay.state import MachineState, Park, subscription_ttl, wait_deadline
from parkway.replay.writes import EventWait, MessageWait
from parkway.store.base import (
    MESSAGE_TASK,
    JournalEntry,
    NewTask,
    SignalRecord,
    SubscriptionRecord,
)
from parkway.store.vocabulary import EntryKind, EntryState, TaskKind, WaitKind

DELIVERY_KINDS = frozenset({TaskKind.DELIVERY, TaskKind.MESSAGE})


# -- timers and signals ------------------------------------------------------------------


def sleep(st: MachineState, op: Pending, cmd: SleepCmd) -> None:
    entry = op.entry
    now = st.clock_now()
    if entry is not None and entry.deadline is not None:
        deadline = entry.deadline
    else:
        deadline = cmd.until if cmd.until is not None else now + (cmd.seconds or 0.0)
    if now >= deadline:
        st.record(op, EntryKind.SLEEP, EntryState.DONE, b"null")
        if entry is not None:
            st.writes.finished_waits.append(entry.pos)
        return None
    if entry is None:
        pos = st.record(op, EntryKind.SLEEP, EntryState.PENDING, None, deadline).pos
        st.writes.tasks.append(NewTask(st.run.id, deadline, TaskKind.TIMER, pos))
    raise Park


def wait_signal(st: MachineState, op: Pending, cmd: SignalCmd) -> Op:
    entry = op.entry
    now = st.clock_now()
    deadline, timeout = wait_deadline(entry, cmd.timeout, now)
    if st.mailbox is None:
        st.mailbox = yield ReadMailbox()
    signal = take_signal(st, cmd.name)
    if signal is not None:
        st.resolve(op, EntryKind.SIGNAL, signal.payload or b"null")
        st.writes.consumed_signals.append(signal.id)
        return _json.loads(signal.payload)
    if deadline is not None and now >= deadline:
        what = f"wait_for_signal({cmd.name!r})"
        if isinstance(cmd, PersonCmd):
            what = cmd.what or what
            if cmd.task is not None:
                st.writes.ended_tasks.append((cmd.task, "expired"))
        error = WaitTimeoutError(what, timeout or 0.0)
        raise st.fail_op(op, EntryKind.SIGNAL, error, entry is not None)
    if entry is None:
        st.park(op, EntryKind.SIGNAL, {"timeout": timeout}, deadline)
    raise Park


def find_signal(st: MachineState, name: str) -> SignalRecord | None:
    assert st.mailbox is not None
    return next((s for s in st.mailbox if s.name == name), None)


def take_signal(st: MachineState, name: str) -> SignalRecord | None:
    signal = find_signal(st, name)
    if signal is not None:
        assert st.mailbox is not None
        st.mailbox.remove(signal)
    return signal


# -- events and messages -----------------------------------------------------------------


def wait_event(st: MachineState, op: Pending, cmd: EventCmd) -> Any:
    entry = op.entry
    now = st.clock_now()
    deadline, timeout = wait_deadline(entry, cmd.timeout, now)
    envelope = delivery_for(st, op, deadline)
    if envelope is not None:
        st.resolve(op, EntryKind.EVENT, _json.dumps({"event": envelope}))
        return envelope["payload"]
    if deadline is not None and now >= deadline:
        error = WaitTimeoutError(f"wait_for_event({cmd.name!r})", timeout or 0.0)
        raise st.fail_op(op, EntryKind.EVENT, error, True)
    if entry is None:
        subject = cmd.subject or st.run.subject or "*"
        # (Any subject, "*", is what a wait on no subject means: not written.)
        value = {
            "timeout": timeout,
            "subject": None if subject == "*" else subject,
            "match": cmd.match,
        }
        pos = st.park(op, EntryKind.EVENT, value, deadline)
        sub = event_subscription(st, pos, cmd, subject, timeout, deadline, now)
        since = None
        if cmd.since_start:
            since = max(st.run.created_at, now - st.event_retention)
        st.writes.subscriptions.append(EventWait(sub, since, consumed_events(st)))
    raise Park


def event_subscription(
    st: MachineState,
    pos: int,
    cmd: EventCmd,
    subject: str,
    timeout: float | None,
    deadline: float | None,
    now: float,
) -> SubscriptionRecord:
    return SubscriptionRecord(
        run_id=st.run.id,
        pos=pos,
        kind=WaitKind.EVENT,
        domain=st.run.domain,
        name=cmd.name,
        subject=subject,
        shape=shape_of(cmd.match),
        digest=match_digest(cmd.match),
        match=None if cmd.match is None else _json.dumps(cmd.match),
        wait=f"wait_for_event:{cmd.name}#{pos}",
        expires_at=now + subscription_ttl(timeout, cmd.ttl),
        created_at=now,
        deadline=deadline,
    )


def wait_message(st: MachineState, op: Pending, cmd: MessageCmd) -> Op:
    entry = op.entry
    now = st.clock_now()
    if entry is not None:
        info = _json.loads(entry.value)
        deadline, timeout, key = entry.deadline, info.get("timeout"), info["key"]
    else:
        timeout, key = cmd.timeout, cmd.key
        deadline = None if timeout is None else now + timeout
    delivery = delivery_for(st, op, deadline)
    if delivery is not None:
        st.resolve(op, EntryKind.MESSAGE, _json.dumps({"message": delivery}))
        return delivery["payload"]
    holder: SubscriptionRecord | None = yield ReadHolder(cmd.name, key)
    if holder is not None and holder.run_id != st.run.id:
        error = DuplicateSubscriptionError(cmd.name, key, holder.run_id)
        raise st.fail_op(op, EntryKind.MESSAGE, error, True)
    if deadline is not None and now >= deadline:
        error2 = WaitTimeoutError(f"wait_for_message({cmd.name!r}, {key!r})", timeout or 0.0)
        raise st.fail_op(op, EntryKind.MESSAGE, error2, True)
    if entry is None or holder is None:
        # (A pending wait with no holder lost a registration race to a run that
        # has since finished waiting: register it now.)
        if entry is None:
            info = {"timeout": timeout, "key": key}
            pos = st.park(op, EntryKind.MESSAGE, info, deadline)
        else:
            pos = entry.pos
        sub = message_subscription(st, pos, cmd.name, key, timeout, deadline, now)
        st.writes.subscriptions.append(MessageWait(sub))
    raise Park


def message_subscription(
    st: MachineState,
    pos: int,
    name: str,
    key: str,
    timeout: float | None,
    deadline: float | None,
    now: float,
) -> SubscriptionRecord:
    return SubscriptionRecord(
        run_id=st.run.id,
        pos=pos,
        kind=WaitKind.MESSAGE,
        domain=st.run.domain,
        name=name,
        subject=key,
        shape="",
        digest="",
        match=None,
        wait=f"wait_for_message:{name}#{pos}",
        expires_at=now + subscription_ttl(timeout),
        created_at=now,
        deadline=deadline,
    )


def delivery_for(st: MachineState, op: Pending, deadline: float | None) -> Any:
    """The payload envelope of a delivery task aimed at ``op``'s wait, if one came."""
    if op.entry is None:
        return None  # (a wait reached only now has no subscription yet)
    return delivery_at(st, op.entry.pos, deadline, take=True)


def delivery_at(st: MachineState, pos: int, deadline: float | None, *, take: bool) -> Any:
    """The payload envelope of a delivery task aimed at wait ``pos``, if one came
    (``take``: it is consumed).

    A delivery published after the wait's deadline does not count: the timeout
    passed first, even if no worker had handled it yet.
    """
    for task in st.tasks:
        if task.kind in DELIVERY_KINDS and task.pos == pos and pos not in st.delivered:
            if deadline is not None and task.due_at > deadline:
                continue
            if take:
                st.delivered.add(pos)
                st.consumed_tasks.add(task.id)
            return _json.loads(task.payload)
    return None


def already_consumed(st: MachineState, entry: JournalEntry) -> None:
    """A delivery for a wait the journal has done was consumed before a crash: keep it
    from being buffered again (it is the same message, not a second one)."""
    body = _json.loads(entry.value).get("message")
    for task in st.tasks:
        if (
            task.kind == MESSAGE_TASK
            and task.pos == entry.pos
            and _json.loads(task.payload) == body
        ):
            st.consumed_tasks.add(task.id)


def consumed_events(st: MachineState) -> frozenset[str]:
    ids = set(st.event_ids)
    trigger = _json.loads(st.run.trigger)
    if trigger:
        ids.add(trigger.get("id"))
    return frozenset(i for i in ids if i)
