"""The ``ctx``'s steps and their compensations."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from parkway import limits
from parkway.durations import Duration, to_seconds
from parkway.errors import (
    CompensationFailedError,
    InvalidArgumentError,
    InvalidDurationError,
    InvalidInputError,
    shown,
)
from parkway.models import Retry
from parkway.replay.commands import StepCmd
from parkway.replay.context_base import ContextBase

T = TypeVar("T")


class Steps(ContextBase):
    """``ctx.step`` and ``ctx.compensate``."""

    @overload
    async def step(
        self,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        name: str | None = None,
        retry: Retry | None = None,
        compensate: Callable[[Any], Any] | None = None,
        timeout: Duration | None = None,
        **kwargs: Any,
    ) -> T: ...

    @overload
    async def step(
        self,
        fn: Callable[..., T],
        *args: Any,
        name: str | None = None,
        retry: Retry | None = None,
        compensate: Callable[[Any], Any] | None = None,
        timeout: Duration | None = None,
        **kwargs: Any,
    ) -> T: ...

    async def step(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        retry: Retry | None = None,
        compensate: Callable[[Any], Any] | None = None,
        timeout: Duration | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` once and journal its result.

        On replay the journaled result is returned and ``fn`` is not called
        again. Sync functions run in a thread so they cannot block the worker.

        Args:
            fn: A sync or async function; its result must be JSON-serialisable.
            name: The step's name in the journal (default: the function's name).
            retry: How to retry failures (default: no retry).
            compensate: The step's undo, a sync or async callable: once the step
                succeeds it is registered with the step's result as its only
                argument, and run (newest first, retried under ``retry``) by
                :meth:`compensate`, or when the workflow raises or the run is
                cancelled or times out. A run that completes leaves it unrun.
            timeout: How long each attempt may take (a ``timedelta``, seconds or
                ``"10s"``; default: no limit). At the deadline an ``async def``
                step is cancelled and a ``def`` step's thread abandoned (its late
                result is ignored); the attempt fails with ``StepTimeoutError``
                and is retried under ``retry`` like any failure.

        Raises:
            StepFailedError: The last attempt failed (``error_type``
                ``"StepTimeoutError"`` when it ran out of time).
            InvalidArgumentError: ``fn``, ``retry`` or ``timeout`` is malformed.
        """
        if not callable(fn):
            raise InvalidArgumentError(f"ctx.step needs a function, got {shown(fn)}")
        if retry is not None and not isinstance(retry, Retry):
            raise InvalidArgumentError(f"retry must be a parkway.Retry, got {shown(retry)}")
        if compensate is not None and not callable(compensate):
            raise InvalidArgumentError(
                f"compensate must be a function taking the step's result, got {shown(compensate)}"
            )
        seconds = None
        if timeout is not None:
            seconds = to_seconds(timeout, "ctx.step timeout")
            if seconds <= 0:
                raise InvalidDurationError(
                    timeout, "ctx.step timeout", detail="must be longer than zero"
                )
        if name is None:
            qualname = getattr(fn, "__qualname__", None)
            name = qualname if isinstance(qualname, str) and qualname else type(fn).__name__
        # Checked here, in the run, the same on every store (PostgreSQL's text takes
        # no NUL): the workflow sees the error at its call and the run says why.
        try:
            step_name = limits.text(
                name,
                "step name",
                field="name",
                max_length=limits.MAX_STEP_NAME_LENGTH,
                blank=False,
            )
        except InvalidInputError as exc:  # (it is not the run's input that is at fault)
            raise InvalidArgumentError(
                str(exc).removeprefix("invalid input: "), field="name"
            ) from None
        result = await StepCmd(fn, args, kwargs, step_name, retry, seconds)
        if compensate is not None:
            self._sides.register_compensation(step_name, compensate, result, retry)
        return result

    async def compensate(self) -> list[Any]:
        """Run every registered compensation not run yet, newest first, each as a
        journaled step (retried under its step's ``retry``).

        Returns:
            Their results, in the order they ran.

        Raises:
            CompensationFailedError: A compensation still failed after its retries
                (the others were run all the same); ``failed`` names their steps.
        """
        results, failed = await self._sides.run_compensations()
        if failed:
            raise CompensationFailedError(self.run_id, failed)
        return results
