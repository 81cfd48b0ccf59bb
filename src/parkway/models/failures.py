"""Errors as data: how a run's error is stored and shown (:class:`ErrorInfo`), and how
an exception is journaled (:func:`error_dict`) and raised again on replay
(:func:`rebuild_error`)."""

from __future__ import annotations

import re
import traceback
from typing import Any

from parkway.errors import (
    CallbackFailedError,
    CompensationFailedError,
    DuplicateSubscriptionError,
    NonDeterminismError,
    ParkwayError,
    RunCancelledError,
    RunTimeoutError,
    StepFailedError,
    WaitTimeoutError,
    WorkflowFailedError,
)

# A lone surrogate: text that no store (nor JSON) can encode.
_SURROGATES = re.compile("[\ud800-\udfff]")


class ErrorInfo(str):
    """An error as stored with a run: reads as ``"Type: message"``.

    Also exposes ``.type``, ``.message`` and ``.traceback`` (and ``info["type"]``).
    """

    type: str
    message: str
    traceback: str | None

    def __new__(cls, type: str, message: str, traceback: str | None = None) -> ErrorInfo:
        self = super().__new__(cls, f"{type}: {message}" if message else type)
        self.type, self.message, self.traceback = type, message, traceback
        return self

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            if key in ("type", "message", "traceback"):
                return getattr(self, key)
            raise KeyError(key)
        return str.__getitem__(self, key)

    def to_dict(self) -> dict[str, Any]:
        """The error as ``{"type", "message", "traceback"}``."""
        return {"type": self.type, "message": self.message, "traceback": self.traceback}

    @classmethod
    def from_exception(cls, exc: BaseException, traceback: str | None = None) -> ErrorInfo:
        """Describe an exception."""
        return cls(type(exc).__name__, exception_text(exc), traceback)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ErrorInfo | None:
        """Rebuild from :meth:`to_dict` output (``None`` stays ``None``)."""
        if data is None:
            return None
        return cls(data.get("type", "Exception"), data.get("message", ""), data.get("traceback"))


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or the name of its type when that cannot be had.

    A step's exception is the user's object: its ``__str__`` may raise, or return
    something that is not text, or text no store can encode (a lone surrogate).
    What it says is recorded, logged and journaled; none of that may fail on it
    (a failure there once had its run retried, and its step re-run, for ever).
    """
    try:
        text = str(exc)
    except BaseException:  # (whatever it raised: the type still says what failed)
        return type(exc).__name__
    return _encodable(text)


def _encodable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (JSON refuses them)."""
    if _SURROGATES.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_dict(exc: BaseException, *, with_traceback: bool = False) -> dict[str, Any]:
    """Describe an exception as data (journaled, stored with a run), so that
    :func:`rebuild_error` can raise it again on replay."""
    data: dict[str, Any] = {"type": type(exc).__name__, "message": exception_text(exc)}
    if isinstance(exc, StepFailedError):
        data["args"] = [exc.step, exc.attempts, exc.error_type, exc.error_message]
    elif isinstance(exc, WaitTimeoutError):
        data["args"] = [exc.what, exc.timeout]
    elif isinstance(exc, WorkflowFailedError):
        data["args"] = [exc.run_id, exc.error.to_dict() if exc.error else None]
    elif isinstance(exc, RunCancelledError):
        data["args"] = [exc.run_id]
    elif isinstance(exc, NonDeterminismError):
        data["args"] = [exc.run_id, exc.position, exc.expected, exc.got]
    elif isinstance(exc, DuplicateSubscriptionError):
        data["args"] = [exc.name, exc.key, exc.holder]
    elif isinstance(exc, CallbackFailedError):
        data["args"] = [exc.message]
    elif isinstance(exc, RunTimeoutError):
        data["args"] = [exc.run_id, exc.timeout]
    elif isinstance(exc, CompensationFailedError):
        data["args"] = [exc.run_id, exc.failed]
    if with_traceback:
        data["traceback"] = _encodable("".join(traceback.format_exception(exc)))
    return data


def rebuild_error(data: dict[str, Any]) -> Exception:
    """The exception :func:`error_dict` described (a ParkwayError when unknown)."""
    kind, args = data.get("type"), data.get("args")
    if args is not None:
        if kind == "StepFailedError":
            return StepFailedError(*args)
        if kind == "WaitTimeoutError":
            return WaitTimeoutError(*args)
        if kind == "WorkflowFailedError":
            return WorkflowFailedError(args[0], ErrorInfo.from_dict(args[1]))
        if kind == "RunCancelledError":
            return RunCancelledError(*args)
        if kind == "NonDeterminismError":
            return NonDeterminismError(*args)
        if kind == "DuplicateSubscriptionError":
            return DuplicateSubscriptionError(*args)
        if kind == "CallbackFailedError":
            return CallbackFailedError(*args)
        if kind == "RunTimeoutError":
            return RunTimeoutError(*args)
        if kind == "CompensationFailedError":
            return CompensationFailedError(*args)
    return ParkwayError(f"{kind}: {data.get('message')}")
