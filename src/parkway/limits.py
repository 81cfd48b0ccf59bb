"""The documented limits of what parkway takes, in one place, checked at the edge.

Every value a caller hands the engine (a run id, a name, a key, a subject, a
domain, a payload, a duration) is checked here before anything is written, so
that each backend takes and refuses the same values and a bad one is an error
naming the field, never a driver's error or a bare Python one. The table of
limits in ``docs/reference/limits.md`` is this module's constants.

Why these numbers:

- Lengths: PostgreSQL refuses an index entry over 2,704 bytes. The widest
  entry (``subscriptions_lookup``) holds a domain, an event name, a subject and
  the keys of a ``match``; at up to 4 UTF-8 bytes a character, 128 characters
  each (the keys together) keep it under that on every backend. Ids are
  indexed alone, so they may be longer: 255, a common database limit.
- Characters: no control characters (NUL cannot be stored in PostgreSQL text;
  a newline cannot be routed in a URL path) and no lone surrogates (not
  encodable as UTF-8).
- Depth: the JSON encoder stops at 254 levels and the engine wraps payloads in
  envelopes of its own (an event, a delivery, a journal entry): 128 levels
  leave room for them.
- Durations: 100 years keeps every deadline the engine computes within the
  years a ``datetime`` can show.
"""

from __future__ import annotations

import re
from typing import Any

from parkway.errors import InvalidInputError, shown

# Ids a caller gives: run ids, event ids, message de-duplication ids.
MAX_ID_LENGTH = 255
# Workflow, event, signal and message names.
MAX_NAME_LENGTH = 128
# Message keys (the business key of a correlation).
MAX_KEY_LENGTH = 128
MAX_SUBJECT_LENGTH = 128
MAX_DOMAIN_LENGTH = 128
# The keys of a wait_for_event match, together (they are indexed as one).
MAX_MATCH_KEYS_LENGTH = 128
# Nesting of a JSON value: [] and {} are one level, [[]] two.
MAX_DEPTH = 128
# The longest duration (timeouts, ttls, sleeps, retention): 100 years of 365.25 days.
MAX_DURATION_SECONDS = 36_525 * 86_400
# Buffered message ids are 64-bit signed integers on every backend.
MAX_MESSAGE_ID = 2**63 - 1
# A store URL (a file path, or a server's address with its options).
MAX_URL_LENGTH = 4096
# A step's name: its function's qualified name by default, or "<action>@<node id>"
# in a JSON flow, so longer than other names; kept in the journal, not indexed.
MAX_STEP_NAME_LENGTH = 512
# Integers are 64-bit on every backend and in JSON as parkway stores it: signed,
# and unsigned up to 2**64 - 1 in payloads (JSON numbers).
MIN_INT = -(2**63)
MAX_INT = 2**63 - 1
MAX_JSON_INT = 2**64 - 1
# The most a step's retry delay may grow by after each failure (Retry.factor).
MAX_RETRY_FACTOR = 1000
# An HTTP request body larger than this is refused with 413.
MAX_BODY_BYTES = 1024 * 1024

# Characters no id, name, key, subject or domain may hold: C0 and C1 control
# characters (NUL among them), DEL, and lone surrogates.
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NOT_BLANK = re.compile(r"\S")
# The JSON Schema of such a text: no forbidden character (surrogates cannot
# reach the HTTP API: its JSON parser refuses them).
TEXT_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f]*$"
# ...and one that is not blank besides.
NAME_PATTERN = (
    r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
)
_ASCII_DIGITS = re.compile(r"[0-9]+")


def _describe(char: str) -> str:
    if char == "\x00":
        return "a NUL character"
    if "\ud800" <= char <= "\udfff":
        return f"a lone surrogate (U+{ord(char):04X})"
    return f"a control character (U+{ord(char):04X})"


def bad_character(value: str) -> str | None:
    """The first character no id or name may hold, described with its index
    (``"a NUL character at index 3"``), or ``None``."""
    bad = _FORBIDDEN.search(value)
    return None if bad is None else f"{_describe(bad.group())} at index {bad.start()}"


def text(
    value: Any,
    what: str,
    *,
    field: str,
    max_length: int | None,
    blank: bool = True,
) -> str:
    """Check a text field: a non-empty string, at most ``max_length`` characters
    (``None``: any length), without control characters or lone surrogates.

    Args:
        value: What the caller gave.
        what: The field as the message names it (``"run id"``, ``"signal name"``).
        field: The argument's name, kept as the error's ``field``.
        max_length: The most characters it may have.
        blank: Whether a value made only of whitespace is taken.

    Raises:
        InvalidInputError: The value is not such a string; ``field`` names it.
    """
    if type(value) is str and (value, max_length, blank) in _CHECKED:
        return value
    if not isinstance(value, str):
        raise InvalidInputError(
            f"{what} must be a string, got {type(value).__name__} {shown(value)}", field=field
        )
    if type(value) is not str:
        # A subclass's methods (its __repr__, __eq__, __hash__) are the caller's:
        # what goes on is the plain string it holds.
        value = str(str.__str__(value))
    if not value:
        raise InvalidInputError(f"{what} must not be empty", field=field)
    if max_length is not None and len(value) > max_length:
        raise InvalidInputError(
            f"{what} {shown(value)} is {len(value)} characters long; "
            f"at most {max_length} are allowed",
            field=field,
        )
    bad = bad_character(value)
    if bad is not None:
        raise InvalidInputError(
            f"{what} {shown(value)} holds {bad}; use printable characters", field=field
        )
    if not blank and _NOT_BLANK.search(value) is None:
        raise InvalidInputError(f"{what} must not be blank, got {shown(value)}", field=field)
    if not blank:  # (names, which repeat; ids rarely do)
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED.add((value, max_length, blank))
    return str(value)  # (the same object: it is a str by now)


# Names found valid, with the limits they were checked against: the same names
# (a workflow's steps, its signals) are checked at every call of every run. The
# check is pure, so a hit is the same answer; bounded, it forgets all at once.
_CHECKED: set[tuple[str, int | None, bool]] = set()
_CHECKED_MAX = 4096


def identifier(value: Any, what: str = "run id", *, field: str = "id") -> str:
    """An id the caller names something new by (a run, an event, a message's
    de-duplication id): at most :data:`MAX_ID_LENGTH` characters."""
    return text(value, what, field=field, max_length=MAX_ID_LENGTH)


def reference(value: Any, what: str = "run id", *, field: str = "run_id") -> str:
    """An id that looks something up. Any length: ids the engine composes
    (``evt:<event id>:<workflow>``, a child's ``<parent>/<position>``) may be
    longer than those a caller gives, and a longer one simply finds nothing."""
    return text(value, what, field=field, max_length=None)


def name(value: Any, what: str = "name", *, field: str = "name") -> str:
    """A workflow, event, signal or message name: not blank, at most
    :data:`MAX_NAME_LENGTH` characters."""
    return text(value, what, field=field, max_length=MAX_NAME_LENGTH, blank=False)


def key(value: Any, what: str = "message key", *, field: str = "key") -> str:
    """A message key: not blank, at most :data:`MAX_KEY_LENGTH` characters."""
    if not isinstance(value, str):
        raise InvalidInputError(
            f"{what} must be a string (a business id such as 'APP-001'), "
            f"got {type(value).__name__} {shown(value)}",
            field=field,
        )
    return text(value, what, field=field, max_length=MAX_KEY_LENGTH, blank=False)


def subject(value: Any, what: str = "subject", *, field: str = "subject") -> str | None:
    """A subject, or ``None``: at most :data:`MAX_SUBJECT_LENGTH` characters."""
    if value is None:
        return None
    return text(value, what, field=field, max_length=MAX_SUBJECT_LENGTH)


def domain(value: Any, what: str = "domain", *, field: str = "domain") -> str | None:
    """A domain, or ``None``: at most :data:`MAX_DOMAIN_LENGTH` characters."""
    if value is None:
        return None
    return text(value, what, field=field, max_length=MAX_DOMAIN_LENGTH)


def optional_identifier(value: Any, what: str, *, field: str) -> str | None:
    """:func:`identifier`, or ``None``."""
    return None if value is None else identifier(value, what, field=field)


def optional_reference(value: Any, what: str, *, field: str) -> str | None:
    """:func:`reference` (a filter, say), or ``None``."""
    return None if value is None else reference(value, what, field=field)


def message_id(value: Any, what: str = "message id", *, field: str = "id") -> int:
    """The id of a buffered message or dead letter: a whole number (not a bool).

    One past :data:`MAX_MESSAGE_ID`, or negative, names no message (the store
    answers "not found"); it is not malformed.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(
            f"{what} must be a whole number, got {type(value).__name__} {shown(value)}",
            field=field,
        )
    return value


def ascii_digits(value: str) -> bool:
    """Whether ``value`` is a number written in ASCII digits only (``str.isdigit``
    also takes ``"٣"`` and ``"²"``)."""
    return _ASCII_DIGITS.fullmatch(value) is not None


def row_limit(value: Any, what: str = "limit", *, field: str = "limit") -> int:
    """How many rows a listing returns: a whole number >= 1 (a larger one than the
    store can count is as good as "all")."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(
            f"{what} must be a whole number >= 1, got {shown(value)}", field=field
        )
    return min(value, MAX_MESSAGE_ID)
