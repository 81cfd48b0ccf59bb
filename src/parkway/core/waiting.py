"""What a run waits for now (``RunInfo.waiting``), read from its journal's pending entries.

Each kind of wait is one entry of :data:`WAITS`: a function from a pending journal
entry (and what its value holds) to the dicts it stands for. A new kind of wait is
one function added there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from parkway import _json
from parkway.models import ErrorInfo, _dt
from parkway.replay.state import wait_named
from parkway.store.base import JournalEntry
from parkway.store.vocabulary import EntryKind, EntryState

Wait = dict[str, Any]


def _at(deadline: float | None) -> datetime | None:
    # (Clamped to what a datetime can show: a deadline may lie past year 9999.)
    return None if deadline is None else _dt(deadline)


def _signal(name: str, info: dict[str, Any], deadline: float | None) -> list[Wait]:
    # (A callback's or a human task's wait is a signal of a name of its own.)
    kind, shown = wait_named(EntryKind.SIGNAL, name)
    return [{"kind": kind, "name": shown, "at": _at(deadline)}]


def _event(name: str, info: dict[str, Any], deadline: float | None) -> list[Wait]:
    subject = info.get("subject")
    return [
        {
            "kind": "event",
            "name": name,
            "subject": None if subject == "*" else subject,
            "match": info.get("match"),
            "at": _at(deadline),
        }
    ]


def _message(name: str, info: dict[str, Any], deadline: float | None) -> list[Wait]:
    return [{"kind": "message", "name": name, "key": info.get("key"), "at": _at(deadline)}]


def _timer(name: str, info: dict[str, Any], deadline: float | None) -> list[Wait]:
    return [{"kind": "timer", "name": name, "at": _at(deadline)}]


def _retry(name: str, info: dict[str, Any], deadline: float | None) -> list[Wait]:
    if "error" not in info:  # (an attempt under way, not a wait: its heartbeat)
        return []
    return [
        {
            "kind": "retry",
            "name": name,
            "attempt": info["attempt"] + 1,
            "max_attempts": info.get("max_attempts"),
            "at": _at(deadline),
            "error": ErrorInfo.from_dict(info["error"]).to_dict(),  # type: ignore[union-attr]
        }
    ]


def _first(name: str, info: dict[str, Any], deadline: float | None) -> list[Wait]:
    """``ctx.first``: each of its waits (named by the wait itself, not the member)."""
    out: list[Wait] = []
    for member in info.get("members", ()):
        kind = member.get("kind")
        own = {
            "signal": member.get("signal"),
            "event": member.get("event"),
            "message": member.get("message"),
            "sleep": member.get("name"),
        }.get(kind)
        waits = WAITS.get(kind) if kind != EntryKind.FIRST else None
        if waits is not None and own is not None:
            out.extend(waits(own, member, member.get("deadline")))
    return out


# The journal kind of a pending entry -> the waits it stands for.
WAITS: dict[str, Callable[[str, dict[str, Any], float | None], list[Wait]]] = {
    EntryKind.SIGNAL: _signal,
    EntryKind.EVENT: _event,
    EntryKind.MESSAGE: _message,
    EntryKind.SLEEP: _timer,
    EntryKind.STEP: _retry,
    EntryKind.COMPENSATION: _retry,
    EntryKind.FIRST: _first,
}


def waiting(entries: Iterable[JournalEntry]) -> list[Wait]:
    """The waits of a run whose journal holds ``entries``, in journal order."""
    out: list[Wait] = []
    for entry in entries:
        if entry.state != EntryState.PENDING:
            continue
        waits = WAITS.get(entry.kind)
        if waits is not None:
            info = _json.loads(entry.value) if entry.value is not None else None
            out.extend(waits(entry.name, info if isinstance(info, dict) else {}, entry.deadline))
    return out
