"""The worker's cache of parked machines on its own: when a kept machine may go on,
and what the bound evicts. (Through the engine, with stores and workers:
tests/acceptance/test_cached_runs.py.)"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_replay import drive, machine, run, waits_for_go

from parkway.registry import WorkflowDef
from parkway.replay.machine import Machine
from parkway.store.records import LoadedRun
from parkway.worker.cache import Cached, RunCache

# The labels of the machines whose coroutines were closed (their `finally` ran).
closed: list[str] = []


def parked(label: str = "") -> Machine:
    async def waits(ctx: Any, _input: Any) -> Any:
        try:
            return await ctx.wait_for_signal("go")
        finally:
            closed.append(label)

    m = machine(waits, signals=[])
    outcome, _ = drive(m)
    assert outcome.status == "parked"
    return m


def loaded(**fields: object) -> LoadedRun:
    return LoadedRun(run(**fields), [], None)


def test_a_kept_machine_fits_a_load_that_left_the_journal_unread() -> None:
    m = parked()
    kept = Cached(m, m.wf)
    assert kept.fits(loaded(), m.wf)


@pytest.mark.parametrize(
    "why",
    ["journal read", "another workflow", "another generation", "not parked"],
)
def test_a_kept_machine_does_not_fit(why: str) -> None:
    m = parked() if why != "not parked" else machine(waits_for_go, signals=[])
    kept = Cached(m, m.wf)
    load, wf = loaded(), m.wf
    if why == "journal read":  # another worker advanced the run since
        load = dataclasses.replace(load, journal=[])
    elif why == "another workflow":  # the same name, registered again
        wf = WorkflowDef(m.wf.name, m.wf.version, m.wf.fn)
    elif why == "another generation":  # it went on as new meanwhile
        load = loaded(generation=1)
    assert not kept.fits(load, wf)


def test_the_least_recently_parked_machine_is_evicted_closed_and_listed_once() -> None:
    cache = RunCache(2)
    closed.clear()
    # Held here too, so that only the cache's closing (not the collector) closes them.
    machines = [parked(run_id) for run_id in ("a", "b", "c")]
    for run_id, m in zip("abc", machines, strict=True):
        cache.put(run_id, m, m.wf)
    assert "a" not in cache and len(cache) == 2 and cache.evictions == 1
    assert [label for label in closed if label] == ["a"]
    assert cache.evicted() == ["a"]
    assert cache.evicted() == []  # a commit cleared its mark: not listed again


def test_a_machine_taken_again_is_no_longer_listed_as_evicted() -> None:
    # Its advance writes its mark anew; a clearing sent after must not undo it.
    cache = RunCache(1)
    first, second = parked(), parked()
    cache.put("a", first, first.wf)
    cache.put("b", second, second.wf)
    assert cache.take("a") is None  # evicted: a miss, then its advance parks it again
    assert cache.evicted() == []
    assert cache.take("b") is not None and len(cache) == 0


def test_a_cache_of_size_zero_keeps_nothing_and_without_clearing_lists_nothing() -> None:
    none_kept = RunCache(0)
    closed.clear()
    m = parked("a")
    none_kept.put("a", m, m.wf)
    assert len(none_kept) == 0 and "a" in closed and none_kept.evicted() == ["a"]
    not_clearing = RunCache(0, clears_marks=False)
    m = parked()
    not_clearing.put("a", m, m.wf)
    assert not_clearing.evicted() == []
