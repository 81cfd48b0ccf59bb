"""The ``ctx``'s waits: on a condition, a signal, an event, a message."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from parkway import limits
from parkway.durations import Duration, to_seconds
from parkway.errors import InvalidArgumentError, shown
from parkway.events import check_message
from parkway.matching import check_match
from parkway.replay.commands import EventCmd, MessageCmd, SignalCmd, WaitUntilCmd
from parkway.replay.context_base import ContextBase


class Waits(ContextBase):
    """``ctx.wait_until``, ``ctx.wait_for_signal``, ``ctx.wait_for_event`` and
    ``ctx.wait_for_message``."""

    async def wait_until(
        self, predicate: Callable[[], Any], *, timeout: Duration | None = None
    ) -> None:
        """Park until ``predicate()`` (a sync function over the workflow's own
        variables) is true.

        It is checked when the run reaches the wait, and again whenever the run's
        state may have changed while it waits: after an update handler, or when
        another branch of a gather moved on.

        Raises:
            WaitTimeoutError: ``timeout`` passed first.
            InvalidArgumentError: ``predicate`` is not callable.
        """
        if not callable(predicate) or inspect.iscoroutinefunction(predicate):
            raise InvalidArgumentError(
                f"ctx.wait_until needs a plain function returning a bool, got {shown(predicate)}",
                field="predicate",
            )
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        await WaitUntilCmd(predicate, seconds)

    async def wait_for_signal(self, name: str, *, timeout: Duration | None = None) -> Any:
        """Park until a signal called ``name`` reaches this run; return its payload.

        Signals sent before the wait are kept in the run's mailbox and consumed
        oldest first, per name.

        Raises:
            WaitTimeoutError: ``timeout`` passed first.
        """
        name = limits.name(name, "signal name")
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        return await SignalCmd(name, seconds)

    async def wait_for_event(
        self,
        name: str,
        *,
        match: dict[str, Any] | None = None,
        subject: str | None = None,
        timeout: Duration | None = None,
        since_start: bool = False,
        ttl: Duration | None = None,
    ) -> Any:
        """Park until an event called ``name`` matching ``match`` is published; return its payload.

        Args:
            name: The event name.
            match: Payload fields that must deep-equal these values (``None``: any payload).
            subject: Omitted: this run's own subject (any subject if the run has
                none). A subject such as ``"product:456"``: a cross-subject
                subscription. ``"*"``: any subject in the run's domain.
            timeout: Give up after this long.
            since_start: Also accept the earliest matching event published since
                this run was created that it has not consumed yet (within
                ``event_retention``), decided atomically with parking.
            ttl: How long the subscription may live at most, a safety net against
                orphans: past it the sweeper removes it, and the run waits on for its
                timeout alone. Default: the timeout plus one day, or 90 days.

        Raises:
            WaitTimeoutError: ``timeout`` passed first.
        """
        name = limits.name(name, "event name")
        check_match(match)
        subject = limits.subject(subject)
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        ttl_seconds = None if ttl is None else to_seconds(ttl, "ttl")
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise InvalidArgumentError(f"ttl must be positive, got {shown(ttl)}")
        return await EventCmd(name, match, subject, seconds, bool(since_start), ttl_seconds)

    async def wait_for_message(
        self, name: str, key: str, *, timeout: Duration | None = None
    ) -> Any:
        """Park until a message ``(name, key)`` is correlated to this run; return its payload.

        A message buffered before the wait is consumed first, oldest first.

        Raises:
            DuplicateSubscriptionError: Another run already waits for ``(name, key)``.
            WaitTimeoutError: ``timeout`` passed first.
        """
        name, key = check_message(name, key)
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        return await MessageCmd(name, key, seconds)
