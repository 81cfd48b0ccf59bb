"""In-process store: dicts behind the same protocol, for tests and experiments.

Transactions keep an undo log, so a failure inside one leaves nothing behind,
as on the SQL backends. Nothing survives the process.

- :mod:`.state`: the tables, as dicts;
- :mod:`.tx`: :class:`MemoryTx`, a transaction's operations, with its parts
  :mod:`.values` (run values, updates), :mod:`.flow` (flow control) and
  :mod:`.schedules`;
- :mod:`.store`: :class:`MemoryStore`, the lock and the claims.
"""

from parkway.store.memory.store import MemoryStore
from parkway.store.memory.tx import MemoryTx

__all__ = ["MemoryStore", "MemoryTx"]
