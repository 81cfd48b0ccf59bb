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


class Updates(MachineState):
    """``ctx.on_update``, the updates sent to the run, and ``ctx.set_value``."""

    _handlers: dict[str, Handler]
    _updates: list[UpdateRecord]
    _handled: set[str]
    _closed_streams: set[str]

    # -- what the workflow's code calls ------------------------------------------------------

    def on_update(
        self, name: str, handler: Callable[..., Any], validate: Callable[[Any], Any] | None
    ) -> None:
        self._handlers[name] = (handler, validate)

    def set_value(self, key: str, data: bytes) -> None:
        branch = self._branch_now()
        entry = self._next_entry(branch, "value.set", key)
        if entry is not None:
            self._applied.add(entry.pos)
            return
        self._record_new(branch, EntryKind.VALUE_SET, key, EntryState.DONE, data)
        self.writes.values[key] = data

    def write_stream(self, key: str, data: bytes) -> None:
        if key in self._closed_streams:
            raise InvalidArgumentError(
                f"stream {key!r} of run {self.run.id!r} is closed: nothing more can be "
                "written to it",
                field="key",
            )
        branch = self._branch_now()
        entry = self._next_entry(branch, "stream.write", key)
        if entry is not None:
            self._applied.add(entry.pos)
            return
        self._record_new(branch, EntryKind.STREAM_WRITE, key, EntryState.DONE, None)
        self.writes.streams.append((key, data))

    def close_stream(self, key: str) -> None:
        if key in self._closed_streams:
            return  # (closing twice journals nothing more)
        self._closed_streams.add(key)
        branch = self._branch_now()
        entry = self._next_entry(branch, "stream.close", key)
        if entry is not None:
            self._applied.add(entry.pos)
            return
        self._record_new(branch, EntryKind.STREAM_CLOSE, key, EntryState.DONE, None)
        self.writes.streams.append((key, None))

    # -- handling the updates sent -----------------------------------------------------------

    def _handle_updates(self) -> bool:
        """Validate and apply the updates not handled yet (the run is quiet); whether
        a handler ran (the run's state may have changed)."""
        ran = False
        while self._updates:
            update = self._updates.pop(0)
            if update.id in self._handled:
                continue
            self._handled.add(update.id)
            found = self._handlers.get(update.name)
            if found is None:
                known = ", ".join(sorted(self._handlers)) or "none"
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
            self.reached += 1
            entry = self._record_new(
                self._updates_line, EntryKind.UPDATE, update.name, EntryState.DONE,
                _json.dumps(value),
            )  # fmt: skip
            self._run_handler(entry, update.id, handler, payload)
            ran = True
        return ran

    def _replay_update(self, entry: JournalEntry) -> None:
        """The journal's next entry is an accepted update: run its handler again."""
        value = _json.loads(entry.value)
        self._handled.add(value["id"])
        self.reached += 1
        found = self._handlers.get(entry.name)
        if found is None:
            self._hold(
                NonDeterminismError(
                    self.run.id, entry.pos, f"update {entry.name!r}",
                    "no handler of that name registered at that point",
                )
            )  # fmt: skip
            return
        self._run_handler(entry, value["id"], found[0], value["payload"])

    def _run_handler(
        self, entry: JournalEntry, update_id: str, handler: Callable[..., Any], payload: Any
    ) -> None:
        path = f"u{entry.pos}"
        branch = Branch(path, None, self._by_branch.get(path, []))  # type: ignore[arg-type]
        branch.update_id = update_id
        branch.update_name = entry.name
        try:
            result = handler(payload)
        except Exception as exc:
            self._update_ended(branch, None, exc)
            return
        if inspect.iscoroutine(result):
            branch.coro = result
            self._ready.append((branch, None, None))
        else:
            self._update_ended(branch, result, None)

    def _update_ended(self, branch: Branch, value: Any, error: BaseException | None) -> None:
        """An update's handler returned ``value`` or raised ``error``: journal it once."""
        branch.done = True
        name = branch.update_name or ""
        self.reached += 1
        if branch.index < len(branch.entries):
            done = branch.entries[branch.index]
            if done.kind == EntryKind.UPDATE_DONE and done.name == name:
                self._applied.add(done.pos)  # (answered already: replay writes nothing)
                return
            self._hold(
                NonDeterminismError(
                    self.run.id, done.pos, f"{done.kind} {done.name!r}", "the update returning"
                )
            )  # fmt: skip
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
        self._record_new(branch, EntryKind.UPDATE_DONE, name, state, data)
        assert branch.update_id is not None
        self.writes.updates.append((branch.update_id, status, data))

    def _reject(self, update: UpdateRecord, reason: str) -> None:
        self.writes.updates.append((update.id, UpdateStatus.REJECTED, _json.dumps(reason)))

    @property
    def _updates_line(self) -> Branch:
        return Branch(UPDATES, None, [])  # type: ignore[arg-type]

    def _hold(self, exc: NonDeterminismError) -> None:
        raise NotImplementedError


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
