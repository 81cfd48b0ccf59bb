"""Updates and values in the replay machine: what callers ask of a run, and read of it.

``ctx.on_update(name, handler, validate=...)`` registers a handler in the
workflow's own code (so replay registers it again). An update (``engine.update``)
is handled when the run is quiet, every branch waiting on an input: its
validator runs first, against the run's state as it is then; a rejection
journals nothing. An accepted update is journaled (kind ``update``, at the next
position: the order it was applied in), and its handler runs as a branch of
its own (``u<pos>``), which may await ctx operations; its end is journaled
(``update.done``), and what it returned is the caller's answer. Replay applies
the ``update`` entry where it stands in the journal's order, so the handler
sees the state it saw the first time.

``ctx.set_value(key, value)`` is journaled (kind ``value.set``) and written with
the commit that journals it; replay does not write it again. So are
``ctx.write_stream(key, value)`` (kind ``stream.write``: the item is appended in
the commit that journals it, so exactly once, whatever crashes) and
``ctx.close_stream(key)`` (``stream.close``); replay closes the key again in the
machine, so a write after the close is refused the same way every time.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from parkway import _json, limits
from parkway.errors import (
    InvalidArgumentError,
    InvalidInputError,
    NonDeterminismError,
    SerializationError,
    shown,
)
from parkway.models import error_dict
from parkway.replay.branch import Branch
from parkway.replay.state import MachineState
from parkway.store.base import JournalEntry, UpdateRecord
from parkway.store.vocabulary import EntryKind, EntryState, UpdateStatus

Handler = tuple[Callable[..., Any], Callable[[Any], Any] | None]

# The journal "branch" of the updates applied: not a line of code, the order they
# were applied in among the run's operations.
UPDATES = "!updates"


class Updates:
    """``ctx.on_update``, the updates sent to the run, and ``ctx.set_value``, over
    the machine's state."""

    def __init__(self, state: MachineState, updates: list[UpdateRecord] | None) -> None:
        self._st = state
        self.handlers: dict[str, Handler] = {}
        self.pending: list[UpdateRecord] = list(updates or [])
        self.handled: set[str] = set()
        self.closed_streams: set[str] = set()

    def given(self, updates: list[UpdateRecord] | None) -> None:
        """The updates sent since the run parked (a kept machine woken)."""
        self.pending = list(updates or [])

    @property
    def unhandled(self) -> bool:
        """Whether updates were given that the run did not get to (it ended, or went
        on as new, before it was quiet)."""
        return any(u.id not in self.handled for u in self.pending)

    # -- what the workflow's code calls ------------------------------------------------------

    def on_update(
        self, name: str, handler: Callable[..., Any], validate: Callable[[Any], Any] | None
    ) -> None:
        """Register the run's handler of updates ``name`` (see ``ctx.on_update``)."""
        self.handlers[name] = (handler, validate)

    def set_value(self, key: str, data: bytes) -> None:
        """Journal and set the run's value ``key`` (see ``ctx.set_value``)."""
        st = self._st
        branch = st.branch_now()
        entry = st.next_entry(branch, EntryKind.VALUE_SET, key)
        if entry is not None:
            st.applied.add(entry.pos)
            return
        st.record_new(branch, EntryKind.VALUE_SET, key, EntryState.DONE, data)
        st.writes.values[key] = data

    def write_stream(self, key: str, data: bytes) -> None:
        """Journal and append an item to the run's stream ``key``."""
        st = self._st
        if key in self.closed_streams:
            raise InvalidArgumentError(
                f"stream {key!r} of run {st.run.id!r} is closed: nothing more can be written to it",
                field="key",
            )
        branch = st.branch_now()
        entry = st.next_entry(branch, EntryKind.STREAM_WRITE, key)
        if entry is not None:
            st.applied.add(entry.pos)
            return
        st.record_new(branch, EntryKind.STREAM_WRITE, key, EntryState.DONE, None)
        st.writes.streams.append((key, data))

    def close_stream(self, key: str) -> None:
        """Journal the close of the run's stream ``key``."""
        if key in self.closed_streams:
            return  # (closing twice journals nothing more)
        self.closed_streams.add(key)
        st = self._st
        branch = st.branch_now()
        entry = st.next_entry(branch, EntryKind.STREAM_CLOSE, key)
        if entry is not None:
            st.applied.add(entry.pos)
            return
        st.record_new(branch, EntryKind.STREAM_CLOSE, key, EntryState.DONE, None)
        st.writes.streams.append((key, None))

    # -- handling the updates sent -----------------------------------------------------------

    def handle(self) -> bool:
        """Validate and apply the updates not handled yet (the run is quiet); whether
        a handler ran (the run's state may have changed)."""
        st = self._st
        ran = False
        while self.pending:
            update = self.pending.pop(0)
            if update.id in self.handled:
                continue
            self.handled.add(update.id)
            found = self.handlers.get(update.name)
            if found is None:
                known = ", ".join(sorted(self.handlers)) or "none"
                self._reject(update, f"the run has no update handler {update.name!r} ({known})")
                continue
            handler, validate = found
            payload = _json.loads(update.payload)
            if validate is not None:
                try:
                    validate(payload)
                except Exception as exc:
                    self._reject(update, str(exc) or type(exc).__name__)
                    continue
            value = {"id": update.id, "payload": payload}
            st.reached += 1
            line = Branch(UPDATES, None, [])  # type: ignore[arg-type]
            entry = st.record_new(
                line, EntryKind.UPDATE, update.name, EntryState.DONE, _json.dumps(value)
            )
            self._run_handler(entry, update.id, handler, payload)
            ran = True
        return ran

    def replay(self, entry: JournalEntry) -> None:
        """The journal's next entry is an accepted update: run its handler again."""
        st = self._st
        value = _json.loads(entry.value)
        self.handled.add(value["id"])
        st.reached += 1
        found = self.handlers.get(entry.name)
        if found is None:
            st.hold(
                NonDeterminismError(
                    st.run.id,
                    entry.pos,
                    f"update {entry.name!r}",
                    "no handler of that name registered at that point",
                )
            )
            return
        self._run_handler(entry, value["id"], found[0], value["payload"])

    def _run_handler(
        self, entry: JournalEntry, update_id: str, handler: Callable[..., Any], payload: Any
    ) -> None:
        path = f"u{entry.pos}"
        branch = Branch(path, None, self._st.by_branch.get(path, []))  # type: ignore[arg-type]
        branch.update_id = update_id
        branch.update_name = entry.name
        try:
            result = handler(payload)
        except Exception as exc:
            self.ended(branch, None, exc)
            return
        if inspect.iscoroutine(result):
            branch.coro = result
            self._st.ready.append((branch, None, None))
        else:
            self.ended(branch, result, None)

    def ended(self, branch: Branch, value: Any, error: BaseException | None) -> None:
        """An update's handler returned ``value`` or raised ``error``: journal it once."""
        st = self._st
        branch.done = True
        name = branch.update_name or ""
        st.reached += 1
        if branch.index < len(branch.entries):
            done = branch.entries[branch.index]
            if done.kind == EntryKind.UPDATE_DONE and done.name == name:
                st.applied.add(done.pos)  # (answered already: replay writes nothing)
                return
            st.hold(
                NonDeterminismError(
                    st.run.id, done.pos, f"{done.kind} {done.name!r}", "the update returning"
                )
            )
            return
        status, state = UpdateStatus.DONE, EntryState.DONE
        if error is None:
            try:
                data = _json.dumps(value, f"the result of update {name!r}")
            except SerializationError as exc:
                error = exc
        if error is not None:
            status, state, data = (
                UpdateStatus.FAILED,
                EntryState.ERROR,
                _json.dumps(error_dict(error)),
            )
        st.record_new(branch, EntryKind.UPDATE_DONE, name, state, data)
        assert branch.update_id is not None
        st.writes.updates.append((branch.update_id, status, data))

    def _reject(self, update: UpdateRecord, reason: str) -> None:
        self._st.writes.updates.append((update.id, UpdateStatus.REJECTED, _json.dumps(reason)))


def check_handler(name: Any, handler: Any, validate: Any) -> str:
    """Validate ``ctx.on_update``'s arguments at the edge; the name, as a plain string."""
    try:
        checked = limits.name(name, "update name")
    except InvalidInputError as exc:
        raise InvalidArgumentError(str(exc).removeprefix("invalid input: "), field="name") from None
    if not callable(handler):
        raise InvalidArgumentError(
            f"ctx.on_update({shown(checked)}) needs a handler function, got {shown(handler)}",
            field="handler",
        )
    if validate is not None and not callable(validate):
        raise InvalidArgumentError(
            f"ctx.on_update({shown(checked)}, validate=...) must be a function or None, "
            f"got {shown(validate)}",
            field="validate",
        )
    return checked
