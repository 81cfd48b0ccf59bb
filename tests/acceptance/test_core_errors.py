"""Bad input, unknown ids, non-determinism and cancellation.

Every rejected client call must leave nothing behind: no run, no changed run.
"""

from __future__ import annotations

import os

import pytest

from parkway import (
    DuplicateWorkflowError,
    Engine,
    InvalidDurationError,
    InvalidInputError,
    NonDeterminismError,
    ParkwayError,
    RunCancelledError,
    RunClosedError,
    RunNotFoundError,
    RunStatus,
    StepFailedError,
    UnknownWorkflowError,
    WorkflowFailedError,
)

# -- bad input at the edge ---------------------------------------------------------------------


async def test_start_of_an_unknown_workflow_is_refused(engine: Engine) -> None:
    @engine.workflow()
    async def known(ctx, input):
        return None

    with pytest.raises(UnknownWorkflowError) as exc_info:
        await engine.start("no-such-flow", {"a": 1}, id="x")
    assert isinstance(exc_info.value, ParkwayError)
    assert "no-such-flow" in str(exc_info.value)
    assert await engine.list_runs() == []
    with pytest.raises(RunNotFoundError):
        await engine.get_run("x")


async def test_signal_with_start_of_an_unknown_workflow_is_refused(engine: Engine) -> None:
    with pytest.raises(UnknownWorkflowError, match="ghost"):
        await engine.signal_with_start("ghost", "g1", "hello", 1)
    assert await engine.list_runs() == []


async def test_non_json_input_is_refused_naming_the_path(engine: Engine) -> None:
    @engine.workflow()
    async def booking(ctx, input):
        return input

    with pytest.raises(InvalidInputError) as exc_info:
        await engine.start("booking", {"room": 4, "when": {"2030-01-01"}}, id="b1")
    assert isinstance(exc_info.value, ParkwayError)
    assert "$.when" in str(exc_info.value)
    assert "booking" in str(exc_info.value)

    with pytest.raises(InvalidInputError, match=r"\$\.guests\[1\]"):
        await engine.start("booking", {"guests": ["ann", object()]})
    with pytest.raises(InvalidInputError, match=r"\$\.price"):
        await engine.start("booking", {"price": float("nan")})
    with pytest.raises(InvalidInputError):
        await engine.start("booking", {1: "non-string key"})
    with pytest.raises(InvalidInputError, match=r"\$\.when"):
        await engine.signal_with_start("booking", "b2", "go", input={"when": {1}})
    assert await engine.list_runs() == []


async def test_bad_run_ids_are_refused(engine: Engine) -> None:
    @engine.workflow()
    async def wf(ctx, input):
        return None

    for bad in ("", 42):
        with pytest.raises(ParkwayError):
            await engine.start("wf", id=bad)
        with pytest.raises(ParkwayError):
            await engine.signal_with_start("wf", bad, "go")
    assert await engine.list_runs() == []


async def test_non_json_step_result_fails_the_step_naming_it(engine: Engine) -> None:
    @engine.workflow()
    async def catches(ctx, input):
        try:
            await ctx.step(lambda: {"tags": {"a", "b"}}, name="make_tags")
        except StepFailedError as exc:
            return {"step": exc.step, "message": exc.error_message}
        return "not reached"

    @engine.workflow()
    async def uncaught(ctx, input):
        return await ctx.step(lambda: {1, 2}, name="make_set")

    h = await engine.start("catches")
    result = await h.result(timeout=5)
    assert result["step"] == "make_tags"
    assert "$.tags" in result["message"]

    h2 = await engine.start("uncaught")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h2.result(timeout=5)
    assert exc_info.value.type == "StepFailedError"
    assert "make_set" in exc_info.value.error_message
    info = await h2.info()
    assert info.status is RunStatus.FAILED
    assert info.error.type == "StepFailedError"
    assert "make_set" in info.error.message


async def test_non_json_workflow_output_fails_the_run(engine: Engine) -> None:
    @engine.workflow()
    async def bad_output(ctx, input):
        return {"when": {1, 2}}

    h = await engine.start("bad_output")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert "$.when" in exc_info.value.error_message
    assert (await h.info()).output is None


async def test_duplicate_workflow_registration_is_refused(engine: Engine) -> None:
    @engine.workflow("dup")
    async def first(ctx, input):
        return "first"

    with pytest.raises(DuplicateWorkflowError) as exc_info:

        @engine.workflow("dup")
        async def second(ctx, input):
            return "second"

    assert isinstance(exc_info.value, ParkwayError)
    assert "dup" in str(exc_info.value)
    # The first registration is untouched and still the one that runs.
    assert await (await engine.start("dup")).result(timeout=5) == "first"

    with pytest.raises(DuplicateWorkflowError):

        @engine.workflow("dup", version="2")
        async def v2(ctx, input):
            return "v2"

        @engine.workflow("dup", version="2")
        async def v2_again(ctx, input):
            return "v2 again"

    assert await (await engine.start("dup")).result(timeout=5) == "v2"


async def test_bad_duration_in_ctx_sleep(engine: Engine) -> None:
    @engine.workflow()
    async def far_away(ctx, input):
        await ctx.sleep("5 parsecs")
        return "not reached"

    @engine.workflow()
    async def catches(ctx, input):
        try:
            await ctx.sleep("5 parsecs")
        except InvalidDurationError as exc:
            return {"parkway": isinstance(exc, ParkwayError), "message": str(exc)}
        return "not reached"

    h = await engine.start("far_away")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert exc_info.value.type == "InvalidDurationError"
    assert "5 parsecs" in exc_info.value.error_message

    result = await engine.start("catches")
    caught = await result.result(timeout=5)
    assert caught["parkway"] is True
    assert "5 parsecs" in caught["message"]


@pytest.mark.parametrize("option", ["message_ttl", "event_retention"])
async def test_bad_duration_in_engine_options(engine_url: str, tmp_path, option) -> None:
    with pytest.raises(InvalidDurationError) as exc_info:
        Engine(engine_url, **{option: "5 parsecs"})
    assert isinstance(exc_info.value, ParkwayError)
    assert option in str(exc_info.value)
    assert "5 parsecs" in str(exc_info.value)
    assert os.listdir(tmp_path) == []  # no store was created


async def test_unknown_run_id_raises_run_not_found_everywhere(engine: Engine) -> None:
    @engine.workflow()
    async def wf(ctx, input):
        return None

    for call in (
        lambda: engine.get_run("missing"),
        lambda: engine.history("missing"),
        lambda: engine.signal("missing", "go", 1),
        lambda: engine.cancel("missing"),
        lambda: engine.handle("missing").result(timeout=1),
        lambda: engine.handle("missing").info(),
        lambda: engine.handle("missing").signal("go"),
        lambda: engine.handle("missing").cancel(),
    ):
        with pytest.raises(RunNotFoundError) as exc_info:
            await call()
        assert isinstance(exc_info.value, ParkwayError)
        assert "missing" in str(exc_info.value)
    assert await engine.list_runs() == []


async def test_empty_signal_name_is_refused_and_changes_nothing(engine: Engine) -> None:
    @engine.workflow()
    async def waiter(ctx, input):
        return await ctx.wait_for_signal("go")

    h = await engine.start("waiter", id="w")
    await engine.idle()
    before = await h.info()
    history_before = await engine.history("w")

    with pytest.raises(ParkwayError):
        await engine.signal("w", "", 1)
    with pytest.raises(ParkwayError):
        await h.signal("", 1)
    with pytest.raises(ParkwayError):
        await engine.signal_with_start("waiter", "w2", "", 1)
    await engine.idle()

    assert await h.info() == before
    assert await engine.history("w") == history_before
    assert [r.id for r in await engine.list_runs()] == ["w"]
    await h.signal("go", "real")
    assert await h.result(timeout=5) == "real"


async def test_non_json_signal_payload_is_refused_and_changes_nothing(engine: Engine) -> None:
    @engine.workflow()
    async def waiter(ctx, input):
        return await ctx.wait_for_signal("go")

    h = await engine.start("waiter")
    await engine.idle()
    before = await h.info()
    with pytest.raises(ParkwayError, match=r"\$\.when"):
        await h.signal("go", {"when": {1}})
    with pytest.raises(ParkwayError):
        await engine.signal_with_start("waiter", "w2", "go", {1, 2})
    await engine.idle()
    assert await h.info() == before
    assert len(await engine.list_runs()) == 1
    await h.signal("go", "ok")
    assert await h.result(timeout=5) == "ok"


async def test_empty_signal_name_in_a_workflow_fails_the_run(engine: Engine) -> None:
    @engine.workflow()
    async def bad_wait(ctx, input):
        return await ctx.wait_for_signal("")

    h = await engine.start("bad_wait")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert "signal name" in exc_info.value.error_message


# -- non-determinism -----------------------------------------------------------------------------


@pytest.mark.replays
async def test_changed_step_order_after_park_holds_the_run(engine: Engine) -> None:
    calls: list[str] = []
    order = ["a", "b"]

    @engine.workflow()
    async def shifty(ctx, input):
        for name in order:
            await ctx.step(lambda n=name: calls.append(n), name=name)
        await ctx.wait_for_signal("go")
        return "completed"

    h = await engine.start("shifty", id="nd")
    await engine.idle()
    assert calls == ["a", "b"]
    assert (await h.info()).status is RunStatus.PARKED

    order.reverse()  # "deploy" code that does the steps in another order
    await h.signal("go")
    await engine.idle()

    with pytest.raises(NonDeterminismError) as exc_info:
        await h.result(timeout=5)
    exc = exc_info.value
    assert isinstance(exc, ParkwayError)
    assert exc.position == 0
    assert "position 0" in str(exc)
    assert "nd" in str(exc)
    assert "'a'" in str(exc) and "'b'" in str(exc)

    info = await h.info()
    assert info.status not in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
    assert info.output is None
    # Nothing new ran and the journal is unchanged.
    assert calls == ["a", "b"]
    assert [(e.name, e.status) for e in await engine.history("nd")][:2] == [
        ("a", "done"),
        ("b", "done"),
    ]


@pytest.mark.replays
async def test_changed_operation_later_in_the_journal_reports_its_position(
    engine: Engine, clock
) -> None:
    use_sleep = [True]

    @engine.workflow()
    async def drifting(ctx, input):
        await ctx.step(lambda: 1, name="one")
        await ctx.wait_for_signal("go")
        if use_sleep[0]:
            await ctx.sleep("1h")
        else:
            await ctx.step(lambda: 2, name="two")
        return "completed"

    h = await engine.start("drifting")
    await engine.idle()
    await h.signal("go")
    await engine.idle()
    assert (await h.info()).status is RunStatus.PARKED  # on the sleep at position 2

    use_sleep[0] = False
    await clock.advance("1h")
    with pytest.raises(NonDeterminismError) as exc_info:
        await h.result(timeout=5)
    assert exc_info.value.position == 2
    assert (await h.info()).status is not RunStatus.COMPLETED


@pytest.mark.replays
async def test_held_run_resumes_once_the_code_replays_again(engine: Engine) -> None:
    order = ["a", "b"]

    @engine.workflow()
    async def shifty(ctx, input):
        for name in order:
            await ctx.step(lambda n=name: n, name=name)
        first = await ctx.wait_for_signal("go")
        second = await ctx.wait_for_signal("go")
        return [first, second]

    h = await engine.start("shifty")
    await engine.idle()
    order.reverse()
    await h.signal("go", 1)
    await engine.idle()
    with pytest.raises(NonDeterminismError):
        await h.result(timeout=5)

    await h.signal("go", 2)  # kept while it is held
    await engine.idle()
    assert (await h.info()).status is RunStatus.HELD
    order.reverse()  # the fix is deployed; a retry replays the run again
    await h.retry()
    # Held, not corrupted: the signal sent while held was kept.
    assert await h.result(timeout=5) == [1, 2]
    info = await h.info()
    assert info.status is RunStatus.COMPLETED
    assert info.error is None


@pytest.mark.requires("persistent")
async def test_non_determinism_after_a_restart_with_new_code(make_engine, engine_url: str) -> None:
    first = await make_engine(url=engine_url)

    @first.workflow("order")
    async def order_v1(ctx, input):
        await ctx.step(lambda: "reserved", name="reserve")
        await ctx.wait_for_signal("paid")
        await ctx.step(lambda: "shipped", name="ship")
        return "v1 done"

    h = await first.start("order", id="o1")
    await first.idle()
    await first.close()

    second = await make_engine(url=engine_url)

    @second.workflow("order")  # same name and version, different code
    async def order_changed(ctx, input):
        await ctx.step(lambda: "charged", name="charge")
        await ctx.wait_for_signal("paid")
        return "changed"

    await second.signal("o1", "paid")
    with pytest.raises(NonDeterminismError) as exc_info:
        await second.handle(h.id).result(timeout=5)
    assert exc_info.value.position == 0
    assert "reserve" in str(exc_info.value) and "charge" in str(exc_info.value)
    assert (await second.get_run("o1")).status is not RunStatus.COMPLETED


# -- cancellation --------------------------------------------------------------------------------


async def test_cancel_a_parked_run(engine: Engine, clock) -> None:
    @engine.workflow()
    async def sleepy(ctx, input):
        await ctx.sleep("1h")
        return "woke"

    h = await engine.start("sleepy")
    await engine.idle()
    await engine.cancel(h.id)
    with pytest.raises(RunCancelledError) as exc_info:
        await h.result(timeout=5)
    assert isinstance(exc_info.value, ParkwayError)
    assert h.id in str(exc_info.value)
    assert (await h.info()).status is RunStatus.CANCELLED

    # Its timer no longer wakes it, and it takes no more signals.
    await clock.advance("2h")
    assert (await h.info()).status is RunStatus.CANCELLED
    with pytest.raises(RunClosedError):
        await h.signal("anything")


async def test_cancel_a_finished_run_changes_nothing(engine: Engine) -> None:
    @engine.workflow()
    async def quick(ctx, input):
        return 5

    h = await engine.start("quick")
    assert await h.result(timeout=5) == 5
    before = await h.info()
    await h.cancel()
    await engine.idle()
    assert await h.info() == before
    assert await h.result(timeout=5) == 5


@pytest.mark.requires("shared")
async def test_cancel_a_pending_run(make_engine, engine_url: str) -> None:
    client = await make_engine(url=engine_url, worker=False)

    @client.workflow()
    async def never(ctx, input):
        return "ran"

    h = await client.start("never")
    await client.cancel(h.id)
    assert (await client.get_run(h.id)).status is RunStatus.CANCELLED

    worker = await make_engine(url=engine_url)
    worker.workflow("never")(never)
    await worker.idle()
    with pytest.raises(RunCancelledError):
        await worker.handle(h.id).result(timeout=5)
