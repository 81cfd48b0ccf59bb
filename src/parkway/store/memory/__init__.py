"""In-process store: dicts behind the same protocol, for tests and experiments.

Transactions keep an undo log, so a failure inside one leaves nothing behind,
as on the SQL backends. Nothing survives the process.

- :mod:`.state`: the tables, as dicts;
- :mod:`.tx`: :class:`MemoryTx`, a transaction: the state, its undo log and
  one part per entity, each in a module of its own: :mod:`.runs`,
  :mod:`.journal`, :mod:`.tasks` (tasks, signals), :mod:`.events`,
  :mod:`.subscriptions`, :mod:`.messages`, :mod:`.values` (values, updates),
  :mod:`.schedules`, :mod:`.admission`, :mod:`.people` (callbacks, human
  tasks), :mod:`.streams` and :mod:`.fleet` (workers, operators);
- :mod:`.store`: :class:`MemoryStore`, the lock and the claims.
"""

from parkway.store.memory.store import MemoryStore
from parkway.store.memory.tx import MemoryTx

__all__ = ["MemoryStore", "MemoryTx"]
