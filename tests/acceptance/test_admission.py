"""Admission: Concurrency (queue, skip, cancel_oldest), RateLimit and priority,
on every backend, through the public API."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from parkway import (
    Concurrency,
    ConcurrencyLimitError,
    Engine,
    InvalidArgumentError,
    InvalidInputError,
    InvalidWorkflowError,
    ParkwayError,
    RateLimit,
    RunCancelledError,
    RunNotFoundError,
    RunStatus,
)
from parkway.testing import ManualClock


async def statuses(engine: Engine, *ids: str) -> dict[str, str]:
    return {run_id: (await engine.get_run(run_id)).status.value for run_id in ids}


def gated(engine: Engine, name: str, started: list[str], **options: Any) -> None:
    """A workflow that notes it started, then parks until signalled ``go``."""

    @engine.workflow(name=name, **options)
    async def wf(ctx, input):
        await ctx.step(started.append, ctx.run_id, name="note")
        await ctx.wait_for_signal("go")
        if input.get("fail"):
            raise RuntimeError("asked to fail")
        return input


async def test_concurrency_per_key_queues_the_rest_as_pending_in_arrival_order(
    engine: Engine,
) -> None:
    started: list[str] = []
    gated(engine, "per_user", started, concurrency=Concurrency(1, key="user"))
    for run_id, user in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a")]:
        await engine.start("per_user", {"user": user}, id=run_id)
    await engine.idle()
    assert await statuses(engine, "a1", "a2", "a3", "b1") == {
        "a1": "parked",
        "a2": "pending",
        "a3": "pending",
        "b1": "parked",
    }
    pending = await engine.list_runs(workflow="per_user", status=RunStatus.PENDING)
    assert sorted(r.id for r in pending) == ["a2", "a3"]
    assert (await engine.get_run("a2")).status is RunStatus.PENDING

    await engine.signal("a1", "go")
    await engine.idle()
    assert await statuses(engine, "a1", "a2", "a3") == {
        "a1": "completed",
        "a2": "parked",
        "a3": "pending",
    }
    await engine.signal("a2", "go")
    await engine.idle()
    await engine.signal("a3", "go")
    await engine.signal("b1", "go")
    await engine.idle()
    assert started == ["a1", "b1", "a2", "a3"]
    assert set((await statuses(engine, "a1", "a2", "a3", "b1")).values()) == {"completed"}


async def test_a_higher_priority_starts_first_among_queued_runs(engine: Engine) -> None:
    started: list[str] = []
    gated(engine, "one_at_a_time", started, concurrency=Concurrency(1))
    await engine.start("one_at_a_time", {}, id="first")
    await engine.idle()
    for run_id, priority in [("low", 0), ("high", 5), ("mid", 1), ("high2", 5), ("neg", -3)]:
        await engine.start("one_at_a_time", {}, id=run_id, priority=priority)
    await engine.idle()
    for run_id in ["first", "high", "high2", "mid", "low", "neg"]:
        assert (await engine.get_run(run_id)).status is RunStatus.PARKED
        await engine.signal(run_id, "go")
        await engine.idle()
    assert started == ["first", "high", "high2", "mid", "low", "neg"]


async def test_skip_refuses_the_start_and_leaves_an_event_start_out(engine: Engine) -> None:
    started: list[str] = []
    gated(engine, "only_one", started, concurrency=Concurrency(1, when_full="skip"))
    await engine.start("only_one", {}, id="kept")
    with pytest.raises(ConcurrencyLimitError) as raised:
        await engine.start("only_one", {}, id="refused")
    assert raised.value.workflow == "only_one" and raised.value.limit == 1
    with pytest.raises(RunNotFoundError):
        await engine.get_run("refused")
    # starting an id that exists still returns it, full or not
    assert (await engine.start("only_one", {}, id="kept")).id == "kept"

    @engine.workflow(on_event="order.placed", concurrency=Concurrency(1, "shop", "skip"))
    async def per_shop(ctx, input):
        await ctx.wait_for_signal("go")

    first = await engine.publish("order.placed", {"shop": "s1"}, id="e1")
    second = await engine.publish("order.placed", {"shop": "s1"}, id="e2")
    other = await engine.publish("order.placed", {"shop": "s2"}, id="e3")
    assert first.started == ["evt:e1:per_shop"]
    assert second.started == [] and second.touched == 0
    assert other.started == ["evt:e3:per_shop"]
    with pytest.raises(RunNotFoundError):
        await engine.get_run("evt:e2:per_shop")


async def test_cancel_oldest_cancels_the_oldest_run_of_the_key(engine: Engine) -> None:
    started: list[str] = []
    gated(engine, "latest_two", started, concurrency=Concurrency(2, "k", "cancel_oldest"))
    await engine.start("latest_two", {"k": "x"}, id="r1")
    await engine.start("latest_two", {"k": "x"}, id="r2")
    await engine.start("latest_two", {"k": "y"}, id="y1")
    await engine.idle()
    await engine.start("latest_two", {"k": "x"}, id="r3")
    await engine.idle()
    assert await statuses(engine, "r1", "r2", "r3", "y1") == {
        "r1": "cancelled",
        "r2": "parked",
        "r3": "parked",
        "y1": "parked",
    }
    with pytest.raises(RunCancelledError):
        await engine.handle("r1").result(timeout=5)
    await engine.start("latest_two", {"k": "x"}, id="r4")
    await engine.idle()
    assert await statuses(engine, "r2", "r3", "r4") == {
        "r2": "cancelled",
        "r3": "parked",
        "r4": "parked",
    }


async def test_cancel_oldest_cancels_a_run_in_the_middle_of_a_step(engine: Engine) -> None:
    release = asyncio.Event()
    began = asyncio.Event()

    async def slow() -> str:
        began.set()
        await release.wait()
        return "done"

    @engine.workflow(concurrency=Concurrency(1, when_full="cancel_oldest"))
    async def busy(ctx, input):
        await ctx.step(slow)
        await ctx.wait_for_signal("go")

    await engine.start("busy", {}, id="old")
    await asyncio.wait_for(began.wait(), 5)
    await engine.start("busy", {}, id="new")
    release.set()
    await engine.idle()
    # the old run's slot went to the new one at once; it was cancelled after its step
    assert await statuses(engine, "old", "new") == {"old": "cancelled", "new": "parked"}


async def test_a_run_that_fails_or_is_cancelled_frees_its_slot(engine: Engine) -> None:
    started: list[str] = []
    gated(engine, "serial", started, concurrency=Concurrency(1))
    await engine.start("serial", {"fail": True}, id="fails")
    await engine.start("serial", {}, id="cancelled")
    await engine.start("serial", {}, id="queued-cancelled")
    await engine.start("serial", {}, id="last")
    await engine.idle()
    await engine.cancel("queued-cancelled")  # leaves the queue; frees nothing
    await engine.signal("fails", "go")
    await engine.idle()
    assert await statuses(engine, "fails", "cancelled", "queued-cancelled", "last") == {
        "fails": "failed",
        "cancelled": "parked",
        "queued-cancelled": "cancelled",
        "last": "pending",
    }
    await engine.cancel("cancelled")
    await engine.idle()
    assert (await engine.get_run("last")).status is RunStatus.PARKED
    assert started == ["fails", "cancelled", "last"]


async def test_a_queued_run_keeps_its_signals_until_it_starts(engine: Engine) -> None:
    started: list[str] = []
    gated(engine, "mailbox", started, concurrency=Concurrency(1))
    await engine.start("mailbox", {}, id="m1")
    await engine.signal_with_start("mailbox", "m2", "go", input={"n": 2}, priority=3)
    await engine.idle()
    assert await statuses(engine, "m1", "m2") == {"m1": "parked", "m2": "pending"}
    assert started == ["m1"]
    await engine.signal("m1", "go")
    await engine.idle()
    # m2 started when m1's slot freed, and found its signal waiting
    assert await statuses(engine, "m1", "m2") == {"m1": "completed", "m2": "completed"}
    assert await engine.handle("m2").result(timeout=5) == {"n": 2}


async def test_continue_as_new_keeps_the_slot(engine: Engine) -> None:
    @engine.workflow(concurrency=Concurrency(1))
    async def looping(ctx, input):
        if input["n"] < 2:
            ctx.continue_as_new({"n": input["n"] + 1})
        await ctx.wait_for_signal("go")
        return input["n"]

    await engine.start("looping", {"n": 0}, id="loop")
    await engine.start("looping", {"n": 5}, id="after")
    await engine.idle()
    assert await statuses(engine, "loop", "after") == {"loop": "parked", "after": "pending"}
    await engine.signal("loop", "go")
    assert await engine.handle("loop").result(timeout=5) == 2
    await engine.idle()
    assert (await engine.get_run("after")).status is RunStatus.PARKED


async def test_rate_limit_starts_at_most_limit_runs_per_window(
    engine: Engine, clock: ManualClock
) -> None:
    began: list[tuple[str, float]] = []

    @engine.workflow(rate_limit=RateLimit(2, "1m", key="api"))
    async def call_api(ctx, input):
        began.append((ctx.run_id, ctx.now().timestamp()))
        return "ok"

    t0 = clock.datetime().timestamp()
    for i in range(5):
        await engine.start("call_api", {"api": "a"}, id=f"a{i}")
    await engine.start("call_api", {"api": "b"}, id="b0")
    await engine.idle()
    done = await engine.list_runs(workflow="call_api", status="completed")
    assert sorted(r.id for r in done) == ["a0", "a1", "b0"]
    pending = await engine.list_runs(workflow="call_api", status="pending")
    assert sorted(r.id for r in pending) == ["a2", "a3", "a4"]

    await clock.advance("30s")
    assert len(await engine.list_runs(workflow="call_api", status="completed")) == 3
    await clock.advance("30s")
    await engine.idle()
    assert len(await engine.list_runs(workflow="call_api", status="completed")) == 5
    await clock.advance("1m")
    await engine.idle()
    assert len(await engine.list_runs(workflow="call_api", status="completed")) == 6
    offsets = {run_id: at - t0 for run_id, at in began}
    assert offsets == {"a0": 0, "a1": 0, "b0": 0, "a2": 60, "a3": 60, "a4": 120}
    # A later start joins the window it finds: a4 and a5 share one, a6 waits.
    await engine.start("call_api", {"api": "a"}, id="a5")
    await engine.start("call_api", {"api": "a"}, id="a6")
    await engine.idle()
    assert await statuses(engine, "a5", "a6") == {"a5": "completed", "a6": "pending"}
    await clock.advance("1m")
    await engine.idle()
    assert (await engine.get_run("a6")).status is RunStatus.COMPLETED
    offsets = {run_id: at - t0 for run_id, at in began}
    assert (offsets["a5"], offsets["a6"]) == (120, 180)


async def test_rate_limit_and_concurrency_together(engine: Engine, clock: ManualClock) -> None:
    started: list[str] = []
    gated(
        engine,
        "both",
        started,
        concurrency=Concurrency(1),
        rate_limit=RateLimit(1, "1h"),
    )
    await engine.start("both", {}, id="x1")
    await engine.start("both", {}, id="x2")
    await engine.idle()
    await engine.signal("x1", "go")
    await engine.idle()
    # x2 has the slot now, but its rate window opens an hour after x1 started
    assert (await engine.get_run("x2")).status is RunStatus.PENDING
    await clock.advance("1h")
    await engine.idle()
    assert (await engine.get_run("x2")).status is RunStatus.PARKED


async def test_an_event_start_takes_its_priority_from_the_workflow(engine: Engine) -> None:
    started: list[str] = []

    @engine.workflow(
        on_event="job", concurrency=Concurrency(1), priority=lambda payload: payload["urgency"]
    )
    async def job(ctx, input):
        await ctx.step(started.append, input["name"], name="note")
        await ctx.wait_for_signal("go")

    for name, urgency in [("first", 0), ("calm", 1), ("urgent", 9)]:
        await engine.publish("job", {"name": name, "urgency": urgency}, id=name)
    await engine.idle()
    for name in ["first", "urgent", "calm"]:
        await engine.signal(f"evt:{name}:job", "go")
        await engine.idle()
    assert started == ["first", "urgent", "calm"]


async def test_bad_admission_options_are_refused_naming_the_field() -> None:
    for make, field in [
        (lambda: Concurrency(0), "limit"),
        (lambda: Concurrency(-1), "limit"),
        (lambda: Concurrency(1.5), "limit"),  # type: ignore[arg-type]
        (lambda: Concurrency(True), "limit"),
        (lambda: Concurrency(1, when_full="drop"), "when_full"),
        (lambda: Concurrency(1, key=""), "key"),
        (lambda: Concurrency(1, key=3), "key"),  # type: ignore[arg-type]
        (lambda: RateLimit(0, "1s"), "limit"),
        (lambda: RateLimit(1, 0), "period"),
    ]:
        with pytest.raises(InvalidArgumentError) as raised:
            make()
        assert raised.value.field == field, (make, raised.value)
        assert field in str(raised.value)
    with pytest.raises(ParkwayError, match="period"):
        RateLimit(1, "soon")

    engine = Engine("memory://")
    with pytest.raises(InvalidWorkflowError, match="concurrency"):

        @engine.workflow(concurrency=2)  # type: ignore[arg-type]
        async def wf(ctx, input): ...

    with pytest.raises(InvalidWorkflowError, match="rate_limit"):

        @engine.workflow(rate_limit="5/m")  # type: ignore[arg-type]
        async def wf2(ctx, input): ...


async def test_bad_starts_write_nothing(engine: Engine) -> None:
    @engine.workflow(concurrency=Concurrency(1, key="user"))
    async def keyed(ctx, input):
        return input

    for bad in ["high", 1.0, True, None, 2**63]:
        with pytest.raises(InvalidArgumentError) as raised:
            await engine.start("keyed", {"user": "u"}, id="p", priority=bad)  # type: ignore[arg-type]
        assert raised.value.field == "priority"
        with pytest.raises(InvalidArgumentError):
            await engine.signal_with_start("keyed", "p", "s", priority=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError) as missing:
        await engine.start("keyed", {"name": "no user"}, id="nokey")
    assert missing.value.field == "user" and "'user'" in str(missing.value)
    with pytest.raises(InvalidInputError):
        await engine.signal_with_start("keyed", "nokey", "s", input={"x": 1})
    assert await engine.list_runs(workflow="keyed") == []
    # the limit's count was not touched: one start still fits
    assert await engine.start("keyed", {"user": "u"}, id="fits")
    await engine.idle()
    assert (await engine.get_run("fits")).status is RunStatus.COMPLETED


async def test_over_http_a_full_skip_limit_is_409_and_a_missing_key_422(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    from parkway.http import create_app

    @engine.workflow(concurrency=Concurrency(1, key="user", when_full="skip"))
    async def guarded(ctx, input):
        await ctx.wait_for_signal("go")

    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as http:
        body = {"workflow": "guarded", "input": {"user": "u"}}
        assert (await http.post("/runs", json={**body, "id": "one"})).status_code == 201
        refused = await http.post("/runs", json={**body, "id": "two"})
        assert refused.status_code == 409, refused.text
        assert "ConcurrencyLimitError" in refused.text
        missing = await http.post("/runs", json={"workflow": "guarded", "input": {"x": 1}})
        assert missing.status_code == 422, missing.text
        assert "user" in missing.text
    with pytest.raises(RunNotFoundError):
        await engine.get_run("two")


async def test_over_http_a_start_takes_its_priority(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    from parkway.http import create_app

    started: list[str] = []
    gated(engine, "serial", started, concurrency=Concurrency(1))
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as http:
        for run_id, priority in [("first", 0), ("low", -1), ("high", 7)]:
            body = {"workflow": "serial", "input": {}, "id": run_id, "priority": priority}
            assert (await http.post("/runs", json=body)).status_code == 201
        for bad in ["7", 1.5, True, 2**63]:
            body = {"workflow": "serial", "input": {}, "id": "bad", "priority": bad}
            refused = await http.post("/runs", json=body)
            assert refused.status_code == 422, (bad, refused.text)
            assert "priority" in refused.text
    with pytest.raises(RunNotFoundError):
        await engine.get_run("bad")
    await engine.idle()
    for run_id in ["first", "high", "low"]:
        await engine.signal(run_id, "go")
        await engine.idle()
    assert started == ["first", "high", "low"]


@pytest.mark.requires("shared")
async def test_a_client_that_does_not_register_the_workflow_frees_the_slot_it_ends(
    engine: Engine, make_engine: Any
) -> None:
    started: list[str] = []
    gated(engine, "remote", started, concurrency=Concurrency(1, key="k"))
    await engine.start("remote", {"k": "x"}, id="holder")
    await engine.start("remote", {"k": "x"}, id="waiting")
    await engine.idle()
    client = await make_engine(worker=False)
    assert "remote" not in client.workflows()
    await client.cancel("holder")  # its end hands the slot on, from the store's record
    deadline = asyncio.get_running_loop().time() + 10
    while (await engine.get_run("waiting")).status is not RunStatus.PARKED:
        assert asyncio.get_running_loop().time() < deadline, await statuses(engine, "waiting")
        await asyncio.sleep(0.02)
    assert (await engine.get_run("holder")).status is RunStatus.CANCELLED
    assert started == ["holder", "waiting"]


async def test_an_update_sent_to_a_queued_run_is_handled_once_it_starts(engine: Engine) -> None:
    @engine.workflow(concurrency=Concurrency(1))
    async def counter(ctx, input):
        total = {"n": 0}

        def add(amount):
            total["n"] += amount
            return total["n"]

        ctx.on_update("add", add)
        await ctx.wait_for_signal("stop")
        return total["n"]

    await engine.start("counter", {}, id="c1")
    await engine.start("counter", {}, id="c2")
    await engine.idle()
    pending = asyncio.ensure_future(engine.update("c2", "add", 5, id="u1", timeout=10))
    await asyncio.sleep(0.2)
    await engine.idle()
    assert not pending.done()
    assert (await engine.get_run("c2")).status is RunStatus.PENDING
    await engine.signal("c1", "stop")
    assert await pending == 5
    await engine.signal("c2", "stop")
    assert await engine.handle("c2").result(timeout=5) == 5


async def test_children_of_a_limited_workflow_wait_for_their_slots(engine: Engine) -> None:
    started: list[str] = []
    gated(engine, "kid", started, concurrency=Concurrency(1, when_full="skip"))

    @engine.workflow()
    async def parent(ctx, input):
        kids = [await ctx.start_child("kid", {"n": n}, id=f"kid-{n}") for n in range(3)]
        return [await kid.result() for kid in kids]

    await engine.start("parent", {}, id="p")
    await engine.idle()
    # a "skip" limit cannot refuse a child the parent has started: it queues
    assert await statuses(engine, "kid-0", "kid-1", "kid-2") == {
        "kid-0": "parked",
        "kid-1": "pending",
        "kid-2": "pending",
    }
    for n in range(3):
        await engine.signal(f"kid-{n}", "go")
        await engine.idle()
    assert await engine.handle("p").result(timeout=5) == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert started == ["kid-0", "kid-1", "kid-2"]


@pytest.mark.requires("group_commit")
async def test_ends_of_runs_of_several_keys_commit_in_the_order_of_their_keys(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each end locks its key's slot row: the worker's batches take those rows in
    the keys' order (two batches in opposite orders would deadlock on PostgreSQL)."""
    started: list[str] = []
    gated(engine, "keyed", started, concurrency=Concurrency(1, key="user"))
    gated(engine, "free", started)
    for user in ("z", "x", "y"):
        await engine.start("keyed", {"user": user}, id=f"k-{user}")
    await engine.start("free", {}, id="f")
    await engine.idle()
    worker = engine.worker
    assert worker is not None and worker.committer is not None
    orders: list[str] = []
    run = worker.committer.run

    async def recording(job: Any, *, alone: bool = False, order: str = "") -> Any:
        orders.append(order)
        return await run(job, alone=alone, order=order)

    monkeypatch.setattr(worker.committer, "run", recording)
    for run_id in ("k-z", "k-x", "f", "k-y"):
        await engine.signal(run_id, "go")
    await engine.idle()
    assert sorted(o for o in orders if o) == ["keyed\x00x", "keyed\x00y", "keyed\x00z"]
    assert "" in orders  # (the unlimited run's end: no slot, first in any batch)
