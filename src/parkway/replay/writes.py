"""What an advance decides, as data: the writes to commit and how it ended.

Replay does no I/O. What a run's code decided (journal entries, timers,
children, subscriptions, publishes, consumed signals) accumulates here, and
the worker commits it (:mod:`parkway.worker.commit`) in one transaction,
fenced by the run's lease.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from parkway.events import Event
from parkway.models import RunStatus
from parkway.store.base import (
    AttemptRecord,
    JournalEntry,
    NewTask,
    RunRecord,
    SubscriptionRecord,
)
from parkway.store.people import CallbackRecord, HumanTaskRecord
from parkway.store.vocabulary import Ending, EntryKind, EntryState


@dataclass
class Outcome:
    """How an advance ended.

    ``status``: ``completed``/``failed``/``cancelled`` end the run;
    ``parked``/``running`` leave it waiting (on an input, or on a retry's
    backoff); ``held``: its code no longer replays its journal; ``continued``:
    ``continue_as_new``, with ``new_input``.
    """

    status: RunStatus | Ending
    output: bytes | None = None
    error: dict[str, Any] | None = None
    new_input: bytes | None = None


@dataclass
class EventWait:
    """An event wait to register at commit, with the ``since_start`` look-back if asked:
    events since ``since`` not in ``consumed`` are looked at first (see
    :func:`parkway.core.publishing.register_wait`)."""

    sub: SubscriptionRecord
    since: float | None = None
    consumed: frozenset[str] = frozenset()


@dataclass
class MessageWait:
    """A message wait to register at commit, consuming a buffered message first (see
    :func:`parkway.core.messages.register_wait`)."""

    sub: SubscriptionRecord


# Waits whose input a replay finds again the same (see Writes.may_wait_for_commit).
REPLAYABLE_WAITS = frozenset({EntryKind.SIGNAL, EntryKind.EVENT, EntryKind.MESSAGE})


@dataclass
class Writes:
    """Buffered changes of one run, committed in one transaction."""

    run_id: str
    journal: dict[int, JournalEntry] = field(default_factory=dict)
    tasks: list[NewTask] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    consumed_signals: list[int] = field(default_factory=list)
    finished_waits: list[int] = field(default_factory=list)
    subscriptions: list[EventWait | MessageWait] = field(default_factory=list)
    # Delivery tasks the run consumed: never buffered again.
    consumed_tasks: set[int] = field(default_factory=set)
    # Tasks the current advance claimed: deleted by its final commit only.
    claimed_tasks: frozenset[int] = frozenset()
    # Waits that took a delivery in the current advance.
    delivered: set[int] = field(default_factory=set)
    # ctx.publish: (position, the event as prepared, its encoded payload, the
    # branch); the commit publishes it and journals the result at that position.
    publishes: list[tuple[int, Event, bytes, str | None]] = field(default_factory=list)
    # ctx.set_value: the run's values to set, by key.
    values: dict[str, bytes] = field(default_factory=dict)
    # Updates handled: (update id, status, result or reason), see UpdateRecord.
    updates: list[tuple[str, str, bytes | None]] = field(default_factory=list)
    # ctx.callback and ctx.human_task: the callbacks and tasks they made, and the
    # tasks their waits ended otherwise than by a completion: (id, status).
    callbacks: list[CallbackRecord] = field(default_factory=list)
    human_tasks: list[HumanTaskRecord] = field(default_factory=list)
    ended_tasks: list[tuple[str, str]] = field(default_factory=list)
    # ctx.write_stream and ctx.close_stream, in the order called: (key, the item),
    # or (key, None) for a close.
    streams: list[tuple[str, bytes | None]] = field(default_factory=list)
    # Failed attempts of steps, kept for the history.
    attempts: list[AttemptRecord] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.journal
            or self.tasks
            or self.runs
            or self.consumed_signals
            or self.finished_waits
            or self.subscriptions
            or self.publishes
            or self.values
            or self.updates
            or self.callbacks
            or self.human_tasks
            or self.ended_tasks
            or self.streams
            or self.attempts
        )

    @property
    def tells_callers(self) -> bool:
        """Whether callers may be waiting on something these writes set (a value,
        an update's result, a stream's item)."""
        return bool(self.values or self.updates or self.streams)

    @property
    def may_wait_for_commit(self) -> bool:
        """Whether a step's side effect may run before these writes are committed.

        Only if they record nothing a replay could not find again the same: waits
        that took a signal, an event or a message (with what goes with them:
        status, deleted timers, consumed signals). Their input stays in the store
        until the commit that consumes it, and a replay after a crash takes the same
        one again (a name's oldest signal; a wait's one delivery, the subscription
        having gone with it). So the step after a wait needs no commit of its own
        before it runs: the wait's result commits with the step's. A step result, a
        side value (``ctx.now``), a child, a publish or a timer must be durable
        first: a replay could come out otherwise, and the step's side effect would
        follow a history that never was.
        """
        if self.values or self.updates or self.callbacks or self.human_tasks or self.streams:
            return False  # a caller may act on them: durable before a side effect
        return not (self.tasks or self.runs or self.subscriptions or self.publishes) and all(
            entry.kind in REPLAYABLE_WAITS and entry.state == EntryState.DONE
            for entry in self.journal.values()
        )
