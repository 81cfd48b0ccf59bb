"""The cyclic garbage collector's thresholds while a worker runs in the process.

CPython collects its youngest generation after every 700 net allocations of
container objects, and promotes what survives two collections to the oldest
generation; past a quarter of that generation's size in promotions, it collects
the oldest too, which scans every container of the process: a pause that grows
with the heap. A busy worker allocates at a rate that makes objects living a
fraction of a second (a parked run's replay machine in the cache, a run's
futures and tasks, the client's handles) survive two young collections: they
are promoted, counted, and then die by reference count, having triggered full
collections over and over under a steady load. Each is a pause of the event
loop, and under load the tail latency of every resume.

With the youngest generation collected after 10,000 net allocations instead,
those objects die before a collection sees them, so full collections stop and
the young ones stay short (the figures: docs/performance.md). What it costs is
memory for at most 10,000 cyclic garbage objects between collections.

The thresholds are the process's, not the engine's: a worker sets them when it
starts only if they are still CPython's defaults (an application that tuned
them keeps its own), unless ``tune_gc`` says otherwise, and the last worker
to stop puts back what it found.
"""

from __future__ import annotations

import gc
import threading

# CPython's defaults, and the worker's.
DEFAULT = (700, 10, 10)
TUNED = (10_000, 10, 10)

_holders = 0
_previous: tuple[int, int, int] | None = None
_lock = threading.Lock()  # (engines of several loops, in several threads, share the process)


def hold(option: bool | None) -> bool:
    """A worker starts: tune the thresholds as ``option`` asks (``None``: only if they
    are CPython's defaults; ``True``: always; ``False``: never). Returns whether this
    worker holds the tuning (then it calls :func:`release` when it stops)."""
    global _holders, _previous
    if option is False:
        return False
    with _lock:
        if _holders == 0:
            current = gc.get_threshold()
            if option is None and current != DEFAULT:
                return False
            _previous = current
            gc.set_threshold(*TUNED)
        _holders += 1
    return True


def release() -> None:
    """A worker that held the tuning stops: the last one puts back the thresholds it
    found (unless someone changed them since)."""
    global _holders, _previous
    with _lock:
        _holders -= 1
        if _holders == 0 and _previous is not None:
            if gc.get_threshold() == TUNED:
                gc.set_threshold(*_previous)
            _previous = None
