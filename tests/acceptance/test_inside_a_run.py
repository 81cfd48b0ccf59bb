"""Inside a run: parallel branches, the first of several waits, values, updates, patches.

Every test runs on every backend (the ``engine`` fixture), through the public API.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from parkway import (
    Engine,
    InvalidArgumentError,
    ParkwayError,
    ResultTimeoutError,
    RunClosedError,
    RunNotFoundError,
    RunStatus,
    SerializationError,
    StepFailedError,
    UpdateFailedError,
    UpdateRejectedError,
    WaitTimeoutError,
    WorkflowFailedError,
)
from parkway.testing import ManualClock

# -- gather ------------------------------------------------------------------------------------


async def test_gather_runs_async_steps_at_once_and_returns_in_argument_order(
    engine: Engine,
) -> None:
    running, most = 0, 0

    async def slow(x: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05 * (4 - x))  # the last finishes first
        running -= 1
        return x * 10

    @engine.workflow()
    async def fan_out(ctx, _input):
        return await ctx.gather(*(ctx.step(slow, x, name=f"slow-{x}") for x in range(4)))

    t0 = time.monotonic()
    assert await (await engine.start("fan_out")).result(timeout=10) == [0, 10, 20, 30]
    assert most == 4
    assert time.monotonic() - t0 < 0.2 * 4  # (together: about the longest, not the sum)


async def test_gather_runs_sync_steps_in_threads_at_once(engine: Engine) -> None:
    import threading

    barrier = threading.Barrier(3, timeout=5)

    def meet(x: int) -> int:
        barrier.wait()  # only passes if all three run at the same time
        return x

    @engine.workflow()
    async def meets(ctx, _input):
        return await ctx.gather(*(ctx.step(meet, x, name=f"meet-{x}") for x in range(3)))

    assert await (await engine.start("meets")).result(timeout=10) == [0, 1, 2]


async def test_a_gather_parked_on_a_wait_does_not_run_its_steps_again(engine: Engine) -> None:
    calls: list[str] = []

    async def work(name: str) -> str:
        calls.append(name)
        return name

    @engine.workflow()
    async def half_waits(ctx, _input):
        async def branch() -> Any:
            await ctx.step(work, "before", name="before")
            return await ctx.wait_for_signal("go")

        return await ctx.gather(ctx.step(work, "other", name="other"), branch())

    handle = await engine.start("half_waits")
    await engine.idle()
    assert (await handle.info()).status == RunStatus.PARKED
    await handle.signal("go", "signalled")
    assert await handle.result(timeout=10) == ["other", "signalled"]
    assert sorted(calls) == ["before", "other"]
    history = await engine.history(handle.id)
    assert [e.kind for e in history].count("step") == 2


async def test_the_first_error_of_a_gather_propagates_and_withdraws_the_waiting_branches(
    engine: Engine,
) -> None:
    async def boom() -> None:
        raise ValueError("boom")

    @engine.workflow()
    async def one_fails(ctx, _input):
        try:
            await ctx.gather(ctx.wait_for_event("never", timeout="1h"), ctx.step(boom, name="boom"))
        except StepFailedError as exc:
            return exc.error_message
        return "no"

    handle = await engine.start("one_fails")
    assert await handle.result(timeout=10) == "boom"
    assert await engine.subscriptions(run_id=handle.id) == []  # the event wait is gone


@pytest.mark.parametrize("first", ["ok", "boom"])
async def test_a_gather_of_a_success_and_a_failure_ends_in_either_order(
    engine: Engine, first: str
) -> None:
    # Two def steps; the one named by ``first`` finishes well before the other (which
    # waits for it, then a moment): the failure coming first withdraws the branch whose
    # step is still in flight, which once left the run parked on nothing for ever.
    import threading

    finished = {"ok": threading.Event(), "boom": threading.Event()}
    second = "boom" if first == "ok" else "ok"

    def after_the_other(name: str) -> None:
        if name == second:
            assert finished[first].wait(5)
            time.sleep(0.1)
        finished[name].set()

    def ok() -> int:
        after_the_other("ok")
        return 1

    def boom() -> None:
        after_the_other("boom")
        raise ValueError("boom")

    @engine.workflow(name="g")
    async def g(ctx, _input):
        try:
            await ctx.gather(ctx.step(ok), ctx.step(boom))
        except StepFailedError:
            caught = "failed"
        for event in finished.values():
            event.clear()
        mixed = await ctx.gather(ctx.step(ok), ctx.step(boom), return_exceptions=True)
        return [caught, mixed[0], type(mixed[1]).__name__]

    handle = await engine.start("g")
    assert await handle.result(timeout=10) == ["failed", 1, "StepFailedError"]


async def test_nested_gathers_and_return_exceptions(engine: Engine) -> None:
    async def fails(x: int) -> int:
        raise KeyError(x)

    async def ok(x: int) -> int:
        return x

    @engine.workflow()
    async def nested(ctx, _input):
        async def inner() -> list[Any]:
            return list(await ctx.gather(ctx.step(ok, 1, name="a"), ctx.step(ok, 2, name="b")))

        results = await ctx.gather(inner(), ctx.step(fails, 3, name="c"), return_exceptions=True)
        return [r if not isinstance(r, Exception) else type(r).__name__ for r in results]

    assert await (await engine.start("nested")).result(timeout=10) == [
        [1, 2],
        "StepFailedError",
    ]


async def test_asyncio_gather_over_ctx_operations_is_refused_naming_ctx_gather(
    engine: Engine,
) -> None:
    async def ok() -> int:
        return 1

    @engine.workflow()
    async def wrong(ctx, _input):
        return await asyncio.gather(ctx.step(ok), ctx.step(ok))

    with pytest.raises(WorkflowFailedError, match=r"ctx\.gather"):
        await (await engine.start("wrong")).result(timeout=10)


@pytest.mark.parametrize("bad", [1, "x", None, lambda: 1])
async def test_gather_refuses_what_is_not_a_ctx_operation_or_coroutine(
    engine: Engine, bad: Any
) -> None:
    @engine.workflow()
    async def gathers_junk(ctx, _input):
        try:
            await ctx.gather(bad)
        except InvalidArgumentError as exc:
            return f"{exc.field}: {exc}"
        return "no"

    out = await (await engine.start("gathers_junk")).result(timeout=10)
    assert out.startswith("aws[0]: ctx.gather argument 0")
    assert await engine.history((await engine.list_runs())[0].id) == []


# -- first -------------------------------------------------------------------------------------


async def pay_or_cancel(ctx, _input):
    name, value = await ctx.first(
        paid=ctx.wait_for_event("payment.received", match={"order": 1}),
        cancelled=ctx.wait_for_signal("cancel"),
        late=ctx.sleep("1d"),
    )
    return [name, value]


async def test_first_returns_the_first_input_and_withdraws_the_others(
    engine: Engine, clock: ManualClock
) -> None:
    engine.workflow(name="pay_or_cancel")(pay_or_cancel)
    handle = await engine.start("pay_or_cancel")
    await engine.idle()
    assert len(await engine.subscriptions(run_id=handle.id)) == 1
    await engine.publish("payment.received", {"order": 1, "amount": 5})
    assert await handle.result(timeout=10) == ["paid", {"order": 1, "amount": 5}]
    assert await engine.subscriptions(run_id=handle.id) == []
    await clock.advance("2d")  # the withdrawn timer does nothing
    assert (await handle.info()).status == RunStatus.COMPLETED


async def test_first_leaves_a_signal_a_losing_wait_did_not_take(
    engine: Engine, clock: ManualClock
) -> None:
    @engine.workflow()
    async def then_waits(ctx, _input):
        first = list(await ctx.first(go=ctx.wait_for_signal("go"), late=ctx.sleep(60)))
        later = await ctx.wait_for_signal("cancel")
        return [first, later]

    handle = await engine.start("then_waits")
    await engine.idle()
    await handle.signal("cancel", "kept")  # not a wait of first: stays in the mailbox
    await clock.advance("61s")
    assert await handle.result(timeout=10) == [["late", None], "kept"]


async def test_first_takes_a_message_buffered_before_it_parked(engine: Engine) -> None:
    @engine.workflow()
    async def waits_message(ctx, _input):
        return list(await ctx.first(score=ctx.wait_for_message("score", "K-1"), late=ctx.sleep(60)))

    assert (await engine.correlate("score", "K-1", 7)).outcome == "buffered"
    handle = await engine.start("waits_message")
    assert await handle.result(timeout=10) == ["score", 7]
    assert await engine.messages() == []


async def test_first_racing_a_signal_against_its_timer_loses_nothing(
    engine: Engine, clock: ManualClock
) -> None:
    @engine.workflow()
    async def races(ctx, _input):
        first = list(await ctx.first(go=ctx.wait_for_signal("go"), late=ctx.sleep(10)))
        if first[0] == "late":
            return [first, await ctx.wait_for_signal("go")]
        return [first]

    handle = await engine.start("races")
    await engine.idle()
    await asyncio.gather(handle.signal("go", 1), clock.advance("10s"))
    result = await handle.result(timeout=10)
    # Exactly one won; if the timer did, the signal is still there for the next wait.
    assert result in ([["go", 1]], [["late", None], 1])


async def test_a_wait_of_first_that_times_out_raises_out_of_first(
    engine: Engine, clock: ManualClock
) -> None:
    @engine.workflow()
    async def times_out(ctx, _input):
        try:
            await ctx.first(go=ctx.wait_for_signal("go", timeout="5s"), late=ctx.sleep("1h"))
        except WaitTimeoutError:
            return "timed out"
        return "no"

    handle = await engine.start("times_out")
    await engine.idle()
    await clock.advance("6s")
    assert await handle.result(timeout=10) == "timed out"


@pytest.mark.parametrize("kind", ["none", "step", "value"])
async def test_first_refuses_what_is_not_a_wait(engine: Engine, kind: str) -> None:
    async def ok() -> int:
        return 1

    @engine.workflow()
    async def bad_first(ctx, _input):
        waits: dict[str, Any] = {}
        if kind == "step":
            waits = {"s": ctx.step(ok)}
        elif kind == "value":
            waits = {"v": 3}
        try:
            await ctx.first(**waits)
        except InvalidArgumentError as exc:
            return str(exc)
        return "no"

    out = await (await engine.start("bad_first")).result(timeout=10)
    assert "ctx.first" in out


async def test_first_holds_the_one_waiter_rule_for_messages(engine: Engine) -> None:
    @engine.workflow()
    async def holder(ctx, _input):
        return await ctx.wait_for_message("score", "K-2")

    @engine.workflow()
    async def second(ctx, _input):
        try:
            await ctx.first(m=ctx.wait_for_message("score", "K-2"), late=ctx.sleep(60))
        except ParkwayError as exc:
            return type(exc).__name__
        return "no"

    await engine.start("holder", id="h")
    await engine.idle()
    assert await (await engine.start("second")).result(timeout=10) == "DuplicateSubscriptionError"


# -- values ------------------------------------------------------------------------------------


async def test_a_value_is_read_once_committed_and_a_later_set_replaces_it(
    engine: Engine,
) -> None:
    @engine.workflow()
    async def checkout(ctx, _input):
        ctx.set_value("link", "https://pay.example/1")
        ctx.set_value("progress", 10)
        await ctx.wait_for_signal("paid")
        ctx.set_value("progress", 100)
        return "done"

    handle = await engine.start("checkout")
    assert await handle.value("link", timeout=5) == "https://pay.example/1"
    assert (await handle.info()).values == {"link": "https://pay.example/1", "progress": 10}
    await handle.signal("paid")
    await handle.result(timeout=10)
    assert await handle.value("progress") == 100
    assert (await engine.list_runs(workflow="checkout"))[0].values["progress"] == 100


async def test_a_value_not_set_is_none_after_the_timeout(engine: Engine) -> None:
    @engine.workflow()
    async def quiet(ctx, _input):
        await ctx.wait_for_signal("never")

    handle = await engine.start("quiet")
    assert await handle.value("link") is None
    t0 = time.monotonic()
    assert await handle.value("link", timeout=0.2) is None
    assert time.monotonic() - t0 >= 0.19


async def test_set_value_refuses_a_value_that_is_not_json(engine: Engine) -> None:
    @engine.workflow()
    async def bad_value(ctx, _input):
        try:
            ctx.set_value("x", {1, 2})
        except SerializationError as exc:
            return str(exc)
        return "no"

    handle = await engine.start("bad_value")
    assert "value 'x'" in await handle.result(timeout=10)
    assert (await handle.info()).values == {}


# -- updates -----------------------------------------------------------------------------------


async def counter(ctx, _input):
    state = {"total": 0}

    def add(amount: int) -> int:
        state["total"] += amount
        return state["total"]

    def positive(amount: Any) -> None:
        if not isinstance(amount, int) or amount <= 0:
            raise ValueError(f"amount must be a positive int, got {amount!r}")

    ctx.on_update("add", add, validate=positive)
    await ctx.wait_until(lambda: state["total"] >= 10)
    return state["total"]


async def test_an_update_returns_its_handlers_answer_and_wakes_wait_until(engine: Engine) -> None:
    engine.workflow(name="counter")(counter)
    handle = await engine.start("counter")
    assert await handle.update("add", 4) == 4
    assert await engine.update(handle.id, "add", 5) == 9
    assert (await handle.info()).status == RunStatus.PARKED
    assert await handle.update("add", 1) == 10
    assert await handle.result(timeout=10) == 10
    kinds = [e.kind for e in await engine.history(handle.id)]
    assert kinds.count("update") == 3 and kinds.count("update.done") == 3


@pytest.mark.requires("shared")
async def test_a_caller_in_another_engine_gets_update_answers_and_the_result(
    make_engine: Any, engine_url: str
) -> None:
    # The caller's engine runs no worker: the worker engine's commits are not
    # announced to it, so it learns of each by reading again (its first reads come
    # within a millisecond or two).
    worker = await make_engine(url=engine_url)
    worker.workflow(name="counter")(counter)
    client = await make_engine(url=engine_url, worker=False)
    handle = await client.start("counter")
    assert await client.update(handle.id, "add", 4, timeout=10) == 4
    assert await client.update(handle.id, "add", 6, timeout=10) == 10
    assert await client.handle(handle.id).result(timeout=10) == 10


async def test_a_rejected_update_journals_nothing(engine: Engine) -> None:
    engine.workflow(name="counter")(counter)
    handle = await engine.start("counter")
    await engine.idle()
    before = await engine.history(handle.id)
    with pytest.raises(UpdateRejectedError, match="positive int") as caught:
        await handle.update("add", -1)
    assert (caught.value.run_id, caught.value.name) == (handle.id, "add")
    with pytest.raises(UpdateRejectedError, match="no update handler 'nope'"):
        await handle.update("nope", 1)
    assert await engine.history(handle.id) == before


async def test_an_update_with_a_repeated_id_is_applied_once(engine: Engine) -> None:
    engine.workflow(name="counter")(counter)
    handle = await engine.start("counter")
    assert await handle.update("add", 3, id="u-1") == 3
    assert await handle.update("add", 3, id="u-1") == 3  # the first answer, not 6
    assert await handle.update("add", 1, id="u-2") == 4


async def test_an_update_whose_handler_raises_fails_only_the_update(engine: Engine) -> None:
    @engine.workflow()
    async def fragile(ctx, _input):
        def explode(_payload: Any) -> None:
            raise RuntimeError("handler broke")

        ctx.on_update("explode", explode)
        return await ctx.wait_for_signal("stop")

    handle = await engine.start("fragile")
    with pytest.raises(UpdateFailedError, match="handler broke"):
        await handle.update("explode")
    await handle.signal("stop", "still fine")
    assert await handle.result(timeout=10) == "still fine"


async def test_an_async_update_handler_may_await_ctx_operations(engine: Engine) -> None:
    async def price(item: str) -> int:
        return len(item)

    @engine.workflow()
    async def shop(ctx, _input):
        basket: list[str] = []

        async def add_item(item: str) -> int:
            basket.append(item)
            return sum([await ctx.step(price, i, name=f"price:{i}") for i in basket])

        ctx.on_update("add_item", add_item)
        await ctx.wait_for_signal("checkout")
        return basket

    handle = await engine.start("shop")
    assert await handle.update("add_item", "pear") == 4
    assert await handle.update("add_item", "fig") == 7
    await handle.signal("checkout")
    assert await handle.result(timeout=10) == ["pear", "fig"]


async def test_an_update_for_a_finished_or_unknown_run(engine: Engine) -> None:
    @engine.workflow()
    async def quick(ctx, _input):
        return "done"

    handle = await engine.start("quick")
    await handle.result(timeout=10)
    with pytest.raises(RunClosedError):
        await handle.update("anything")
    with pytest.raises(RunNotFoundError):
        await engine.update("no-such-run", "anything")


async def test_an_update_racing_the_runs_completion_is_closed_or_applied(engine: Engine) -> None:
    @engine.workflow()
    async def short(ctx, _input):
        ctx.on_update("ping", lambda _p: "pong")
        await ctx.sleep(0)
        return "done"

    handle = await engine.start("short")
    try:
        answer = await handle.update("ping", timeout=10)
    except RunClosedError:
        answer = "closed"
    assert answer in ("pong", "closed")
    assert await handle.result(timeout=10) == "done"


async def test_the_callers_timeout_bounds_only_its_wait(engine: Engine) -> None:
    @engine.workflow()
    async def busy(ctx, _input):
        ctx.on_update("ping", lambda _p: "pong")
        await ctx.wait_for_signal("go")  # updates are handled here, from the start
        return "done"

    release = asyncio.Event()

    async def held() -> None:
        await release.wait()

    @engine.workflow()
    async def never_quiet(ctx, _input):
        ctx.on_update("ping", lambda _p: "pong")
        await ctx.step(held)
        return "done"

    handle = await engine.start("busy")
    assert await handle.update("ping") == "pong"
    stuck = await engine.start("never_quiet")
    with pytest.raises(ResultTimeoutError):
        await stuck.update("ping", id="late", timeout=0.2)
    release.set()
    await stuck.result(timeout=10)


async def test_a_hundred_concurrent_updates_are_each_applied_once(engine: Engine) -> None:
    engine.workflow(name="counter")(counter)
    handle = await engine.start("counter")
    await engine.idle()

    @engine.workflow()
    async def tally(ctx, _input):
        seen: list[int] = []

        def record(n: int) -> int:
            seen.append(n)
            return len(seen)

        ctx.on_update("record", record)
        await ctx.wait_until(lambda: len(seen) == 100)
        return sorted(seen)

    run = await engine.start("tally")
    answers = await asyncio.gather(
        *(run.update("record", n, id=f"r-{n}", timeout=30) for n in range(100))
    )
    assert sorted(answers) == list(range(1, 101))
    assert await run.result(timeout=30) == list(range(100))
    assert handle.id  # (the other run is untouched)


@pytest.mark.parametrize(
    ("name", "handler", "validate", "field"),
    [("", print, None, "name"), ("x", 3, None, "handler"), ("x", print, "no", "validate")],
)
async def test_on_update_refuses_bad_arguments(
    engine: Engine, name: Any, handler: Any, validate: Any, field: str
) -> None:
    @engine.workflow()
    async def registers(ctx, _input):
        try:
            ctx.on_update(name, handler, validate=validate)
        except InvalidArgumentError as exc:
            return exc.field
        return "no"

    assert await (await engine.start("registers")).result(timeout=10) == field


async def test_an_update_survives_continue_as_new_if_not_yet_handled(engine: Engine) -> None:
    @engine.workflow()
    async def generations(ctx, n):
        if n < 2:
            await ctx.sleep(0)
            ctx.continue_as_new(n + 1)
        ctx.on_update("which", lambda _p: n)
        return await ctx.wait_for_signal("stop")

    handle = await engine.start("generations", 0)
    assert await handle.update("which", timeout=10) == 2
    await handle.signal("stop", "ok")
    assert await handle.result(timeout=10) == "ok"


# -- patches -----------------------------------------------------------------------------------


async def test_a_patch_keeps_runs_past_the_change_on_the_old_code(
    make_engine: Any, engine_url: str, clock: ManualClock
) -> None:
    async def step(name: str) -> str:
        return name

    def register(engine: Engine, patched: bool) -> None:
        @engine.workflow(name="evolving")
        async def evolving(ctx, _input):
            done = [await ctx.step(step, "a", name="a")]
            if patched and ctx.patched("extra"):
                done.append(await ctx.step(step, "extra", name="extra"))
            await ctx.wait_for_signal("go")
            done.append(await ctx.step(step, "b", name="b"))
            return done

    old = await make_engine()
    register(old, patched=False)
    parked = await old.start("evolving", id="old-run")
    await old.idle()
    await old.close()
    if "persistent" not in getattr(old.store, "capabilities", ()):
        pytest.skip("the change is deployed by restarting on the same store")
    new = await make_engine()
    register(new, patched=True)
    fresh = await new.start("evolving", id="new-run")
    await new.idle()
    await new.signal("old-run", "go")
    await new.signal("new-run", "go")
    assert await new.handle(parked.id).result(timeout=10) == ["a", "b"]
    assert await fresh.result(timeout=10) == ["a", "extra", "b"]


# -- over HTTP ---------------------------------------------------------------------------------


async def test_values_and_updates_over_http(engine: Engine) -> None:
    import httpx

    from parkway.http import create_app
    from parkway.http import responses as s

    engine.workflow(name="counter")(counter)

    @engine.workflow()
    async def linked(ctx, _input):
        ctx.set_value("link", "https://pay.example/9")
        await ctx.wait_for_signal("never")

    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as client:
        counted = await engine.start("counter", id="c")
        reply = await client.post("/runs/c/updates/add", json={"payload": 4})
        assert (reply.status_code, s.UpdateOut.model_validate(reply.json()).result) == (200, 4)
        refused = await client.post("/runs/c/updates/add", json={"payload": -1})
        assert refused.status_code == 409 and refused.json()["error"] == "UpdateRejectedError"
        missing = await client.post("/runs/nope/updates/add", json={})
        assert missing.status_code == 404
        bad = await client.post("/runs/c/updates/add", json={"payload": 1, "timeout": -1})
        assert bad.status_code == 422
        await engine.start("linked", id="l")
        value = await client.get("/runs/l/values/link", params={"timeout": 5})
        assert s.ValueOut.model_validate(value.json()).value == "https://pay.example/9"
        assert (await client.get("/runs/l/values")).json() == {"link": "https://pay.example/9"}
        assert (await client.get("/runs/l")).json()["values"] == {"link": "https://pay.example/9"}
        unset = await client.get("/runs/l/values/other")
        assert unset.json() == {"key": "other", "value": None}
        assert counted.id == "c"


# -- cancel_on ---------------------------------------------------------------------------------


async def test_a_matching_event_cancels_the_run_and_another_does_not(engine: Engine) -> None:
    from parkway import CancelOn, RunCancelledError

    @engine.workflow(
        cancel_on=[CancelOn("order.cancelled", match=lambda order: {"order": order["id"]})]
    )
    async def fulfil(ctx, order):
        return await ctx.wait_for_signal("shipped")

    one = await engine.start("fulfil", {"id": 1})
    two = await engine.start("fulfil", {"id": 2})
    await engine.idle()
    subs = await engine.subscriptions(run_id=one.id)
    assert {s.kind for s in subs} == {"cancel"}
    await engine.publish("order.cancelled", {"order": 1})
    with pytest.raises(RunCancelledError):
        await one.result(timeout=10)
    assert (await two.info()).status == RunStatus.PARKED
    await two.signal("shipped", "ok")
    assert await two.result(timeout=10) == "ok"
    assert await engine.subscriptions() == []


async def test_cancel_on_refuses_bad_conditions(engine: Engine) -> None:
    from parkway import CancelOn, InvalidWorkflowError

    with pytest.raises(InvalidWorkflowError, match="cancel_on"):
        engine.workflow(cancel_on=["order.cancelled"])(counter)  # type: ignore[list-item]
    with pytest.raises(InvalidWorkflowError, match="event must be a name"):
        engine.workflow(cancel_on=[CancelOn("")])(counter)
    with pytest.raises(ParkwayError, match="match"):
        engine.workflow(cancel_on=[CancelOn("x", match=[1])])(counter)  # type: ignore[arg-type]


@pytest.mark.requires("shared")
async def test_a_client_engine_updates_and_reads_a_run_another_engine_advances(
    make_engine: Any,
) -> None:
    worker = await make_engine()
    worker.workflow(name="counter")(counter)

    @worker.workflow()
    async def linked(ctx, _input):
        ctx.set_value("link", "https://pay.example/7")
        await ctx.wait_for_signal("never")

    client = await make_engine(worker=False)  # registers nothing: it starts by name
    handle = await client.start("counter", id="c")
    assert await handle.update("add", 6, timeout=10) == 6
    with pytest.raises(UpdateRejectedError):
        await handle.update("add", 0, timeout=10)
    linked_run = await client.start("linked", id="l")
    assert await linked_run.value("link", timeout=10) == "https://pay.example/7"
    assert await handle.update("add", 4, timeout=10) == 10
    assert await handle.result(timeout=10) == 10
