"""Debounce and batch (issue 3): many events, one run.

``debounce``: one run per quiet window, with the last payload (``max_wait`` bounds a
steady stream). ``batch``: one run with ``{"events": [...]}`` in publish order when
``max_size`` is reached or ``within`` has passed since the first. ``key=`` coalesces
per value of a payload field. The engine's internal accumulator runs stay out of
the user's ``list_runs``.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from parkway import Batch, Debounce, Engine, RunInfo, RunStatus


async def runs_of(engine: Engine, workflow: str) -> list[RunInfo]:
    """Runs of ``workflow``, oldest first."""
    runs = await engine.list_runs(workflow=workflow, limit=1000)
    return sorted(runs, key=lambda r: (r.created_at, r.id))


async def inputs_of(engine: Engine, workflow: str) -> list[Any]:
    return [r.input for r in await runs_of(engine, workflow)]


# ---------------------------------------------------------------------------------------------
# Debounce


async def test_three_publishes_in_a_window_give_one_run_with_the_last_payload(
    engine: Engine, clock, t0
) -> None:
    @engine.workflow(on_event="stock.changed", debounce="1m")
    async def reindex(ctx, input):
        return {"input": input, "trigger": ctx.trigger.id}

    for n, gap in ((1, "0s"), (2, "10s"), (3, "10s")):
        await clock.advance(gap)
        result = await engine.publish("stock.changed", {"n": n}, id=f"e{n}")
        assert result.started == []  # the run starts when the window closes
        assert not result.duplicate
    await engine.idle()
    assert await runs_of(engine, "reindex") == []
    # The quiet window counts from the last event (t0+20s), not from the first.
    await clock.advance("59s")
    assert await runs_of(engine, "reindex") == []
    await clock.advance("1s")
    [run] = await runs_of(engine, "reindex")
    assert run.input == {"n": 3}
    assert run.id == "evt:e3:reindex"
    assert run.created_at == t0 + timedelta(seconds=80)
    assert await engine.handle(run.id).result(timeout=5) == {"input": {"n": 3}, "trigger": "e3"}

    # Nothing more happens without events; the next event opens a new window.
    await clock.advance("1h")
    assert len(await runs_of(engine, "reindex")) == 1
    await engine.publish("stock.changed", {"n": 4}, id="e4")
    await clock.advance("1m")
    assert await inputs_of(engine, "reindex") == [{"n": 3}, {"n": 4}]


async def test_debounce_per_key(engine: Engine, clock) -> None:
    @engine.workflow(on_event="price.changed", debounce=Debounce("1m", key="sku"))
    async def reprice(ctx, input):
        return input

    await engine.publish("price.changed", {"sku": "A", "price": 1})
    await engine.publish("price.changed", {"sku": "B", "price": 10})
    await clock.advance("30s")
    await engine.publish("price.changed", {"sku": "A", "price": 2})
    await clock.advance("30s")
    # B's window (from t0) closed; A's (from t0+30s) has not.
    assert await inputs_of(engine, "reprice") == [{"sku": "B", "price": 10}]
    await engine.publish("price.changed", {"sku": "B", "price": 11})
    await clock.advance("30s")
    assert await inputs_of(engine, "reprice") == [
        {"sku": "B", "price": 10},
        {"sku": "A", "price": 2},
    ]
    await clock.advance("30s")
    assert await inputs_of(engine, "reprice") == [
        {"sku": "B", "price": 10},
        {"sku": "A", "price": 2},
        {"sku": "B", "price": 11},
    ]


async def test_debounce_max_wait_bounds_a_steady_stream(engine: Engine, clock, t0) -> None:
    @engine.workflow(on_event="tick", debounce=Debounce("1m", max_wait="5m"))
    async def digest(ctx, input):
        return input

    # One event every 30 s for 12 minutes: the stream is never quiet for a minute.
    for i in range(24):
        await engine.publish("tick", {"i": i}, id=f"t{i}")
        await clock.advance("30s")
    await clock.advance("2m")
    runs = await runs_of(engine, "digest")
    # Windows open at 0 s and 300 s and are cut after 5 minutes each; the last one
    # (from 600 s) ends quietly one minute after the last event (690 s).
    assert [r.input["i"] for r in runs] == [9, 19, 23]
    assert [(r.created_at - t0).total_seconds() for r in runs] == [300, 600, 750]
    assert [r.id for r in runs] == ["evt:t9:digest", "evt:t19:digest", "evt:t23:digest"]


async def test_without_max_wait_a_steady_stream_waits_for_quiet(engine: Engine, clock) -> None:
    @engine.workflow(on_event="tick", debounce="1m")
    async def digest(ctx, input):
        return input

    for i in range(20):
        await engine.publish("tick", i)
        await clock.advance("30s")
    assert await inputs_of(engine, "digest") == []
    await clock.advance("30s")
    assert await inputs_of(engine, "digest") == [19]


async def test_a_debounced_run_inherits_the_events_domain_and_subject(
    engine: Engine, clock
) -> None:
    @engine.workflow(on_event="cart.changed", debounce="1m")
    async def remind(ctx, input):
        return [ctx.domain, ctx.subject, input]

    await engine.publish("cart.changed", 1, domain="shop", subject="client:1")
    await engine.publish("cart.changed", 2, domain="shop", subject="client:2")
    await engine.publish("cart.changed", 3, domain="shop", subject="client:1")
    await clock.advance("1m")
    runs = await runs_of(engine, "remind")
    assert sorted((r.domain, r.subject, r.input) for r in runs) == [
        ("shop", "client:1", 3),
        ("shop", "client:2", 2),
    ]
    for run in runs:
        assert await engine.handle(run.id).result(timeout=5) == ["shop", run.subject, run.input]


async def test_a_debounced_run_rejected_by_its_validator_blocks_nothing(
    engine: Engine, clock
) -> None:
    def even(value: Any) -> Any:
        if value % 2:
            raise ValueError("odd")
        return value

    @engine.workflow(on_event="n", debounce="1m", validate_input=even)
    async def evens(ctx, input):
        return input

    @engine.workflow(on_event="n")
    async def every(ctx, input):
        return input

    assert len((await engine.publish("n", 2)).started) == 1
    assert len((await engine.publish("n", 3)).started) == 1
    await clock.advance("1m")
    assert await inputs_of(engine, "evens") == []  # 3 was the last payload: rejected
    await engine.publish("n", 4)
    await clock.advance("1m")
    assert await inputs_of(engine, "evens") == [4]
    assert sorted(await inputs_of(engine, "every")) == [2, 3, 4]


@pytest.mark.requires("persistent")
async def test_a_debounce_window_survives_an_engine_restart(make_engine, clock) -> None:
    def register(engine: Engine) -> None:
        @engine.workflow(on_event="tick", debounce="1m")
        async def digest(ctx, input):
            return input

    first = await make_engine(open=False)
    register(first)
    await first.open()
    await first.publish("tick", 1)
    await clock.advance("30s")
    await first.publish("tick", 2)
    await first.idle()
    await first.close()

    second = await make_engine(open=False)
    register(second)
    await second.open()
    await clock.advance("1m")
    assert await inputs_of(second, "digest") == [2]


# ---------------------------------------------------------------------------------------------
# Batch


async def test_a_full_batch_gives_one_run_with_all_events_in_order(engine: Engine, clock) -> None:
    @engine.workflow(on_event="line.added", batch=Batch(3, "1m"))
    async def pack(ctx, input):
        return input

    for n in range(3):
        assert (await engine.publish("line.added", {"n": n}, id=f"l{n}")).started == []
    await engine.idle()  # no clock movement: max_size alone fires it
    [run] = await runs_of(engine, "pack")
    assert run.input == {"events": [{"n": 0}, {"n": 1}, {"n": 2}]}
    assert run.id == "evt:l2:pack"
    assert await engine.handle(run.id).result(timeout=5) == run.input

    # The fourth event opens the next batch.
    await engine.publish("line.added", {"n": 3})
    await engine.idle()
    assert len(await runs_of(engine, "pack")) == 1
    await clock.advance("1m")
    assert await inputs_of(engine, "pack") == [
        {"events": [{"n": 0}, {"n": 1}, {"n": 2}]},
        {"events": [{"n": 3}]},
    ]


async def test_a_partial_batch_fires_when_within_has_passed(engine: Engine, clock, t0) -> None:
    @engine.workflow(on_event="line.added", batch=Batch(10, "1m"))
    async def pack(ctx, input):
        return input

    await engine.publish("line.added", "a")
    await clock.advance("20s")
    await engine.publish("line.added", "b")
    # 'within' counts from the first event, not the last.
    await clock.advance("39s")
    assert await runs_of(engine, "pack") == []
    await clock.advance("1s")
    [run] = await runs_of(engine, "pack")
    assert run.input == {"events": ["a", "b"]}
    assert run.created_at == t0 + timedelta(minutes=1)


async def test_batch_per_key(engine: Engine, clock) -> None:
    @engine.workflow(on_event="line.added", batch=Batch(2, "1m", key="order"))
    async def pack(ctx, input):
        return input

    await engine.publish("line.added", {"order": 1, "line": "a"})
    await engine.publish("line.added", {"order": 2, "line": "x"})
    await engine.publish("line.added", {"order": 1, "line": "b"})
    await engine.idle()
    assert await inputs_of(engine, "pack") == [
        {"events": [{"order": 1, "line": "a"}, {"order": 1, "line": "b"}]}
    ]
    await clock.advance("1m")
    assert await inputs_of(engine, "pack") == [
        {"events": [{"order": 1, "line": "a"}, {"order": 1, "line": "b"}]},
        {"events": [{"order": 2, "line": "x"}]},
    ]


async def test_a_batch_of_one_fires_on_every_event(engine: Engine) -> None:
    @engine.workflow(on_event="e", batch=Batch(1, "1h"))
    async def single(ctx, input):
        return input

    for n in range(3):
        await engine.publish("e", n)
    await engine.idle()
    inputs = await inputs_of(engine, "single")  # all at one engine time: order by payload
    assert sorted(inputs, key=lambda i: i["events"]) == [{"events": [n]} for n in range(3)]


# ---------------------------------------------------------------------------------------------
# The accumulators are the engine's own business


async def test_accumulator_runs_are_not_listed_as_the_users(engine: Engine, clock) -> None:
    @engine.workflow(on_event="tick", debounce=Debounce("1m", key="k"))
    async def debounced(ctx, input):
        return input

    @engine.workflow(on_event="tick", batch=Batch(5, "1h", key="k"))
    async def batched(ctx, input):
        return input

    @engine.workflow()
    async def parker(ctx, input):
        return await ctx.wait_for_signal("go")

    users = [(await engine.start("parker", id=f"user-{i}")).id for i in range(3)]
    await clock.advance("1s")
    # Newer than the user runs: several accumulators (one per workflow and key).
    for k in range(4):
        await engine.publish("tick", {"k": k})
    await engine.idle()

    listed = await engine.list_runs()
    assert sorted(r.id for r in listed) == sorted(users)
    assert {r.workflow for r in listed} == {"parker"}
    assert sorted(r.id for r in await engine.list_runs(status="parked")) == sorted(users)
    assert sorted(r.id for r in await engine.list_runs(status=RunStatus.PARKED)) == sorted(users)
    assert sorted(r.id for r in await engine.list_runs(domain="default")) == sorted(users)
    # The limit counts the user's runs, not the hidden ones.
    assert len(await engine.list_runs(limit=3)) == 3
    assert len(await engine.list_runs(limit=2)) == 2
    assert await engine.list_runs(workflow="debounced") == []
    assert await engine.subscriptions() == []

    await clock.advance("1m")
    fired = await engine.list_runs()
    assert {r.workflow for r in fired} == {"parker", "debounced"}
    assert len([r for r in fired if r.workflow == "debounced"]) == 4


async def test_a_full_batch_starts_its_run_promptly(engine: Engine) -> None:
    @engine.workflow(on_event="line.added", batch=Batch(3, "1h"))
    async def pack(ctx, input):
        return input

    await engine.publish("line.added", 0)
    await engine.idle()  # the accumulator is parked on its mailbox; the worker is idle
    started = time.monotonic()
    await engine.publish("line.added", 1)
    await engine.publish("line.added", 2)
    await engine.idle()
    elapsed = time.monotonic() - started
    assert await inputs_of(engine, "pack") == [{"events": [0, 1, 2]}]
    assert elapsed < 0.5, f"the batch took {elapsed:.2f}s of wall-clock time to start its run"
