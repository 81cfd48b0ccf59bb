"""The PostgreSQL transaction: one part per entity over the pipelined transport.

Only the composition lives here: each part is a small class of its own module
(see the package's docstring), given the transaction's
:class:`~parkway.store.postgres.transport.Transport`, which queues, fuses and
commits their statements and carries the transaction over a lost connection
(:class:`~parkway.store.postgres.recovery.Recovery`). What one part leaves for
another (a start that a lease turns into a leased insert, the waits a publish
read ahead) is kept on the transport too, so no part holds another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parkway.store.postgres.admission import PostgresAdmission
from parkway.store.postgres.events import PostgresEvents
from parkway.store.postgres.fleet import PostgresOperators, PostgresWorkers
from parkway.store.postgres.journal import PostgresJournal
from parkway.store.postgres.messages import PostgresMessages
from parkway.store.postgres.people import PostgresCallbacks, PostgresHumanTasks
from parkway.store.postgres.runs import PostgresRuns
from parkway.store.postgres.schedules import PostgresSchedules
from parkway.store.postgres.signals import PostgresSignals
from parkway.store.postgres.streams import PostgresStreams
from parkway.store.postgres.subscriptions import PostgresSubscriptions
from parkway.store.postgres.tasks import PostgresTasks
from parkway.store.postgres.transport import Transport
from parkway.store.postgres.updates import PostgresUpdates, PostgresValues

if TYPE_CHECKING:
    from parkway.store.base import FusedTx


class PostgresTx:
    """An open PostgreSQL transaction (the :class:`~parkway.store.base.FusedTx` protocol).

    A transaction is made per commit, and most use a few of its sixteen parts:
    each part is made on first use (the class defaults below say "not yet"), so
    opening a transaction costs one attribute, not sixteen objects.
    """

    _runs: PostgresRuns | None = None
    _journal: PostgresJournal | None = None
    _tasks: PostgresTasks | None = None
    _signals: PostgresSignals | None = None
    _events: PostgresEvents | None = None
    _subscriptions: PostgresSubscriptions | None = None
    _messages: PostgresMessages | None = None
    _values: PostgresValues | None = None
    _updates: PostgresUpdates | None = None
    _schedules: PostgresSchedules | None = None
    _admission: PostgresAdmission | None = None
    _callbacks: PostgresCallbacks | None = None
    _human_tasks: PostgresHumanTasks | None = None
    _streams: PostgresStreams | None = None
    _workers: PostgresWorkers | None = None
    _operators: PostgresOperators | None = None

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @property
    def runs(self) -> PostgresRuns:
        part = self._runs
        if part is None:
            part = self._runs = PostgresRuns(self._t)
        return part

    @property
    def journal(self) -> PostgresJournal:
        part = self._journal
        if part is None:
            part = self._journal = PostgresJournal(self._t)
        return part

    @property
    def tasks(self) -> PostgresTasks:
        part = self._tasks
        if part is None:
            part = self._tasks = PostgresTasks(self._t)
        return part

    @property
    def signals(self) -> PostgresSignals:
        part = self._signals
        if part is None:
            part = self._signals = PostgresSignals(self._t)
        return part

    @property
    def events(self) -> PostgresEvents:
        part = self._events
        if part is None:
            part = self._events = PostgresEvents(self._t)
        return part

    @property
    def subscriptions(self) -> PostgresSubscriptions:
        part = self._subscriptions
        if part is None:
            part = self._subscriptions = PostgresSubscriptions(self._t)
        return part

    @property
    def messages(self) -> PostgresMessages:
        part = self._messages
        if part is None:
            part = self._messages = PostgresMessages(self._t)
        return part

    @property
    def values(self) -> PostgresValues:
        part = self._values
        if part is None:
            part = self._values = PostgresValues(self._t)
        return part

    @property
    def updates(self) -> PostgresUpdates:
        part = self._updates
        if part is None:
            part = self._updates = PostgresUpdates(self._t)
        return part

    @property
    def schedules(self) -> PostgresSchedules:
        part = self._schedules
        if part is None:
            part = self._schedules = PostgresSchedules(self._t)
        return part

    @property
    def admission(self) -> PostgresAdmission:
        part = self._admission
        if part is None:
            part = self._admission = PostgresAdmission(self._t)
        return part

    @property
    def callbacks(self) -> PostgresCallbacks:
        part = self._callbacks
        if part is None:
            part = self._callbacks = PostgresCallbacks(self._t)
        return part

    @property
    def human_tasks(self) -> PostgresHumanTasks:
        part = self._human_tasks
        if part is None:
            part = self._human_tasks = PostgresHumanTasks(self._t)
        return part

    @property
    def streams(self) -> PostgresStreams:
        part = self._streams
        if part is None:
            part = self._streams = PostgresStreams(self._t)
        return part

    @property
    def workers(self) -> PostgresWorkers:
        part = self._workers
        if part is None:
            part = self._workers = PostgresWorkers(self._t)
        return part

    @property
    def operators(self) -> PostgresOperators:
        part = self._operators
        if part is None:
            part = self._operators = PostgresOperators(self._t)
        return part


if TYPE_CHECKING:

    def _fused(tx: PostgresTx) -> FusedTx:
        """(For the type checker: the parts satisfy their protocols.)"""
        return tx
