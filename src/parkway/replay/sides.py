"""What the workflow's code calls on the machine outside of an ``await``: side values
(``ctx.now()``, ``ctx.uuid()``, ``ctx.random()``), callbacks and human tasks opened,
patches, values and streams, update handlers and compensations.

:class:`Sides` is the ``ctx``'s view of one run's machine (the
:class:`~parkway.replay.context.SideValues` it is given): each call journals
its result the first time and finds it again on replay, in the calling branch.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from typing import Any

from parkway import _json
from parkway.replay.sagas import Sagas
from parkway.replay.state import CALLBACK_SIGNAL, TASK_SIGNAL, MachineState
from parkway.replay.updates import Updates
from parkway.store.people import TASK_OPEN, CallbackRecord, HumanTaskRecord, token_digest
from parkway.store.vocabulary import EntryKind, EntryState


class Sides:
    """The journaled values and markers the workflow's code asks of its run."""

    def __init__(self, state: MachineState, updates: Updates, sagas: Sagas) -> None:
        self._st = state
        self.clock_now = state.clock_now
        # (What ctx forwards as it is: bound once, not looked up at each call.)
        self.on_update = updates.on_update
        self.set_value = updates.set_value
        self.write_stream = updates.write_stream
        self.close_stream = updates.close_stream
        self.register_compensation = sagas.register_compensation
        self.run_compensations = sagas.run_compensations

    @property
    def reached(self) -> int:
        """The journal's operations the code has reached so far (this generation)."""
        return self._st.reached

    @property
    def history_threshold(self) -> int:
        """The length past which the run had better continue as new."""
        return self._st.history_threshold

    def side(self, name: str, produce: Callable[[], Any]) -> Any:
        """The journaled value at the next position, produced on first execution."""
        st = self._st
        branch = st.branch_now()
        entry = st.next_entry(branch, EntryKind.VALUE, name)
        if entry is not None:
            st.applied.add(entry.pos)
            return _json.loads(entry.value)
        value = produce()
        st.record_new(branch, EntryKind.VALUE, name, EntryState.DONE, _json.dumps(value))
        return value

    def open_callback(self, timeout: float | None) -> dict[str, Any]:
        """``ctx.callback``: a new token (journaled: the same on every replay) and its
        row, which the commit writes before any step can hand the token out."""
        st = self._st
        branch = st.branch_now()
        entry = st.next_entry(branch, EntryKind.VALUE, "callback")
        if entry is not None:
            st.applied.add(entry.pos)
            found: dict[str, Any] = _json.loads(entry.value)
            return found
        now = st.clock_now()
        # 256 random bits from the operating system: unguessable, so the token
        # alone may complete the callback, with no API token.
        token = secrets.token_urlsafe(32)
        signal = CALLBACK_SIGNAL + secrets.token_hex(8)
        deadline = None if timeout is None else now + timeout
        value = {"token": token, "signal": signal, "deadline": deadline}
        st.record_new(branch, EntryKind.VALUE, "callback", EntryState.DONE, _json.dumps(value))
        st.writes.callbacks.append(CallbackRecord(token_digest(token), st.run.id, signal, now))
        return value

    def open_task(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``ctx.human_task``: a new task (its id journaled) and its row."""
        st = self._st
        branch = st.branch_now()
        entry = st.next_entry(branch, EntryKind.VALUE, "human_task")
        if entry is not None:
            st.applied.add(entry.pos)
            found: dict[str, Any] = _json.loads(entry.value)
            return found
        now = st.clock_now()
        task_id = str(uuid.uuid4())
        signal = TASK_SIGNAL + task_id
        timeout = spec["timeout"]
        deadline = None if timeout is None else now + timeout
        form = spec["form_schema"]
        record = HumanTaskRecord(
            task_id,
            st.run.id,
            st.run.workflow,
            spec["name"],
            spec["title"],
            None if form is None else _json.dumps(form),
            spec["form_model"],
            _json.dumps(spec["data"], "the data of a human task"),
            _json.dumps(list(spec["assignees"])).decode(),
            signal,
            TASK_OPEN,
            now,
            deadline,
        )
        value = {"id": task_id, "name": spec["name"], "signal": signal, "deadline": deadline}
        st.record_new(branch, EntryKind.VALUE, "human_task", EntryState.DONE, _json.dumps(value))
        st.writes.human_tasks.append(record)
        return value

    def patched(self, change_id: str, *, deprecated: bool = False) -> bool:
        """Whether the code after patch ``change_id`` runs (see ``ctx.patched``)."""
        st = self._st
        branch = st.branch_now()
        if branch.index < len(branch.entries):  # replaying: the journal decides
            entry = branch.entries[branch.index]
            if entry.kind == EntryKind.PATCH and entry.name == change_id:
                branch.index += 1
                st.reached += 1
                st.applied.add(entry.pos)
                return True
            return False
        if deprecated:
            return True
        st.record_new(branch, EntryKind.PATCH, change_id, EntryState.DONE, b"true")
        branch.index += 1
        st.reached += 1
        return True
