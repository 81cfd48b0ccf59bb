"""A worker keeps parked runs in memory and wakes them where they parked.

Each workflow here logs when its code runs from the top (a start, or a replay of
its journal): a run the worker holds is resumed without one. Whatever the
cache does, the results are the ones a replay gives: after an eviction, after
another worker advanced the run, across continue-as-new, when the run is
cancelled from another process.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from parkway import (
    Engine,
    InvalidArgumentError,
    RunStatus,
)
from parkway.testing import ManualClock

tops: Counter[str] = Counter()
added: list[tuple[str, int]] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    tops.clear()
    added.clear()


def record(run_id: str, n: int) -> int:
    added.append((run_id, n))
    return n


async def counter(ctx: Any, start: int) -> int:
    tops[ctx.run_id] += 1
    total = start or 0
    while True:
        n = await ctx.wait_for_signal("add")
        if n is None:
            return total
        total += await ctx.step(record, ctx.run_id, n)


async def parked(engine: Engine, run_id: str) -> None:
    await engine.idle()
    assert (await engine.get_run(run_id)).status is RunStatus.PARKED


async def test_a_resume_goes_on_where_the_run_parked(engine: Engine) -> None:
    engine.workflow(name="counter")(counter)
    run = await engine.start("counter", 0, id="c")
    for n in (1, 2, 3):
        await run.signal("add", n)
        await parked(engine, "c")
    await run.signal("add", None)
    assert await run.result(timeout=10) == 6
    assert tops["c"] == 1  # started once, woken three times without a replay
    assert added == [("c", 1), ("c", 2), ("c", 3)]


async def test_without_a_cache_each_resume_replays(make_engine: Any) -> None:
    engine = await make_engine(cached_runs=0)
    engine.workflow(name="counter")(counter)
    run = await engine.start("counter", 0, id="c")
    for n in (1, 2, 3):
        await run.signal("add", n)
        await parked(engine, "c")
    await run.signal("add", None)
    assert await run.result(timeout=10) == 6
    assert tops["c"] == 5
    assert added == [("c", 1), ("c", 2), ("c", 3)]  # (a replay runs no step again)


async def test_the_least_recently_parked_run_is_evicted_and_replays_once(
    make_engine: Any,
) -> None:
    engine = await make_engine(cached_runs=2)
    engine.workflow(name="counter")(counter)
    for run_id in ("a", "b", "c"):  # "a" parked first: the one evicted by "c"
        await engine.start("counter", 0, id=run_id)
        await parked(engine, run_id)
    for run_id in ("b", "c", "a"):
        await engine.signal(run_id, "add", 10)
        await parked(engine, run_id)
    assert tops == {"a": 2, "b": 1, "c": 1}
    # "a" parked again last, after "b" and "c": "b" was evicted by it.
    for run_id in ("a", "b", "c"):
        await engine.signal(run_id, "add", None)
        assert await engine.handle(run_id).result(timeout=10) == 10
    assert tops == {"a": 2, "b": 2, "c": 1}
    assert sorted(added) == [("a", 10), ("b", 10), ("c", 10)]


async def test_an_evicted_runs_code_is_closed(make_engine: Any) -> None:
    engine = await make_engine(cached_runs=1)
    closed: list[str] = []

    @engine.workflow()
    async def tidy(ctx, _input):
        try:
            await ctx.wait_for_signal("go")
        finally:
            closed.append(ctx.run_id)
        return "done"

    await engine.start("tidy", id="one")
    await parked(engine, "one")
    assert closed == []
    await engine.start("tidy", id="two")  # takes the one place: "one" goes
    await parked(engine, "two")
    assert closed == ["one"]


async def test_an_evicted_runs_row_stops_naming_the_worker_with_its_next_commit(
    make_engine: Any,
) -> None:
    # The row of a run the worker parked names it (advanced_by): its claims then
    # leave the journal out, the machine being in memory. Once evicted, the next
    # commit clears that, so the run's next load brings its journal along. Not on
    # a loop-bound store (SQLite), where reading the journal apart costs no round
    # trip: the mark stays, and the replay reads it apart.
    engine = await make_engine(cached_runs=1)
    engine.workflow(name="counter")(counter)
    store, owner = engine._rt.store, engine.worker.owner  # type: ignore[union-attr]
    cleared = None if "loop_bound" not in store.capabilities else owner

    async def marks(*run_ids: str) -> dict[str, str | None]:
        async with store.transaction(readonly=True) as tx:
            return {r: (await tx.runs.get(r)).advanced_by for r in run_ids}  # type: ignore[union-attr]

    for run_id in ("a", "b"):
        await engine.start("counter", 0, id=run_id)
        await parked(engine, run_id)
    assert await marks("a", "b") == {"a": owner, "b": owner}  # "a" evicted, still marked
    await engine.start("counter", 0, id="c")  # this commit clears "a"'s mark
    await parked(engine, "c")
    assert await marks("a", "b", "c") == {"a": cleared, "b": owner, "c": owner}
    await engine.signal("a", "add", 5)  # replayed once, from the journal its load read
    await parked(engine, "a")
    # ("c", evicted by "a", is cleared by the commit after.)
    assert await marks("a", "b", "c") == {"a": owner, "b": cleared, "c": owner}
    assert tops == {"a": 2, "b": 1, "c": 1}
    await engine.signal("a", "add", None)
    assert await engine.handle("a").result(timeout=10) == 5


@pytest.mark.requires("shared")
async def test_a_run_another_worker_advanced_is_replayed_not_taken_from_the_cache(
    make_engine: Any, clock: ManualClock
) -> None:
    # Engine B's clock is an hour ahead: a signal it sends is due for its worker
    # only, so B (not A) advances the run that A holds in memory.
    a = await make_engine()
    a.workflow(name="counter")(counter)
    run = await a.start("counter", 0, id="c")
    await a.signal("c", "add", 1)
    await parked(a, "c")
    assert tops["c"] == 1  # A holds it
    b = await make_engine(clock=ManualClock(start=clock.datetime() + timedelta(hours=1)))
    b.workflow(name="counter")(counter)
    await b.signal("c", "add", 2)
    await parked(b, "c")
    assert tops["c"] == 2  # B replayed it
    await b.close()
    await clock.advance("2h")
    await a.signal("c", "add", 4)
    await parked(a, "c")
    # A's machine was stale (it had seen 1 only): A replayed the journal B wrote.
    assert tops["c"] == 3
    await a.signal("c", "add", None)
    assert await run.result(timeout=10) == 7
    assert added == [("c", 1), ("c", 2), ("c", 4)]


async def test_continue_as_new_leaves_the_cache_and_starts_the_next_generation(
    engine: Engine,
) -> None:
    lengths: list[int] = []

    @engine.workflow()
    async def batches(ctx, total):
        tops[ctx.run_id] += 1
        for _ in range(2):
            n = await ctx.wait_for_signal("add")
            if n is None:
                return total
            total += await ctx.step(record, ctx.run_id, n)
        lengths.append(ctx.history_length)
        ctx.continue_as_new(total)

    run = await engine.start("batches", 0, id="b")
    for n in (1, 2, 3, 4, 5):
        await run.signal("add", n)
        await parked(engine, "b")
    await run.signal("add", None)
    assert await run.result(timeout=10) == 15
    # Each generation starts from the top once (a continue-as-new is not kept).
    assert tops["b"] == 3
    assert lengths == [4, 4]  # (two waits, two steps: each generation's journal anew)
    assert [n for _, n in added] == [1, 2, 3, 4, 5]


async def test_continue_as_new_is_suggested_past_the_history_threshold(
    make_engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    engine = await make_engine(history_threshold=6)

    @engine.workflow()
    async def entity(ctx, count):
        while not ctx.continue_as_new_suggested:
            await ctx.wait_for_signal("tick")
            count += 1
        if count < 6:
            ctx.continue_as_new(count)
        return [count, ctx.history_length]

    run = await engine.start("entity", 0, id="e")
    for _ in range(6):
        await run.signal("tick")
        await engine.idle()
    assert await run.result(timeout=10) == [6, 6]
    # Each generation stopped at the threshold: no journal went past it.
    assert "history_threshold" not in caplog.text


async def test_a_run_past_the_history_threshold_is_warned_about_once(
    make_engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    engine = await make_engine(history_threshold=3)

    @engine.workflow()
    async def heedless(ctx, _input):
        for _ in range(5):
            await ctx.wait_for_signal("tick")
        return ctx.continue_as_new_suggested

    run = await engine.start("heedless", id="h")
    with caplog.at_level(logging.WARNING, logger="parkway.worker"):
        for _ in range(5):
            await run.signal("tick")
            await engine.idle()
        assert await run.result(timeout=10) is True
    warnings = [r for r in caplog.records if "history_threshold" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    assert "run h" in warnings[0].getMessage()
    assert "ctx.continue_as_new" in warnings[0].getMessage()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("cached_runs", -1),
        ("cached_runs", "many"),
        ("history_threshold", 0),
        ("history_threshold", True),
    ],
)
def test_cache_settings_are_checked(option: str, value: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=option):
        Engine("memory://", **{option: value})


async def test_runs_let_go_of_leave_no_reference_cycles(make_engine: Any) -> None:
    """An evicted machine, a replaced one and a finished one are freed by reference
    counting: a cycle among a parked branch, its wait and a gather would wait for a
    full collection, whose pause grows with the worker's heap."""
    import gc

    engine = await make_engine(cached_runs=2)

    async def one(x: int) -> int:
        return x + 1

    @engine.workflow()
    async def both(ctx: Any, i: int) -> list[Any]:
        first = await ctx.wait_for_signal("go")
        rest = await ctx.gather(ctx.step(one, i), ctx.wait_for_signal("more"))
        return [first, *rest]

    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        handles = [await engine.start("both", i, id=f"b{i}") for i in range(6)]
        await engine.idle()  # six parked, two kept: four evicted
        for h in handles:
            await engine.signal(h.id, "go", 1)
        await engine.idle()
        for h in handles:
            await engine.signal(h.id, "more", 2)
        assert [await h.result(timeout=10) for h in handles] == [[1, i + 1, 2] for i in range(6)]
        gc.collect()
        left = [
            type(o).__qualname__
            for o in gc.garbage
            if type(o).__module__.startswith("parkway.replay")
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []
