"""A SQLite transaction: its connection and notes (the transport) and one part per
entity, each a handful of statements in a module of its own.

The operations the protocol composes of others (a signal, a publish's record, a
message's wait taken) come from :mod:`parkway.store.composed`; a start is one
statement of its own (see :mod:`.runs`).
"""

from __future__ import annotations

import sqlite3

from parkway.store.sqlite.admission import SQLiteAdmission
from parkway.store.sqlite.events import SQLiteEvents
from parkway.store.sqlite.fleet import SQLiteOperators, SQLiteWorkers
from parkway.store.sqlite.journal import SQLiteJournal
from parkway.store.sqlite.messages import SQLiteMessages
from parkway.store.sqlite.people import SQLiteCallbacks, SQLiteHumanTasks
from parkway.store.sqlite.runs import SQLiteRuns
from parkway.store.sqlite.schedules import SQLiteSchedules
from parkway.store.sqlite.streams import SQLiteStreams
from parkway.store.sqlite.subscriptions import SQLiteSubscriptions
from parkway.store.sqlite.tasks import SQLiteSignals, SQLiteTasks
from parkway.store.sqlite.transport import Transport
from parkway.store.sqlite.values import SQLiteUpdates, SQLiteValues


class SQLiteTx:
    """The operations of a transaction on the store's connection, by entity.

    Made once per connection: the store begins every transaction on it again
    (:meth:`begin`; its lock lets one run at a time), so no part is made per commit.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        transport = self.transport = Transport(conn)
        self.runs = SQLiteRuns(self, transport)
        self.journal = SQLiteJournal(self, transport)
        self.tasks = SQLiteTasks(self, transport)
        self.signals = SQLiteSignals(self, transport)
        self.events = SQLiteEvents(self, transport)
        self.subscriptions = SQLiteSubscriptions(self, transport)
        self.messages = SQLiteMessages(self, transport)
        self.values = SQLiteValues(self, transport)
        self.updates = SQLiteUpdates(self, transport)
        self.schedules = SQLiteSchedules(self, transport)
        self.admission = SQLiteAdmission(self, transport)
        self.callbacks = SQLiteCallbacks(self, transport)
        self.human_tasks = SQLiteHumanTasks(self, transport)
        self.streams = SQLiteStreams(self, transport)
        self.workers = SQLiteWorkers(self, transport)
        self.operators = SQLiteOperators(self, transport)

    def begin(self) -> None:
        """A transaction starts on the connection (the last one's notes are dropped)."""
        self.transport.begin()
