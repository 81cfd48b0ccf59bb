"""A transaction of the memory store: its state, its undo log, and one part per entity."""

from __future__ import annotations

from collections.abc import Callable

from parkway.store.memory.admission import MemoryAdmission
from parkway.store.memory.events import MemoryEvents
from parkway.store.memory.fleet import MemoryOperators, MemoryWorkers
from parkway.store.memory.journal import MemoryJournal
from parkway.store.memory.messages import MemoryMessages
from parkway.store.memory.people import MemoryCallbacks, MemoryHumanTasks
from parkway.store.memory.runs import MemoryRuns
from parkway.store.memory.schedules import MemorySchedules
from parkway.store.memory.state import _State
from parkway.store.memory.streams import MemoryStreams
from parkway.store.memory.subscriptions import MemorySubscriptions
from parkway.store.memory.tasks import MemorySignals, MemoryTasks
from parkway.store.memory.values import MemoryUpdates, MemoryValues


class MemoryTx:
    """A transaction over :class:`_State` with an undo log (the parts' transport).

    The store makes one and begins every transaction on it again (its lock lets one
    run at a time): the parts are made once, not at every commit.
    """

    def __init__(self, state: _State) -> None:
        self._s = state
        self._undo: list[Callable[[], object]] = []
        undo = self._undo
        self.runs = MemoryRuns(self, state, undo)
        self.journal = MemoryJournal(self, state, undo)
        self.tasks = MemoryTasks(self, state, undo)
        self.signals = MemorySignals(self, state, undo)
        self.events = MemoryEvents(self, state, undo)
        self.subscriptions = MemorySubscriptions(self, state, undo)
        self.messages = MemoryMessages(self, state, undo)
        self.values = MemoryValues(self, state, undo)
        self.updates = MemoryUpdates(self, state, undo)
        self.schedules = MemorySchedules(self, state, undo)
        self.admission = MemoryAdmission(self, state, undo)
        self.callbacks = MemoryCallbacks(self, state, undo)
        self.human_tasks = MemoryHumanTasks(self, state, undo)
        self.streams = MemoryStreams(self, state, undo)
        self.workers = MemoryWorkers(self, state, undo)
        self.operators = MemoryOperators(self, state, undo)

    def begin(self) -> None:
        """Start a transaction: the previous one's undo log is dropped."""
        self._undo.clear()

    def rollback(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
