"""The replay machine's composite operations: ``ctx.gather`` and ``ctx.first``.

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
from parkway.replay.ops import Operations
from parkway.replay.requests import ReadHolder, ReadMailbox
from parkway.replay.state import LATER, Park
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


class Composites(Operations):
    """``ctx.gather`` and ``ctx.first``."""

    # -- gather ------------------------------------------------------------------------------

    def _gather(self, op: Pending, cmd: GatherCmd) -> Any:
        """Start one branch per awaitable; the gather answers when they have ended."""
        if op.entry is None:
            self._record(op, EntryKind.GATHER, EntryState.DONE, _json.dumps(len(cmd.branches)))
        if not cmd.branches:
            return []
        parent = op.branch
        group = op.group = Group(op, [], cmd.return_exceptions, [None] * len(cmd.branches))
        for slot, coro in enumerate(cmd.branches):
            path = parent.child_path(op.index, slot)
            branch = Branch(path, coro, self._by_branch.get(path, []), group, slot)
            group.branches.append(branch)
            self._ready.append((branch, None, None))
        return LATER

    def _branch_ended(self, branch: Branch, value: Any, error: BaseException | None) -> None:
        """A gather's branch returned ``value`` or raised ``error``."""
        group = branch.group
        assert group is not None
        if error is not None and not group.return_exceptions:
            if group.failure is None:
                group.failure = error
                for other in group.branches:
                    if not other.done and not other.withdrawn:
                        self._withdraw(other)
        else:
            group.results[branch.slot] = error if error is not None else value
        self._settle(group)

    def _withdrawn_settled(self, branch: Branch, group: Group | None) -> None:
        """A withdrawn branch's last step has settled (``group``: its gather's)."""
        if group is not None and group.branches:
            self._settle(group)

    def _settle(self, group: Group) -> None:
        if group.settled():
            if group.failure is not None:
                self._answer(group.parent, None, group.failure)
            else:
                self._answer(group.parent, list(group.results), None)
            # It, its operation and its branches refer to each other: cut once answered,
            # a finished gather goes by reference counting, not by a full collection.
            group.parent.group = None
            for branch in group.branches:
                branch.group = None

    def _withdraw(self, branch: Branch) -> None:
        """Advance ``branch`` no more: its wait (if any) is withdrawn; a step it has in
        flight settles first (see ``Group.settled``)."""
        branch.withdrawn = True
        self._withdrawn_paths.append(branch.path)
        op = branch.blocked
        if op is None or op.requested:
            if op is None:
                self._close_branch(branch)
            return
        self._forget(op)
        if op.group is not None:
            for child in op.group.branches:
                if not child.done and not child.withdrawn:
                    self._withdraw(child)
        elif op.entry is not None and op.entry.state == EntryState.PENDING:
            if isinstance(op.cmd, PersonCmd) and op.cmd.task is not None:
                self.writes.ended_tasks.append((op.cmd.task, "cancelled"))
            entry = self._record(
                op, op.entry.kind, EntryState.WITHDRAWN, op.entry.value, op.entry.deadline
            )
            if op.entry.kind != EntryKind.SIGNAL or entry.deadline is not None:
                self.writes.finished_waits.append(entry.pos)
        branch.blocked = None
        self._close_branch(branch)

    # -- wait_until ----------------------------------------------------------------------------

    def _wait_until(self, op: Pending, cmd: WaitUntilCmd) -> None:
        """Answer once ``cmd.predicate()`` holds (checked now, and whenever the run is
        quiet again); else park, with a timer if it has a timeout."""
        entry = op.entry
        now = self.clock_now()
        deadline, timeout = self._deadline(entry, cmd.timeout, now)
        if cmd.predicate():
            self._resolve(op, EntryKind.WAIT_UNTIL, b"null")
            return None
        if deadline is not None and now >= deadline:
            error = WaitTimeoutError("ctx.wait_until", timeout or 0.0)
            raise self._fail_op(op, EntryKind.WAIT_UNTIL, error, entry is not None)
        if entry is None:
            self._park(op, EntryKind.WAIT_UNTIL, {"timeout": timeout}, deadline)
        self._conditions.append(op)
        raise Park

    def _check_conditions(self) -> bool:
        """Answer the ``wait_until``s whose predicate holds now; whether any did."""
        moved = False
        for op in list(self._conditions):
            self._conditions.remove(op)
            if op.branch.withdrawn or op.branch.done:
                continue
            try:
                holds = op.cmd.predicate()  # type: ignore[attr-defined]
            except Exception as exc:
                self._unpark(op)
                self._answer(op, None, exc)
                moved = True
                continue
            if holds:
                self._unpark(op)
                self._resolve(op, EntryKind.WAIT_UNTIL, b"null")
                self._answer(op, None, None)
                moved = True
            else:
                self._conditions.append(op)
        return moved

    # -- first -------------------------------------------------------------------------------

    def _first(self, op: Pending, cmd: FirstCmd) -> Op:
        """Answer ``(keyword, value)`` of the first wait whose input came; else park."""
        entry = op.entry
        now = self.clock_now()
        if entry is None:
            members = [self._member(name, wait, now) for name, wait in cmd.waits.items()]
        else:
            members = _json.loads(entry.value)["members"]
        if self._mailbox is None and any(m["kind"] == "signal" for m in members):
            self._mailbox = yield ReadMailbox()
        best: tuple[tuple[float, int], dict[str, Any], Any, BaseException | None] | None = None
        for order, member in enumerate(members):
            found = yield from self._member_input(member, entry is None, now)
            if found is not None and (best is None or (found[0], order) < best[0]):
                best = ((found[0], order), member, found[1], found[2])
        if best is not None:
            _, member, value, error = best
            self._take_member(member)
            if entry is not None:  # its waits were registered: they all go now
                self.writes.finished_waits.extend(m["pos"] for m in members)
            for other in members:  # a human task nobody waits for any more ends
                if other.get("task") is not None and (other is not member or error is not None):
                    status = "cancelled" if other is not member else "expired"
                    self.writes.ended_tasks.append((other["task"], status))
            if error is not None:
                raise self._fail_op(op, EntryKind.FIRST, error, False)  # type: ignore[arg-type]
            result = {"name": member["name"], "value": value}
            self._record(op, EntryKind.FIRST, EntryState.DONE, _json.dumps(result))
            return member["name"], value
        if entry is None:
            self._register_members(op, members, now)
        raise Park

    def _member(self, name: str, wait: Command, now: float) -> dict[str, Any]:
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
                event=wait.name, match=wait.match, since_start=wait.since_start, ttl=wait.ttl,
                subject=wait.subject or self.run.subject or "*",
            )  # fmt: skip
        elif isinstance(wait, MessageCmd):
            member.update(message=wait.name, key=wait.key)
        elif isinstance(wait, ChildResultCmd):
            member["child"] = wait.name
        return member

    def _member_input(self, member: dict[str, Any], first_time: bool, now: float) -> Op:
        """``(arrived at, value, error)`` of ``member``'s input if it came, else ``None``."""
        kind, deadline = member["kind"], member.get("deadline")
        if kind == EntryKind.SIGNAL:
            signal = self._find_signal(member["signal"])
            if signal is not None:
                return signal.at, _json.loads(signal.payload), None
        elif kind in (EntryKind.EVENT, EntryKind.MESSAGE) and not first_time:
            body = self._delivery_at(member["pos"], deadline, take=False)
            if body is not None:
                at = next(t.due_at for t in self.tasks if t.pos == member["pos"])
                return at, body["payload"], None
        elif kind == EntryKind.CHILD_RESULT:
            child: RunRecord = yield from self._child(member["child"])
            if child.status == RunStatus.COMPLETED:
                return child.updated_at, _json.loads(child.output), None
            if child.status in (RunStatus.FAILED, RunStatus.CANCELLED):
                return child.updated_at, None, self._child_error(child)
        if kind == EntryKind.MESSAGE:
            holder = yield ReadHolder(member["message"], member["key"])
            if holder is not None and holder.run_id != self.run.id:
                error = DuplicateSubscriptionError(member["message"], member["key"], holder.run_id)
                return now, None, error
        if deadline is not None and now >= deadline:
            if kind == EntryKind.SLEEP:
                return deadline, None, None
            what = f"{kind} wait {member['name']!r} of ctx.first"
            return deadline, None, WaitTimeoutError(what, member["timeout"] or 0.0)
        return None

    @staticmethod
    def _child_error(child: RunRecord) -> BaseException:
        if child.status == RunStatus.CANCELLED:
            return RunCancelledError(child.id)
        return WorkflowFailedError(child.id, ErrorInfo.from_dict(_json.loads(child.error)))

    def _take_member(self, member: dict[str, Any]) -> None:
        """Consume the winner's input (the losers' stay where they are)."""
        if member["kind"] == "signal":
            signal = self._take_signal(member["signal"])
            if signal is not None:
                self.writes.consumed_signals.append(signal.id)
        elif member["kind"] in ("event", "message"):
            self._delivery_at(member["pos"], member.get("deadline"), take=True)

    def _register_members(self, op: Pending, members: list[dict[str, Any]], now: float) -> None:
        """Park on every member: positions, timers and subscriptions, then the entry."""
        for member in members:
            member["pos"] = self._alloc()
        self._record(op, EntryKind.FIRST, EntryState.PENDING, _json.dumps({"members": members}))
        for member in members:
            pos, deadline = member["pos"], member.get("deadline")
            if deadline is not None:
                self.writes.tasks.append(NewTask(self.run.id, deadline, TaskKind.TIMER, pos))
            if member["kind"] == "event":
                sub = self._event_subscription(
                    pos, _as_event(member), member["subject"], member["timeout"], deadline, now
                )
                since = None
                if member.get("since_start"):
                    since = max(self.run.created_at, now - self.event_retention)
                self.writes.subscriptions.append(EventWait(sub, since, self._consumed_events()))
            elif member["kind"] == "message":
                sub = self._message_subscription(
                    pos, member["message"], member["key"], member["timeout"], deadline, now
                )
                self.writes.subscriptions.append(MessageWait(sub))


def _as_event(member: dict[str, Any]) -> EventCmd:
    return EventCmd(
        member["event"], member.get("match"), member.get("subject"), member.get("timeout"),
        bool(member.get("since_start")), member.get("ttl"),
    )  # fmt: skip
