"""The closed sets of words the store's records carry: task kinds, journal entry
kinds and states, how an advance ended, and what a store can do.

Each is a ``StrEnum``: a member compares equal to (and hashes as) its string, so
the values a store keeps and the SQL that reads them are the strings they always
were, and a record read back from a store (whose fields hold plain strings)
still matches a member. What the enums add is one spelling, checked by mypy,
instead of a literal typed again at every use.
"""

from __future__ import annotations

import enum


class TaskKind(enum.StrEnum):
    """What a task wakes its run for (``TaskRecord.kind``, ``NewTask.kind``)."""

    START = "start"
    TIMER = "timer"
    SIGNAL = "signal"
    # A message for the run waiting for it: its own kind, so that one the run can no
    # longer take (its wait timed out, it ended) is buffered again, not dropped.
    MESSAGE = "message"
    DELIVERY = "delivery"
    CHILD = "child"
    WAKE = "wake"
    UPDATE = "update"
    DEADLINE = "deadline"
    CANCEL = "cancel"


class WaitKind(enum.StrEnum):
    """What a parked wait waits for (``SubscriptionRecord.kind``)."""

    EVENT = "event"
    MESSAGE = "message"
    # A ``cancel_on`` condition: an event that cancels the run.
    CANCEL = "cancel"


class EntryKind(enum.StrEnum):
    """The operation a journal entry records (``JournalEntry.kind``)."""

    STEP = "step"
    COMPENSATION = "compensation"
    COMPENSATION_REGISTERED = "compensation.registered"
    SLEEP = "sleep"
    SIGNAL = "signal"
    EVENT = "event"
    MESSAGE = "message"
    PUBLISH = "publish"
    CHILD_START = "child.start"
    RUN_START = "run.start"
    CHILD_RESULT = "child.result"
    GATHER = "gather"
    FIRST = "first"
    WAIT_UNTIL = "wait_until"
    VALUE = "value"
    PATCH = "patch"
    UPDATE = "update"
    UPDATE_DONE = "update.done"
    VALUE_SET = "value.set"
    STREAM_WRITE = "stream.write"
    STREAM_CLOSE = "stream.close"
    # A run's deadline (its timeout), journaled first so it holds across replays.
    DEADLINE = "deadline"
    # How a stopped run (cancelled, or past its deadline) ended its compensations.
    STOP = "stop"


class EntryState(enum.StrEnum):
    """Where a journal entry's operation is (``JournalEntry.state``)."""

    PENDING = "pending"
    DONE = "done"
    ERROR = "error"
    # A wait that lost (``ctx.first``, a failed gather): never answered.
    WITHDRAWN = "withdrawn"


class UpdateStatus(enum.StrEnum):
    """What became of an update (``UpdateRecord.status``)."""

    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"
    REJECTED = "rejected"
    # The run ended before handling it.
    CLOSED = "closed"


class Ending(enum.StrEnum):
    """How an advance ended that is no run status
    (``parkway.replay.writes.Outcome.status`` is a ``RunStatus`` or one of these)."""

    # ``continue_as_new``: the run goes on as a new generation, with a new input.
    CONTINUED = "continued"


class Capability(enum.StrEnum):
    """What a backend can do beyond the protocol (``Store.capabilities``)."""

    PERSISTENT = "persistent"
    SHARED = "shared"
    PUSH = "push"
    REPORTS_OWN = "reports_own"
    CHEAP_CLAIM = "cheap_claim"
    GROUP_COMMIT = "group_commit"
    FUSED = "fused"
    LOOP_BOUND = "loop_bound"
