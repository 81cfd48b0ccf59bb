"""The worker's cache of parked runs: their replay machines, kept to be woken.

A run that parks leaves its machine here (its coroutines suspended at their
waits), so that its next advance continues where it parked instead of
replaying its whole journal: a resume then costs the same at any journal
length. The store is still the only truth. A run's row records which worker's
advance parked it last (``advanced_by``); a claim by that worker skips reading
the journal, and any other worker's advance overwrites the mark, so a cached
machine is used only while no one else has advanced its run since. Anything
unexpected (a miss, another generation, a failed commit) replays from the
journal, as without a cache.

Bounded by count, least recently parked evicted first; an evicted machine's
coroutines are closed, and the worker's next commit clears the evicted runs'
marks (``tx.runs.drop_cache_marks``). Without that, a run evicted and then woken
would come with its lease but without its journal (the mark says this worker
holds it), and its advance would read the journal in a round trip of its own:
on PostgreSQL, one round trip in three of a resume with more runs parked than
the cache holds. Not on a store whose statements run on the loop's thread
(SQLite): there the read costs no round trip, and a journal read with the claim
would hold the write lock that the separate read does not.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from parkway.registry import WorkflowDef
from parkway.replay.machine import Machine
from parkway.store.base import LoadedRun

# Runs a worker keeps by default. A parked machine of a typical workflow holds a
# few kilobytes (its coroutine frames and its journal's entries): see
# docs/performance.md for the figures.
DEFAULT_CACHED_RUNS = 1000


@dataclass(frozen=True)
class Cached:
    """A parked run's machine, and the workflow it runs."""

    machine: Machine
    wf: WorkflowDef

    def fits(self, loaded: LoadedRun, wf: WorkflowDef) -> bool:
        """Whether the machine may go on with what was loaded: the load left the
        journal unread (no other worker advanced the run since this one parked
        it), for the same workflow and generation, and the machine is parked."""
        return (
            loaded.journal is None
            and self.wf is wf
            and self.machine.run.generation == loaded.run.generation
            and self.machine.parked
        )


class RunCache:
    """Parked machines by run id, at most ``size`` (0: none kept).

    ``clears_marks``: the runs it evicts are listed for a commit to clear their
    marks (see the module's docstring).
    """

    def __init__(self, size: int, *, clears_marks: bool = True) -> None:
        self.size = size
        self._clears_marks = clears_marks
        self._runs: OrderedDict[str, Cached] = OrderedDict()
        self.evictions = 0  # (for tests and benchmarks)
        # Evicted runs whose rows may still name this worker (see the module's docstring).
        self._evicted: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def take(self, run_id: str) -> Cached | None:
        """``run_id``'s machine, removed: the advance owns it now, and closes it if it
        does not fit (see :meth:`Cached.fits`)."""
        # Advanced again: its commit writes its mark anew, which a clearing sent
        # after it must not undo.
        self._evicted.pop(run_id, None)
        return self._runs.pop(run_id, None)

    def put(self, run_id: str, machine: Machine, wf: WorkflowDef) -> None:
        """Keep ``machine`` (parked, its parking committed); evict beyond the bound."""
        old = self._runs.pop(run_id, None)
        if old is not None and old.machine is not machine:
            old.machine.close()
        self._runs[run_id] = Cached(machine, wf)
        while len(self._runs) > self.size:
            evicted_id, evicted = self._runs.popitem(last=False)
            evicted.machine.close()
            self.evictions += 1
            if self._clears_marks:
                self._evicted[evicted_id] = None

    def evicted(self) -> list[str]:
        """The runs evicted since the last call, for a commit to clear their marks."""
        if not self._evicted:
            return []
        run_ids, self._evicted = list(self._evicted), {}
        return run_ids

    def clear(self) -> None:
        """Close every kept machine (the worker stops)."""
        while self._runs:
            _, cached = self._runs.popitem()
            cached.machine.close()
