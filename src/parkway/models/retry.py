"""The retry policy of a step (:class:`Retry`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from parkway import limits
from parkway.durations import Duration, to_seconds
from parkway.errors import InvalidArgumentError, NonRetryableError, shown


@dataclass(frozen=True)
class Retry:
    """How often, and how patiently, a failing step is tried again.

    Args:
        max_attempts: Attempts in all, the first included (``1`` = no retry).
        backoff: Delay before the second attempt; later delays grow by ``factor``.
        factor: Multiplier applied to the delay after each failed attempt.
        max_backoff: Upper bound of any one delay; not below ``backoff``.
        non_retryable: Exception classes, or their qualified names as strings
            (``"billing.CardDeclined"`` or ``"CardDeclined"``), whose failures are
            final: an attempt raising one of them (or a subclass) fails the step at
            once, as one raising :class:`parkway.NonRetryableError` always does.

    Raises:
        InvalidArgumentError: A field is out of its range (``backoff`` above
            ``max_backoff`` among them), or ``non_retryable`` holds something
            that is neither an exception class nor a name.
    """

    max_attempts: int = 3
    backoff: Duration = 1.0
    factor: float = 2.0
    max_backoff: Duration = 60.0
    non_retryable: tuple[type[BaseException] | str, ...] = ()
    _delays: tuple[float, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:

        attempts, factor = self.max_attempts, self.factor
        if not _whole(attempts) or not 1 <= attempts <= limits.MAX_INT:
            raise InvalidArgumentError(
                f"Retry.max_attempts must be a whole number from 1 to 2**63 - 1, "
                f"got {shown(attempts)}",
                field="max_attempts",
            )
        # (Compared before any float(): 10**400 has none, and nan is in no range.)
        if (
            not isinstance(factor, int | float)
            or isinstance(factor, bool)
            or not (1 <= factor <= limits.MAX_RETRY_FACTOR)
        ):
            raise InvalidArgumentError(
                f"Retry.factor must be a number from 1 to {limits.MAX_RETRY_FACTOR:,}, "
                f"got {shown(factor)}",
                field="factor",
            )
        base = to_seconds(self.backoff, "Retry.backoff")
        cap = to_seconds(self.max_backoff, "Retry.max_backoff")
        if base > cap:
            raise InvalidArgumentError(
                f"Retry.backoff ({base:g}s) is above Retry.max_backoff ({cap:g}s): no delay "
                "could be that long; raise max_backoff or lower backoff",
                field="Retry.backoff",
            )
        object.__setattr__(self, "_delays", (base, cap))
        object.__setattr__(self, "non_retryable", _exception_kinds(self.non_retryable))

    def delay(self, failed_attempts: int) -> float:
        """Seconds to wait after the ``failed_attempts``-th failure."""
        base, cap = self._delays
        try:
            return min(cap, base * float(self.factor) ** (failed_attempts - 1))
        except OverflowError:  # (grown past any float: the cap, long before)
            return cap

    def retries(self, exc: BaseException) -> bool:
        """Whether a failure raising ``exc`` may be tried again (attempts allowing)."""
        if isinstance(exc, NonRetryableError):
            return False
        for kind in self.non_retryable:
            if isinstance(kind, str):
                if any(kind in _names(cls) for cls in type(exc).__mro__):
                    return False
            elif isinstance(exc, kind):
                return False
        return True


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _exception_kinds(value: object) -> tuple[type[BaseException] | str, ...]:
    """``Retry.non_retryable`` checked: a tuple of exception classes and names."""
    items = (value,) if isinstance(value, str | type) else value
    if not isinstance(items, tuple | list | frozenset | set):
        raise InvalidArgumentError(
            "Retry.non_retryable must be a tuple of exception classes or names, "
            f"got {shown(value)}",
            field="Retry.non_retryable",
        )
    for item in items:
        if isinstance(item, str):
            if not item.strip():
                raise InvalidArgumentError(
                    "Retry.non_retryable holds an empty name", field="Retry.non_retryable"
                )
        elif not (isinstance(item, type) and issubclass(item, BaseException)):
            raise InvalidArgumentError(
                "Retry.non_retryable must hold exception classes or their names, "
                f"got {shown(item)}",
                field="Retry.non_retryable",
            )
    return tuple(items)


def _names(cls: type) -> tuple[str, str, str]:
    """The names a string in ``Retry.non_retryable`` may give ``cls`` by."""
    return (cls.__name__, cls.__qualname__, f"{cls.__module__}.{cls.__qualname__}")
