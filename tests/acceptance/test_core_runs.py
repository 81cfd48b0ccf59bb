"""Runs: start, handles, inspection, listing, history, versions, continue-as-new, restarts."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta

import pytest

from parkway import (
    Engine,
    HistoryEntry,
    ParkwayError,
    ResultTimeoutError,
    RunClosedError,
    RunHandle,
    RunInfo,
    RunStatus,
)
from parkway.core import runs as core_runs

from .steps import blocking_step


async def test_start_runs_to_completion_and_info_describes_it(engine: Engine, t0) -> None:
    @engine.workflow()
    async def double(ctx, input):
        return {"doubled": input["x"] * 2, "run_id": ctx.run_id, "workflow": ctx.workflow}

    h = await engine.start("double", {"x": 21}, id="run-1", subject="client:5", domain="shop")
    assert isinstance(h, RunHandle)
    assert h.id == "run-1"
    assert await h.result(timeout=5) == {"doubled": 42, "run_id": "run-1", "workflow": "double"}

    info = await h.info()
    assert isinstance(info, RunInfo)
    assert info.id == "run-1"
    assert info.workflow == "double"
    assert info.version == "1"
    assert info.status is RunStatus.COMPLETED
    assert info.status == "completed"
    assert info.input == {"x": 21}
    assert info.output == {"doubled": 42, "run_id": "run-1", "workflow": "double"}
    assert info.error is None
    assert info.domain == "shop"
    assert info.subject == "client:5"
    assert info.parent_id is None
    assert info.created_at == t0
    assert info.created_at.tzinfo is not None
    assert info.updated_at >= info.created_at
    assert await engine.get_run("run-1") == info


async def test_start_defaults_id_domain_and_accepts_the_function(engine: Engine) -> None:
    @engine.workflow(name="hello")
    async def hello_wf(ctx, input):
        return f"hello {input}"

    h1 = await engine.start(hello_wf, "ann")
    h2 = await engine.start("hello", "bob")
    assert h1.id and h2.id and h1.id != h2.id
    assert await h1.result(timeout=5) == "hello ann"
    assert await h2.result(timeout=5) == "hello bob"
    info = await engine.get_run(h1.id)
    assert (info.workflow, info.domain, info.subject) == ("hello", "default", None)


async def test_start_is_idempotent_by_id(engine: Engine) -> None:
    calls = Counter()

    @engine.workflow()
    async def once(ctx, input):
        await ctx.step(lambda: calls.update(["step"]), name="count")
        return input

    h1 = await engine.start("once", "first", id="same")
    assert await h1.result(timeout=5) == "first"
    h2 = await engine.start("once", "second", id="same")
    await engine.idle()

    assert h2 == h1
    assert h2.id == "same"
    assert await h2.result(timeout=5) == "first"
    runs = await engine.list_runs(workflow="once")
    assert [r.id for r in runs] == ["same"]
    assert runs[0].input == "first"
    assert calls["step"] == 1


async def test_start_existing_parked_id_returns_that_run(engine: Engine) -> None:
    @engine.workflow()
    async def waiter(ctx, input):
        return [input, await ctx.wait_for_signal("go")]

    h1 = await engine.start("waiter", 1, id="w")
    await engine.idle()
    h2 = await engine.start("waiter", 2, id="w")
    await engine.idle()
    assert len(await engine.list_runs()) == 1
    await h2.signal("go", "now")
    assert await h1.result(timeout=5) == [1, "now"]


async def test_handle_from_id_and_handle_operations(engine: Engine) -> None:
    @engine.workflow()
    async def waiter(ctx, input):
        return await ctx.wait_for_signal("go")

    await engine.start("waiter", id="r1")
    await engine.start("waiter", id="r2")
    await engine.idle()

    h1, h2 = engine.handle("r1"), engine.handle("r2")
    assert h1.id == "r1"
    assert (await h1.info()).status is RunStatus.PARKED
    await h1.signal("go", {"v": 1})
    assert await h1.result(timeout=5) == {"v": 1}
    await h2.cancel()
    assert (await h2.info()).status is RunStatus.CANCELLED


async def test_result_timeout_leaves_the_run_alone(engine: Engine) -> None:
    @engine.workflow()
    async def waiter(ctx, input):
        return await ctx.wait_for_signal("go")

    h = await engine.start("waiter")
    await engine.idle()
    with pytest.raises(ResultTimeoutError) as exc_info:
        await h.result(timeout=0.05)
    assert isinstance(exc_info.value, TimeoutError)
    assert isinstance(exc_info.value, ParkwayError)
    assert h.id in str(exc_info.value)
    assert (await h.info()).status is RunStatus.PARKED
    await h.signal("go", 7)
    assert await h.result(timeout=5) == 7


async def test_list_runs_filters(engine: Engine, clock) -> None:
    @engine.workflow()
    async def parker(ctx, input):
        return await ctx.wait_for_signal("go")

    @engine.workflow()
    async def quick(ctx, input):
        return input

    await engine.start("parker", id="p1", subject="client:1", domain="shop")
    await clock.advance("1s")
    await engine.start("parker", id="p2", subject="client:2")
    await clock.advance("1s")
    await engine.start("quick", id="q1", subject="client:1", domain="shop")
    await clock.advance("1s")
    await engine.start("quick", id="q2", domain="crm")
    await engine.idle()

    def ids(runs: list[RunInfo]) -> list[str]:
        return [r.id for r in runs]

    # Newest first.
    assert ids(await engine.list_runs()) == ["q2", "q1", "p2", "p1"]
    assert ids(await engine.list_runs(workflow="parker")) == ["p2", "p1"]
    assert ids(await engine.list_runs(workflow="quick")) == ["q2", "q1"]
    assert ids(await engine.list_runs(workflow="nobody")) == []
    assert ids(await engine.list_runs(status=RunStatus.PARKED)) == ["p2", "p1"]
    assert ids(await engine.list_runs(status="parked")) == ["p2", "p1"]
    assert ids(await engine.list_runs(status="completed")) == ["q2", "q1"]
    assert ids(await engine.list_runs(status=RunStatus.FAILED)) == []
    assert ids(await engine.list_runs(subject="client:1")) == ["q1", "p1"]
    assert ids(await engine.list_runs(domain="shop")) == ["q1", "p1"]
    assert ids(await engine.list_runs(domain="default")) == ["p2"]
    assert ids(await engine.list_runs(domain="crm")) == ["q2"]
    assert ids(await engine.list_runs(limit=2)) == ["q2", "q1"]
    assert ids(await engine.list_runs(limit=1, workflow="parker")) == ["p2"]
    assert ids(await engine.list_runs(workflow="parker", subject="client:1", domain="shop")) == [
        "p1"
    ]
    assert ids(await engine.list_runs(workflow="quick", status="parked")) == []


async def test_list_runs_rejects_bad_status_and_limit(engine: Engine) -> None:
    with pytest.raises(ParkwayError, match="bogus"):
        await engine.list_runs(status="bogus")
    with pytest.raises(ParkwayError):
        await engine.list_runs(limit=0)


async def test_run_status_is_a_str_enum() -> None:
    assert [s.value for s in RunStatus] == [
        "pending",
        "running",
        "parked",
        "held",
        "completed",
        "failed",
        "cancelled",
    ]
    assert RunStatus.PARKED == "parked"
    assert RunStatus.HELD == "held"
    assert RunStatus("cancelled") is RunStatus.CANCELLED
    assert isinstance(RunStatus.COMPLETED, str)


async def test_history_lists_the_journal_in_order(engine: Engine, clock, t0) -> None:
    @engine.workflow()
    async def journaled(ctx, input):
        a = await ctx.step(lambda: 1, name="one")
        await ctx.sleep("1m")
        b = await ctx.wait_for_signal("go")
        return a + b

    h = await engine.start("journaled")
    await engine.idle()
    history = await engine.history(h.id)
    assert [(e.position, e.kind, e.name, e.status) for e in history] == [
        (0, "step", "one", "done"),
        (1, "sleep", "sleep", "pending"),
    ]
    assert history[0].result == 1
    assert all(isinstance(e, HistoryEntry) for e in history)

    await clock.advance("1m")
    await h.signal("go", 41)
    assert await h.result(timeout=5) == 42
    history = await engine.history(h.id)
    assert [(e.position, e.kind, e.name, e.status, e.result) for e in history] == [
        (0, "step", "one", "done", 1),
        (1, "sleep", "sleep", "done", None),
        (2, "signal", "go", "done", 41),
    ]
    assert history[0].at == t0
    assert history[2].at == t0 + timedelta(minutes=1)
    assert all(e.error is None for e in history)


async def test_steps_are_not_re_executed_after_park_and_resume(engine: Engine, clock) -> None:
    calls = Counter()

    def sync_step(name: str) -> str:
        calls[name] += 1
        return name.upper()

    async def async_step(name: str) -> str:
        calls[name] += 1
        return name

    @engine.workflow()
    async def counting(ctx, input):
        out = [await ctx.step(sync_step, "a", name="a")]
        await ctx.sleep("1h")
        out.append(await ctx.step(async_step, "b", name="b"))
        out.append(await ctx.wait_for_signal("go"))
        out.append(await ctx.step(sync_step, "c", name="c"))
        return out

    h = await engine.start("counting")
    await engine.idle()
    assert calls == {"a": 1}
    assert (await h.info()).status is RunStatus.PARKED
    await clock.advance("1h")
    assert calls == {"a": 1, "b": 1}
    await h.signal("go", "sig")
    assert await h.result(timeout=5) == ["A", "b", "sig", "C"]
    assert calls == {"a": 1, "b": 1, "c": 1}


async def test_signal_with_start_starts_a_new_run_with_the_signal(engine: Engine) -> None:
    @engine.workflow()
    async def inbox(ctx, input):
        return {"input": input, "got": await ctx.wait_for_signal("add")}

    h = await engine.signal_with_start("inbox", "cart:1", "add", {"sku": "x"}, input={"n": 1})
    assert isinstance(h, RunHandle)
    assert h.id == "cart:1"
    assert await h.result(timeout=5) == {"input": {"n": 1}, "got": {"sku": "x"}}
    info = await engine.get_run("cart:1")
    assert (info.workflow, info.input) == ("inbox", {"n": 1})


async def test_signal_with_start_signals_an_existing_run(engine: Engine) -> None:
    @engine.workflow()
    async def collect(ctx, input):
        a = await ctx.wait_for_signal("add")
        b = await ctx.wait_for_signal("add")
        return [input, a, b]

    h1 = await engine.signal_with_start("collect", "c1", "add", 1, input="first")
    await engine.idle()
    h2 = await engine.signal_with_start("collect", "c1", "add", 2, input="second")
    assert h2 == h1
    assert await h1.result(timeout=5) == ["first", 1, 2]
    assert [r.id for r in await engine.list_runs(workflow="collect")] == ["c1"]

    with pytest.raises(RunClosedError):
        await engine.signal_with_start("collect", "c1", "add", 3)


async def test_versions_runs_keep_the_version_they_started_with(engine: Engine) -> None:
    @engine.workflow("greet", version="v1")
    async def greet_v1(ctx, input):
        await ctx.wait_for_signal("go")
        return f"v1:{input}"

    old = await engine.start("greet", "a")
    await engine.idle()
    assert (await old.info()).version == "v1"

    @engine.workflow("greet", version="v2")
    async def greet_v2(ctx, input):
        await ctx.wait_for_signal("go")
        return f"v2:{input}"

    new = await engine.start("greet", "b")
    await engine.idle()
    assert (await new.info()).version == "v2"

    await old.signal("go")
    await new.signal("go")
    assert await old.result(timeout=5) == "v1:a"
    assert await new.result(timeout=5) == "v2:b"
    assert (await old.info()).version == "v1"


async def test_continue_as_new_keeps_one_run_with_the_latest_input(engine: Engine) -> None:
    calls = Counter()

    @engine.workflow()
    async def counter(ctx, input):
        n = input["n"]
        await ctx.step(lambda: calls.update([n]), name="tick")
        if n < 3:
            ctx.continue_as_new({"n": n + 1})
        return {"final": n, "run_id": ctx.run_id}

    h = await engine.start("counter", {"n": 0}, id="loop")
    assert await h.result(timeout=5) == {"final": 3, "run_id": "loop"}
    runs = await engine.list_runs(workflow="counter")
    assert [r.id for r in runs] == ["loop"]
    info = await h.info()
    assert info.status is RunStatus.COMPLETED
    assert info.input == {"n": 3}
    assert calls == {0: 1, 1: 1, 2: 1, 3: 1}
    # The journal is the latest generation's only.
    assert [(e.kind, e.name) for e in await engine.history("loop")] == [("step", "tick")]


async def test_continue_as_new_carries_unconsumed_signals_over(engine: Engine, clock) -> None:
    @engine.workflow()
    async def gen(ctx, input):
        if input["gen"] == 0:
            await ctx.sleep("1m")
            first = await ctx.wait_for_signal("x")
            ctx.continue_as_new({"gen": 1, "seen": [first]})
        second = await ctx.wait_for_signal("x")
        other = await ctx.wait_for_signal("y")
        return input["seen"] + [second, other]

    h = await engine.start("gen", {"gen": 0})
    await engine.idle()
    await h.signal("x", 1)
    await h.signal("y", "why")
    await h.signal("x", 2)
    await clock.advance("1m")
    assert await h.result(timeout=5) == [1, 2, "why"]
    assert (await h.info()).input == {"gen": 1, "seen": [1]}


@pytest.mark.requires("persistent")
async def test_engine_restart_resumes_without_re_running_steps(
    make_engine, engine_url: str, clock
) -> None:
    calls = Counter()

    def register(engine: Engine) -> None:
        @engine.workflow()
        async def durable(ctx, input):
            a = await ctx.step(lambda: calls.update(["a"]) or "A", name="a")
            token = str(ctx.uuid())
            await ctx.sleep("1h")
            b = await ctx.step(lambda: calls.update(["b"]) or "B", name="b")
            sig = await ctx.wait_for_signal("go")
            c = await ctx.step(lambda: calls.update(["c"]) or "C", name="c")
            return [a, b, sig, c, token, str(ctx.uuid()) == token]

    first = await make_engine(url=engine_url)
    register(first)
    h = await first.start("durable", id="d1")
    await first.idle()
    token = (await first.history("d1"))[1].result
    assert calls == {"a": 1}
    await first.close()

    second = await make_engine(url=engine_url)
    register(second)
    assert (await second.get_run("d1")).status is RunStatus.PARKED
    await clock.advance("1h")
    assert calls == {"a": 1, "b": 1}
    await second.close()

    third = await make_engine(url=engine_url)
    register(third)
    await third.signal("d1", "go", "sig")
    result = await third.handle(h.id).result(timeout=5)
    assert result == ["A", "B", "sig", "C", token, False]
    assert calls == {"a": 1, "b": 1, "c": 1}


@pytest.mark.requires("shared")
async def test_client_only_engine_leaves_runs_pending_until_a_worker_runs_them(
    make_engine, engine_url: str
) -> None:
    async def pending_wf(ctx, input):
        a = await ctx.wait_for_signal("s")
        b = await ctx.wait_for_signal("s")
        return [input, a, b]

    client = await make_engine(url=engine_url, worker=False)
    client.workflow("pending_wf")(pending_wf)
    h = await client.start("pending_wf", "in", id="p")
    await client.signal("p", "s", 1)
    await h.signal("s", 2)
    await asyncio.sleep(0.05)
    info = await client.get_run("p")
    assert info.status is RunStatus.PENDING
    assert info.output is None
    assert await client.history("p") == []

    worker = await make_engine(url=engine_url)
    worker.workflow("pending_wf")(pending_wf)
    assert await worker.handle("p").result(timeout=5) == ["in", 1, 2]
    assert await h.result(timeout=5) == ["in", 1, 2]
    assert (await client.get_run("p")).status is RunStatus.COMPLETED


async def test_result_of_a_run_advanced_here_waits_for_its_end_without_reading(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # While this process's worker advances the run, result() waits for the end the
    # worker announces, with no read of the run; a run that parks instead is read
    # again by the poll, and its result still comes once it ends.
    in_step, release, slow = blocking_step("stepped")

    @engine.workflow()
    async def worked(ctx, input):
        stepped = await ctx.step(slow)
        if input == "park":
            return [stepped, await ctx.wait_for_signal("go")]
        return stepped

    reads: list[str] = []
    record = core_runs.record

    async def counting(rt: object, run_id: str) -> object:
        reads.append(run_id)
        return await record(rt, run_id)  # type: ignore[arg-type]

    monkeypatch.setattr(core_runs, "record", counting)
    handle = await engine.start("worked", "end")
    await asyncio.wait_for(in_step.wait(), 10)
    waiting = asyncio.ensure_future(handle.result(timeout=10))
    await asyncio.sleep(0.2)  # past several of the poll's intervals
    assert reads == [] and not waiting.done()
    release.set()
    assert await waiting == "stepped"

    in_step.clear()
    release.clear()
    parked = await engine.start("worked", "park")
    await asyncio.wait_for(in_step.wait(), 10)
    waiting = asyncio.ensure_future(parked.result(timeout=10))
    await asyncio.sleep(0)
    release.set()
    await engine.idle(timeout=10)  # parked on the signal now
    assert not waiting.done()
    await parked.signal("go", 7)
    assert await waiting == ["stepped", 7]
