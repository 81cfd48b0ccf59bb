"""The replay machine's composite operations: ``ctx.gather``, ``ctx.first`` and
``ctx.wait_until``, and how an operation's answer reaches its branch.

A gather runs each of its awaitables as a branch of its own (see
:mod:`parkway.replay.branch`) and answers once all have ended; the first
exception (unless ``return_exceptions``) is raised once the other branches'
steps in flight have settled, and the branches still waiting are withdrawn.

``first`` parks once on several waits. Each wait gets a position of its own
(for its timer, subscription or delivery) but no journal entry: the ``first``
entry lists them, and records the winner. The first input to arrive wins; the
others are withdrawn in the commit of that advance: their subscriptions and
timers go, a message delivered to one is buffered again, and a signal one did
not take stays in the mailbox.
"""

from __future__ import annotations

from typing import Any

from parkway import _json
from parkway.errors import (
    DuplicateSubscriptionError,
    RunCancelledError,
    WaitTimeoutError,
    WorkflowFailedError,
)
from parkway.models import ErrorInfo, RunStatus
from parkway.replay.branch import Branch, Group, Op, Pending
from parkway.replay.commands import (
    ChildResultCmd,
    Command,
    EventCmd,
    FirstCmd,
    GatherCmd,
    MessageCmd,
    PersonCmd,
    SignalCmd,
    SleepCmd,
    WaitUntilCmd,
)
from parkway.replay.ops import read_child
from parkway.replay.requests import ReadHolder, ReadMailbox
from parkway.replay.state import LATER, MachineState, Park, close_branch, wait_deadline
from parkway.replay.waits import (
    consumed_events,
    delivery_at,
    event_subscription,
    find_signal,
    message_subscription,
    take_signal,
)
from parkway.replay.writes import EventWait, MessageWait
from parkway.store.base import NewTask, RunRecord
from parkway.store.vocabulary import EntryKind, EntryState, TaskKind

# The kinds of waits ctx.first takes, by command.
FIRST_KINDS: dict[type[Command], EntryKind] = {
    SignalCmd: EntryKind.SIGNAL,
    PersonCmd: EntryKind.SIGNAL,
    EventCmd: EntryKind.EVENT,
    MessageCmd: EntryKind.MESSAGE,
    SleepCmd: EntryKind.SLEEP,
    ChildResultCmd: EntryKind.CHILD_RESULT,
}


# -- gather ------------------------------------------------------------------------------


def gather(st: MachineState, op: Pending, cmd: GatherCmd) -> Any:
    """Start one branch per awaitable; the gather answers when they have ended."""
    if op.entry is None:
        st.record(op, EntryKind.GATHER, EntryState.DONE, _json.dumps(len(cmd.branches)))
    if not cmd.branches:
        return []
    parent = op.branch
    group = op.group = Group(op, [], cmd.return_exceptions, [None] * len(cmd.branches))
    for slot, coro in enumerate(cmd.branches):
        path = parent.child_path(op.index, slot)
        branch = Branch(path, coro, st.by_branch.get(path, []), group, slot)
        group.branches.append(branch)
        st.ready.append((branch, None, None))
    return LATER


def branch_ended(st: MachineState, branch: Branch, value: Any, error: BaseException | None) -> None:
    """A gather's branch returned ``value`` or raised ``error``."""
    group = branch.group
    assert group is not None
    if error is not None and not group.return_exceptions:
        if group.failure is None:
            group.failure = error
            for other in group.branches:
                if not other.done and not other.withdrawn:
                    withdraw(st, other)
    else:
        group.results[branch.slot] = error if error is not None else value
    settle(st, group)


def answer(st: MachineState, op: Pending, value: Any, error: BaseException | None) -> None:
    """``op`` is over: its branch goes on with ``value`` (or ``error`` raised)."""
    branch = op.branch
    branch.blocked = None
    if branch.withdrawn:
        # (Its gather taken first: closing the branch cuts it from its group, and
        # a group never told its last step settled never answers: the run parked
        # on nothing when a sibling's failure came before this step's result.)
        group = branch.group
        close_branch(branch)
        if group is not None and group.branches:
            settle(st, group)
        return
    st.ready.append((branch, value, error))


def settle(st: MachineState, group: Group) -> None:
    if group.settled():
        if group.failure is not None:
            answer(st, group.parent, None, group.failure)
        else:
            answer(st, group.parent, list(group.results), None)
        # It, its operation and its branches refer to each other: cut once answered,
        # a finished gather goes by reference counting, not by a full collection.
        group.parent.group = None
        for branch in group.branches:
            branch.group = None


def withdraw(st: MachineState, branch: Branch) -> None:
    """Advance ``branch`` no more: its wait (if any) is withdrawn; a step it has in
    flight settles first (see ``Group.settled``)."""
    branch.withdrawn = True
    st.withdrawn_paths.append(branch.path)
    op = branch.blocked
    if op is None or op.requested:
        if op is None:
            close_branch(branch)
        return
    st.forget(op)
    if op.group is not None:
        for child in op.group.branches:
            if not child.done and not child.withdrawn:
                withdraw(st, child)
    elif op.entry is not None and op.entry.state == EntryState.PENDING:
        if isinstance(op.cmd, PersonCmd) and op.cmd.task is not None:
            st.writes.ended_tasks.append((op.cmd.task, "cancelled"))
        entry = st.record(
            op, op.entry.kind, EntryState.WITHDRAWN, op.entry.value, op.entry.deadline
        )
        if op.entry.kind != EntryKind.SIGNAL or entry.deadline is not None:
            st.writes.finished_waits.append(entry.pos)
    branch.blocked = None
    close_branch(branch)


# -- wait_until ----------------------------------------------------------------------------


def wait_until(st: MachineState, op: Pending, cmd: WaitUntilCmd) -> None:
    """Answer once ``cmd.predicate()`` holds (checked now, and whenever the run is
    quiet again); else park, with a timer if it has a timeout."""
    entry = op.entry
    now = st.clock_now()
    deadline, timeout = wait_deadline(entry, cmd.timeout, now)
    if cmd.predicate():
        st.resolve(op, EntryKind.WAIT_UNTIL, b"null")
        return None
    if deadline is not None and now >= deadline:
        error = WaitTimeoutError("ctx.wait_until", timeout or 0.0)
        raise st.fail_op(op, EntryKind.WAIT_UNTIL, error, entry is not None)
    if entry is None:
        st.park(op, EntryKind.WAIT_UNTIL, {"timeout": timeout}, deadline)
    st.conditions.append(op)
    raise Park


def check_conditions(st: MachineState) -> bool:
    """Answer the ``wait_until``s whose predicate holds now; whether any did."""
    moved = False
    for op in list(st.conditions):
        st.conditions.remove(op)
        if op.branch.withdrawn or op.branch.done:
            continue
        try:
            holds = op.cmd.predicate()  # type: ignore[attr-defined]
        except Exception as exc:
            st.unpark(op)
            answer(st, op, None, exc)
            moved = True
            continue
        if holds:
            st.unpark(op)
            st.resolve(op, EntryKind.WAIT_UNTIL, b"null")
            answer(st, op, None, None)
            moved = True
        else:
            st.conditions.append(op)
    return moved


# -- first -------------------------------------------------------------------------------


def first(st: MachineState, op: Pending, cmd: FirstCmd) -> Op:
    """Answer ``(keyword, value)`` of the first wait whose input came; else park."""
    entry = op.entry
    now = st.clock_now()
    if entry is None:
        members = [new_member(st, name, wait, now) for name, wait in cmd.waits.items()]
    else:
        members = _json.loads(entry.value)["members"]
    if st.mailbox is None and any(m["kind"] == "signal" for m in members):
        st.mailbox = yield ReadMailbox()
    best: tuple[tuple[float, int], dict[str, Any], Any, BaseException | None] | None = None
    for order, member in enumerate(members):
        found = yield from member_input(st, member, entry is None, now)
        if found is not None and (best is None or (found[0], order) < best[0]):
            best = ((found[0], order), member, found[1], found[2])
    if best is not None:
        _, member, value, error = best
        take_member(st, member)
        if entry is not None:  # its waits were registered: they all go now
            st.writes.finished_waits.extend(m["pos"] for m in members)
        for other in members:  # a human task nobody waits for any more ends
            if other.get("task") is not None and (other is not member or error is not None):
                status = "cancelled" if other is not member else "expired"
                st.writes.ended_tasks.append((other["task"], status))
        if error is not None:
            raise st.fail_op(op, EntryKind.FIRST, error, False)  # type: ignore[arg-type]
        result = {"name": member["name"], "value": value}
        st.record(op, EntryKind.FIRST, EntryState.DONE, _json.dumps(result))
        return member["name"], value
    if entry is None:
        register_members(st, op, members, now)
    raise Park


def new_member(st: MachineState, name: str, wait: Command, now: float) -> dict[str, Any]:
    """How ``first`` keeps one of its waits: its kind, position and deadline."""
    member: dict[str, Any] = {"name": name, "kind": FIRST_KINDS[type(wait)], "pos": -1}
    timeout: float | None = None
    if isinstance(wait, SleepCmd):
        member["deadline"] = wait.until if wait.until is not None else now + (wait.seconds or 0)
    elif isinstance(wait, SignalCmd | EventCmd | MessageCmd):
        timeout = wait.timeout
        member["deadline"] = None if timeout is None else now + timeout
    member["timeout"] = timeout
    if isinstance(wait, SignalCmd):
        member["signal"] = wait.name
        if isinstance(wait, PersonCmd) and wait.task is not None:
            member["task"] = wait.task
    elif isinstance(wait, EventCmd):
        member.update(
            event=wait.name,
            match=wait.match,
            since_start=wait.since_start,
            ttl=wait.ttl,
            subject=wait.subject or st.run.subject or "*",
        )
    elif isinstance(wait, MessageCmd):
        member.update(message=wait.name, key=wait.key)
    elif isinstance(wait, ChildResultCmd):
        member["child"] = wait.name
    return member


def member_input(st: MachineState, member: dict[str, Any], first_time: bool, now: float) -> Op:
    """``(arrived at, value, error)`` of ``member``'s input if it came, else ``None``."""
    kind, deadline = member["kind"], member.get("deadline")
    if kind == EntryKind.SIGNAL:
        signal = find_signal(st, member["signal"])
        if signal is not None:
            return signal.at, _json.loads(signal.payload), None
    elif kind in (EntryKind.EVENT, EntryKind.MESSAGE) and not first_time:
        body = delivery_at(st, member["pos"], deadline, take=False)
        if body is not None:
            at = next(t.due_at for t in st.tasks if t.pos == member["pos"])
            return at, body["payload"], None
    elif kind == EntryKind.CHILD_RESULT:
        child: RunRecord = yield from read_child(st, member["child"])
        if child.status == RunStatus.COMPLETED:
            return child.updated_at, _json.loads(child.output), None
        if child.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            return child.updated_at, None, child_error(child)
    if kind == EntryKind.MESSAGE:
        holder = yield ReadHolder(member["message"], member["key"])
        if holder is not None and holder.run_id != st.run.id:
            error = DuplicateSubscriptionError(member["message"], member["key"], holder.run_id)
            return now, None, error
    if deadline is not None and now >= deadline:
        if kind == EntryKind.SLEEP:
            return deadline, None, None
        what = f"{kind} wait {member['name']!r} of ctx.first"
        return deadline, None, WaitTimeoutError(what, member["timeout"] or 0.0)
    return None


def child_error(child: RunRecord) -> BaseException:
    if child.status == RunStatus.CANCELLED:
        return RunCancelledError(child.id)
    return WorkflowFailedError(child.id, ErrorInfo.from_dict(_json.loads(child.error)))


def take_member(st: MachineState, member: dict[str, Any]) -> None:
    """Consume the winner's input (the losers' stay where they are)."""
    if member["kind"] == "signal":
        signal = take_signal(st, member["signal"])
        if signal is not None:
            st.writes.consumed_signals.append(signal.id)
    elif member["kind"] in ("event", "message"):
        delivery_at(st, member["pos"], member.get("deadline"), take=True)


def register_members(
    st: MachineState, op: Pending, members: list[dict[str, Any]], now: float
) -> None:
    """Park on every member: positions, timers and subscriptions, then the entry."""
    for member in members:
        member["pos"] = st.alloc()
    st.record(op, EntryKind.FIRST, EntryState.PENDING, _json.dumps({"members": members}))
    for member in members:
        pos, deadline = member["pos"], member.get("deadline")
        if deadline is not None:
            st.writes.tasks.append(NewTask(st.run.id, deadline, TaskKind.TIMER, pos))
        if member["kind"] == "event":
            sub = event_subscription(
                st, pos, _as_event(member), member["subject"], member["timeout"], deadline, now
            )
            since = None
            if member.get("since_start"):
                since = max(st.run.created_at, now - st.event_retention)
            st.writes.subscriptions.append(EventWait(sub, since, consumed_events(st)))
        elif member["kind"] == "message":
            sub = message_subscription(
                st, pos, member["message"], member["key"], member["timeout"], deadline, now
            )
            st.writes.subscriptions.append(MessageWait(sub))


def _as_event(member: dict[str, Any]) -> EventCmd:
    return EventCmd(
        member["event"],
        member.get("match"),
        member.get("subject"),
        member.get("timeout"),
        bool(member.get("since_start")),
        member.get("ttl"),
    )
