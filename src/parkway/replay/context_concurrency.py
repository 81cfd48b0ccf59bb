"""The ``ctx``'s concurrency: branches (``ctx.gather``), the first of several waits
(``ctx.first``), and going on as new."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Coroutine
from typing import Any, cast

from parkway.errors import InvalidArgumentError, shown
from parkway.replay.commands import (
    ChildResultCmd,
    Command,
    ContinueAsNew,
    EventCmd,
    FirstCmd,
    GatherCmd,
    MessageCmd,
    PersonCmd,
    SignalCmd,
    SleepCmd,
)
from parkway.replay.context_base import ContextBase


class Concurrency(ContextBase):
    """``ctx.gather``, ``ctx.first`` and ``ctx.continue_as_new``."""

    async def gather(self, *aws: Awaitable[Any], return_exceptions: bool = False) -> list[Any]:
        """Run ``aws`` concurrently; return their results in argument order.

        Each argument is an unawaited ctx operation (``ctx.step(...)``,
        ``ctx.child(...)``, a wait) or a coroutine of yours that awaits ctx
        operations (a branch). Steps of different branches run at the same time;
        waits of different branches are all registered at once. Every operation
        keeps its journal position whatever order the branches finish in, so
        replay is safe. Nested gathers work.

        Args:
            aws: The branches.
            return_exceptions: Return exceptions in place instead of raising the
                first one.

        Raises:
            InvalidArgumentError: An argument is not a coroutine (nothing runs).
            Exception: Without ``return_exceptions``, the first exception a branch
                raised, once the other branches' steps in flight have settled
                (the branches still waiting are withdrawn).
        """
        branches = list(aws)
        for index, branch in enumerate(branches):
            if not inspect.iscoroutine(branch):
                _close_all(branches)
                raise InvalidArgumentError(
                    f"ctx.gather argument {index} must be an unawaited ctx operation or a "
                    f"coroutine (call it without await), got {type(branch).__name__} "
                    f"{shown(branch)}",
                    field=f"aws[{index}]",
                )
        coros = tuple(cast(Coroutine[Any, Any, Any], branch) for branch in branches)
        results: list[Any] = await GatherCmd(coros, bool(return_exceptions))
        return results

    async def first(self, **waits: Awaitable[Any]) -> tuple[str, Any]:
        """Park once on several waits; the first input to arrive wins.

        ``name, value = await ctx.first(paid=ctx.wait_for_event("payment.received",
        match={"order": id}), cancelled=ctx.wait_for_signal("cancel"), late=ctx.sleep("1d"))``

        Each keyword is an unawaited wait: ``ctx.wait_for_signal``,
        ``ctx.wait_for_event``, ``ctx.wait_for_message``, ``ctx.sleep``,
        ``ctx.sleep_until`` or a child's ``handle.result()``. The others are
        withdrawn in the transaction that resumes the run: a signal or message a
        losing wait did not take stays in the mailbox or the buffer.

        Returns:
            The winner's keyword and its value.

        Raises:
            InvalidArgumentError: No waits, or one that is not a wait (a step, say).
            WaitTimeoutError: A wait's own ``timeout`` passed first.
            DuplicateSubscriptionError: Another run already waits for a message wait's
                ``(name, key)``.
        """
        if not waits:
            raise InvalidArgumentError("ctx.first needs at least one wait, as a keyword")
        found: dict[str, Command] = {}
        try:
            for name, wait in waits.items():
                found[name] = _wait_command(name, wait)
        finally:
            _close_all(list(waits.values()))
        name, value = await FirstCmd(found)
        winner = found[name]
        if isinstance(winner, PersonCmd) and winner.convert is not None:
            value = winner.convert(value)  # (a callback's value, a task's result)
        return name, value

    def continue_as_new(self, input: Any = None) -> None:
        """End this generation and restart this run id with ``input`` and a fresh journal.

        Unconsumed signals carry over. Does not return.
        """
        raise ContinueAsNew(input)


# What ctx.first takes: the commands of the waits.
_WAITS = (SignalCmd, EventCmd, MessageCmd, SleepCmd, ChildResultCmd)


def _wait_command(name: str, wait: Any) -> Command:
    """The command an unawaited wait ``wait`` (keyword ``name`` of ctx.first) would
    yield: it is run to its first await, where it yields it."""
    if not inspect.iscoroutine(wait):
        raise InvalidArgumentError(
            f"ctx.first({name}=...) must be an unawaited wait such as "
            f"ctx.wait_for_signal(...), got {type(wait).__name__} {shown(wait)}",
            field=name,
        )
    command = wait.send(None)
    if not isinstance(command, _WAITS):
        what = command.describe() if isinstance(command, Command) else repr(command)
        raise InvalidArgumentError(
            f"ctx.first({name}=...) must be a wait (a signal, event or message wait, a "
            f"sleep, or a child's result), got {what}; run steps before or after it",
            field=name,
        )
    return command


def _close_all(coroutines: list[Any]) -> None:
    """Close coroutines handed over but never to be run (no 'never awaited' warning)."""
    for coro in coroutines:
        if inspect.iscoroutine(coro):
            coro.close()
