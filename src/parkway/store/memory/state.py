"""The memory store's data: every table as dicts, and the helpers its parts share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from parkway.store.base import (
    EventRecord,
    JournalEntry,
    MessageRecord,
    RunRecord,
    SignalRecord,
    SubscriptionRecord,
    TaskRecord,
    Tx,
    UpdateRecord,
)
from parkway.store.fleet import EventLink, OperatorRecord, WorkerRecord
from parkway.store.people import CallbackRecord, HumanTaskRecord
from parkway.store.records import AttemptRecord, FlowSlot, StreamRecord
from parkway.store.schedules import ScheduleRecord

T = TypeVar("T")


def _copy(record: T) -> T:
    """A shallow copy of a record (a dataclass without slots), much cheaper than replace()."""
    clone = object.__new__(type(record))
    clone.__dict__.update(record.__dict__)
    return clone


class _State:
    def __init__(self) -> None:
        self.runs: dict[str, RunRecord] = {}
        self.journal: dict[str, dict[int, JournalEntry]] = {}
        self.tasks: dict[int, TaskRecord] = {}
        self.run_tasks: dict[str, set[int]] = {}
        self.signals: dict[int, SignalRecord] = {}
        self.run_signals: dict[str, list[int]] = {}
        # (due_at, task id) of every task, deleted ones dropped lazily: claim order.
        self.due_heap: list[tuple[float, int]] = []
        self.next_task = 1
        self.next_signal = 1
        self.events: dict[str, EventRecord] = {}
        self.subs: dict[tuple[str, int], SubscriptionRecord] = {}
        # (domain, name, shape, digest, subject) -> keys of subs: the publish index.
        self.sub_index: dict[tuple[str, str, str, str, str], set[tuple[str, int]]] = {}
        self.shapes: dict[tuple[str, str], set[str]] = {}
        self.run_subs: dict[str, set[int]] = {}
        self.messages: dict[int, MessageRecord] = {}
        self.takeovers = 0  # runs leased from an expired lease (see StoreStats)
        self.next_message = 1
        self.message_ids: dict[str, float] = {}
        self.message_waits: dict[tuple[str, str], tuple[str, int]] = {}
        self.values: dict[str, dict[str, bytes]] = {}
        # A run's streams, by key.
        self.streams: dict[str, dict[str, _Stream]] = {}
        # Failed attempts of steps, by run, then (position, attempt).
        self.attempts: dict[str, dict[tuple[int, int], AttemptRecord]] = {}
        self.updates: dict[tuple[str, str], UpdateRecord] = {}
        self.next_update = 1
        self.schedules: dict[str, ScheduleRecord] = {}
        # Admission: concurrency and rate limits (see admission.py).
        self.flow_slots: dict[tuple[str, str], FlowSlot] = {}
        self.flow_runs: dict[str, _FlowRun] = {}
        # A key's queue: (-priority, seq, run id), entries no longer queued dropped lazily.
        self.flow_queues: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
        self.next_flow = 1
        # A key's runs holding a slot (at most its limit), by id: their seq.
        self.flow_holders: dict[tuple[str, str], dict[str, int]] = {}
        self.rate_marks: dict[tuple[str, str, int], float] = {}
        # Callbacks by the hash of their token, human tasks by id.
        self.callbacks: dict[str, CallbackRecord] = {}
        self.human_tasks: dict[str, HumanTaskRecord] = {}
        # The fleet (see fleet.py, events.py): workers by id, operator entries by run,
        # event links by event.
        self.workers: dict[str, WorkerRecord] = {}
        self.operator_entries: dict[str, list[OperatorRecord]] = {}
        self.event_links: dict[str, list[EventLink]] = {}


@dataclasses.dataclass
class _Stream:
    items: list[StreamRecord] = dataclasses.field(default_factory=list)
    closed: bool = False


@dataclasses.dataclass
class _FlowRun:
    workflow: str
    key: str
    priority: int
    seq: int
    queued: bool


def _internal(workflow: str) -> bool:
    return workflow.startswith("parkway.")


def _restore(book: dict[int, JournalEntry], pos: int, previous: JournalEntry | None) -> Any:
    def undo() -> None:
        if previous is None:
            book.pop(pos, None)
        else:
            book[pos] = previous

    return undo


def claimable(run: RunRecord, kind: str = "") -> bool:
    """Whether a claim (for a task of ``kind``) or a lease may take ``run``: a paused
    run waits for its resume (but for its deadline), a held one for its retry."""
    return run.status != "held" and (not run.paused or kind == "deadline")


class _Part:
    """What every part of a :class:`parkway.store.memory.MemoryTx` holds: the
    transaction (for the parts it composes with), its state and its undo log."""

    def __init__(self, tx: Tx, state: _State, undo: list[Callable[[], object]]) -> None:
        self._tx = tx
        self._s = state
        self._undo = undo
