"""How an error message shows a caller's value: short, and never raising."""

from __future__ import annotations

import reprlib

# How much of a caller's value an error message shows.
SHOWN_LENGTH = 80
# An int with more bits than this is described, not written out: str() of one over
# 4,300 digits raises ValueError, and a message need not hold 80 digits of it.
_SHOWN_INT_BITS = 200


class _Shown(reprlib.Repr):
    """``repr``, bounded, for any value a caller may hand us: a long string or list
    is cut, a huge int is described by its size, and an object whose ``__repr__``
    raises is named by its type (``reprlib`` catches that for instances)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = SHOWN_LENGTH
        self.maxlevel = 3

    def repr_int(self, x: int, level: int) -> str:
        return _int_text(x)

    def repr_str(self, x: str, level: int) -> str:
        # (A str, exactly: a subclass goes through repr_instance, which guards its repr.)
        if len(x) <= SHOWN_LENGTH:
            return repr(x)
        return f"{x[:60]!r}...{x[-12:]!r} ({len(x)} characters)"

    def repr_instance(self, x: object, level: int) -> str:
        if isinstance(x, int) and int.bit_length(x) > _SHOWN_INT_BITS:  # (an IntEnum...)
            return _int_text(int.__int__(x))
        try:
            text = repr(x)
        except Exception:  # (the caller's __repr__ is not ours to trust)
            return f"<{type(x).__name__} object>"
        if not isinstance(text, str):
            return f"<{type(x).__name__} object>"
        return text if len(text) <= SHOWN_LENGTH else f"{text[:60]}...{text[-12:]}"


def _int_text(x: int) -> str:
    if x.bit_length() <= _SHOWN_INT_BITS:
        return int.__repr__(x)
    digits = int(x.bit_length() * 0.30103) + 1
    return f"{'-' if x < 0 else ''}<an int of about {digits:,} digits>"


_shown = _Shown()


def shown(value: object) -> str:
    """``repr(value)`` for an error message, built safely whatever the caller passed:
    at most about :data:`SHOWN_LENGTH` characters, never raising (not for an int of
    10,000 digits, nor for an object whose ``__repr__`` raises)."""
    try:
        return _shown.repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"


def describe(exc: BaseException) -> str:
    """``str(exc)`` for a message, safely: an exception whose ``__str__`` raises (or
    returns no string) is named by its type, and a long message is cut."""
    try:
        text = str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose message cannot be shown>"
    if not isinstance(text, str):
        return f"<{type(exc).__name__} whose message cannot be shown>"
    return text if len(text) <= 1000 else f"{text[:1000]}... ({len(text)} characters)"
