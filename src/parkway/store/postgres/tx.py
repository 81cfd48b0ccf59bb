"""The PostgreSQL transaction: the entity operations over the pipelined transport.

Only the composition lives here: each part is a module of its own (see the
package's docstring), so that this class, which the store hands out, is the one
place that says which parts a transaction has.
"""

from __future__ import annotations

from parkway.store.postgres.events import EventOps
from parkway.store.postgres.fleet import FleetOps
from parkway.store.postgres.flow import FlowOps
from parkway.store.postgres.journal import JournalOps
from parkway.store.postgres.messages import MessageOps
from parkway.store.postgres.people import PeopleOps
from parkway.store.postgres.schedules import ScheduleOps
from parkway.store.postgres.streams import StreamOps
from parkway.store.postgres.updates import UpdateOps


class PostgresTx(
    FlowOps,
    EventOps,
    MessageOps,
    UpdateOps,
    StreamOps,
    ScheduleOps,
    PeopleOps,
    FleetOps,
    JournalOps,
):
    """Primitive operations on an open PostgreSQL transaction (the ``Tx`` protocol).

    Runs and leases (:class:`~parkway.store.postgres.runs.RunOps`); journal,
    tasks and mailbox (:class:`~parkway.store.postgres.journal.JournalOps`);
    events and subscriptions (:class:`~parkway.store.postgres.events.EventOps`);
    messages (:class:`~parkway.store.postgres.messages.MessageOps`); values and
    updates (:class:`~parkway.store.postgres.updates.UpdateOps`); schedules
    (:class:`~parkway.store.postgres.schedules.ScheduleOps`); flow control
    (:class:`~parkway.store.postgres.flow.FlowOps`); callbacks and human tasks
    (:class:`~parkway.store.postgres.people.PeopleOps`); all over
    :class:`~parkway.store.postgres.transport.Transport`, which queues, fuses and
    commits their statements, and
    :class:`~parkway.store.postgres.recovery.Recovery`, which carries the
    transaction over a lost connection.
    """
