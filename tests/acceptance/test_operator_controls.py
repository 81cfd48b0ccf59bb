"""Operator controls on every backend: pause and resume (inputs kept), retry of a
failed run, bulk cancel and retry, and the retention of finished runs."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from parkway import (
    Engine,
    InvalidDurationError,
    InvalidInputError,
    ResultTimeoutError,
    RunNotFoundError,
    RunStateError,
    RunStatus,
)
from parkway.core import controls, housekeeping
from parkway.store.base import JournalEntry


async def _inputs_workflow(ctx: Any, input: Any) -> Any:
    """Waits on every kind of input in turn: a signal, an event, a message, a timer,
    an update."""
    got: dict[str, Any] = {}

    def note(value: Any) -> Any:
        got["update"] = value
        return "noted"

    ctx.on_update("note", note)
    got["signal"] = await ctx.wait_for_signal("go")
    got["event"] = await ctx.wait_for_event("order.paid", match={"order": input["order"]})
    got["message"] = await ctx.wait_for_message("confirm", input["order"])
    await ctx.sleep("1h")
    got["slept"] = True
    await ctx.wait_until(lambda: "update" in got)
    return got


async def test_a_paused_run_keeps_every_input_and_acts_on_them_after_resume(
    engine: Engine, clock: Any
) -> None:
    engine.workflow(name="inputs")(_inputs_workflow)
    handle = await engine.start("inputs", {"order": "o1"})
    await engine.idle()
    info = await handle.pause()
    assert (info.status, info.paused) == (RunStatus.PARKED, True)
    assert (await engine.get_run(handle.id)).paused is True
    await engine.signal(handle.id, "go", 1)
    await engine.idle()  # (returns: a paused run's inputs are not due work)
    assert (await engine.history(handle.id))[-1].status == "pending"  # still at the signal
    # It goes on once resumed, and stops again when paused at the next wait.
    await handle.resume()
    await engine.idle()
    await handle.pause()
    published = await engine.publish("order.paid", {"order": "o1"})
    assert published.resumed == [handle.id]  # delivered: kept as a task for it
    await engine.correlate("confirm", "o1", {"ok": True})
    await engine.idle()
    assert [e.kind for e in await engine.history(handle.id)] == ["signal", "event"]
    await handle.resume()
    await engine.idle()
    kinds = [e.kind for e in await engine.history(handle.id)]
    assert kinds == ["signal", "event", "message", "sleep"]
    await handle.pause()
    await clock.advance("2h")  # the timer fires while paused: kept
    assert [e.status for e in await engine.history(handle.id)][-1] == "pending"
    update = asyncio.ensure_future(engine.update(handle.id, "note", "x", timeout=10))
    await asyncio.sleep(0.05)
    assert not update.done()
    await handle.resume()
    assert await update == "noted"
    result = await handle.result(timeout=10)
    assert result == {
        "signal": 1,
        "event": {"order": "o1"},
        "message": {"ok": True},
        "slept": True,
        "update": "x",
    }
    assert (await handle.info()).paused is False


@pytest.mark.requires("shared")
async def test_a_pending_run_paused_before_its_first_step_does_not_start(
    make_engine: Any,
) -> None:
    client = await make_engine(worker=False)
    ran: list[int] = []

    async def once(ctx: Any, input: Any) -> int:
        await ctx.step(lambda: ran.append(1))
        return 1

    worker = await make_engine(open=False)  # (opened once the run is paused)
    worker.workflow(name="once")(once)
    client.workflow(name="once")(once)
    handle = await client.start("once")
    await client.pause(handle.id)
    await worker.open()
    await worker.idle()
    assert ran == [] and (await handle.info()).status is RunStatus.PENDING
    await client.resume(handle.id)
    assert await worker.result(handle.id, timeout=10) == 1
    assert ran == [1]


async def test_pause_resume_and_retry_refuse_what_the_state_does_not_allow(
    engine: Engine,
) -> None:
    @engine.workflow()
    async def quick(ctx: Any, input: Any) -> str:
        return "done"

    handle = await engine.start("quick")
    await handle.result(timeout=10)
    for action in (engine.pause, engine.resume, engine.retry):
        with pytest.raises(RunStateError) as caught:
            await action(handle.id)
        assert caught.value.status == "completed" and caught.value.run_id == handle.id
    for action in (engine.pause, engine.resume, engine.retry, engine.cancel):
        with pytest.raises(RunNotFoundError):
            await action("no-such-run")


async def test_pause_and_resume_are_idempotent(engine: Engine) -> None:
    @engine.workflow()
    async def waits(ctx: Any, input: Any) -> Any:
        return await ctx.wait_for_signal("go")

    handle = await engine.start("waits")
    await engine.idle()
    assert (await engine.resume(handle.id)).paused is False  # not paused: nothing changes
    await engine.pause(handle.id)
    assert (await engine.pause(handle.id)).paused is True
    await engine.resume(handle.id)
    await handle.signal("go", 7)
    assert await handle.result(timeout=10) == 7


async def test_a_cancelled_paused_run_is_cancelled_and_not_paused(engine: Engine) -> None:
    @engine.workflow()
    async def waits(ctx: Any, input: Any) -> Any:
        return await ctx.wait_for_signal("go")

    handle = await engine.start("waits")
    await engine.idle()
    await handle.pause()
    await handle.cancel()
    info = await handle.info()
    assert (info.status, info.paused) == (RunStatus.CANCELLED, False)


def _flaky(failures: dict[str, int]) -> Any:
    async def flaky(ctx: Any, input: Any) -> Any:
        def first() -> int:
            failures["first"] += 1
            return 1

        one = await ctx.step(first, name="first")

        def second() -> int:
            if failures["left"] > 0:
                failures["left"] -= 1
                raise ValueError("the service is down")
            return 2

        return [one, await ctx.step(second, name="second")]

    return flaky


async def test_retry_runs_the_failed_step_again_and_replays_the_rest(engine: Engine) -> None:
    failures = {"first": 0, "left": 1}
    engine.workflow(name="flaky")(_flaky(failures))
    handle = await engine.start("flaky")
    await engine.idle()
    info = await handle.info()
    assert info.status is RunStatus.FAILED and "service is down" in str(info.error)
    with pytest.raises(RunStateError):
        await engine.pause(handle.id)
    retried = await handle.retry()
    assert retried.status is RunStatus.RUNNING and retried.error is None
    assert await handle.result(timeout=10) == [1, 2]
    assert failures["first"] == 1  # the committed step was not run again
    history = await engine.history(handle.id)
    assert [(e.name, e.status) for e in history] == [("first", "done"), ("second", "done")]
    with pytest.raises(RunStateError, match="only a failed run"):
        await handle.retry()


@pytest.mark.replays
async def test_retry_after_a_fix_of_the_workflow_code(engine: Engine) -> None:
    broken = {"yes": True}

    @engine.workflow()
    async def buggy(ctx: Any, input: Any) -> Any:
        value = await ctx.step(lambda: 41)
        if broken["yes"]:
            raise KeyError("oops")
        return value + 1

    handle = await engine.start("buggy")
    await engine.idle()
    assert (await handle.info()).status is RunStatus.FAILED
    broken["yes"] = False  # the fix is deployed
    await engine.retry(handle.id)
    assert await handle.result(timeout=10) == 42


async def test_bulk_cancel_and_retry_by_filters(engine: Engine, clock: Any, t0: Any) -> None:
    @engine.workflow()
    async def waits(ctx: Any, input: Any) -> Any:
        return await ctx.wait_for_signal("go")

    @engine.workflow()
    async def fails(ctx: Any, input: Any) -> Any:
        if input.get("fail", True):
            raise ValueError("no")
        return "ok"

    early = [await engine.start("waits", subject="s1") for _ in range(3)]
    await engine.idle()
    await clock.advance("1h")
    late = [await engine.start("waits", subject="s2") for _ in range(2)]
    failed = [await engine.start("fails", {"fail": True}) for _ in range(3)]
    await engine.idle()
    before = t0 + timedelta(minutes=30)
    assert await engine.cancel_runs(workflow="waits", created_before=before) == 3
    for h in early:
        assert (await h.info()).status is RunStatus.CANCELLED
    for h in late:
        assert (await h.info()).status is RunStatus.PARKED
    assert await engine.cancel_runs(workflow="waits", subject="s2", status="pending") == 0
    assert await engine.cancel_runs(subject="s2", status="parked") == 2
    assert await engine.cancel_runs(workflow="waits") == 0  # all ended: none to cancel
    assert await engine.retry_runs(workflow="waits") == 0
    assert await engine.retry_runs(workflow="fails", created_before=before.isoformat()) == 0
    assert await engine.retry_runs(workflow="fails", status="failed") == 3
    await engine.idle()
    for h in failed:
        assert (await h.info()).status is RunStatus.FAILED  # (still failing: retried once)
        assert [e.kind for e in await engine.history(h.id)] == []


async def test_bulk_operations_check_their_filters(engine: Engine) -> None:
    with pytest.raises(InvalidInputError) as caught:
        await engine.cancel_runs(status="sleeping")
    assert "status" in str(caught.value)
    with pytest.raises(InvalidInputError) as caught:
        await engine.retry_runs(status="parked")
    assert caught.value.field == "status"
    with pytest.raises(InvalidInputError) as caught:
        await engine.cancel_runs(created_before="last tuesday")
    assert caught.value.field == "created_before"
    with pytest.raises(InvalidInputError):
        await engine.cancel_runs(workflow="")


async def test_bulk_operations_go_in_batches(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(controls, "BULK_BATCH", 2)

    @engine.workflow()
    async def waits(ctx: Any, input: Any) -> Any:
        return await ctx.wait_for_signal("go")

    handles = [await engine.start("waits") for _ in range(5)]
    await engine.idle()
    assert await engine.cancel_runs(workflow="waits") == 5
    for h in handles:
        assert (await h.info()).status is RunStatus.CANCELLED


async def test_finished_runs_are_deleted_after_their_retention(
    make_engine: Any, clock: Any
) -> None:
    engine = await make_engine(retention="7d")

    @engine.workflow()
    async def quick(ctx: Any, input: Any) -> str:
        await ctx.step(lambda: None)
        ctx.set_value("k", 1)
        return "done"

    @engine.workflow(retention="30d")
    async def audited(ctx: Any, input: Any) -> str:
        return "kept longer"

    @engine.workflow(retention=None)
    async def forever(ctx: Any, input: Any) -> str:
        return "kept"

    @engine.workflow()
    async def waits(ctx: Any, input: Any) -> Any:
        return await ctx.wait_for_signal("go")

    done = await engine.start("quick")
    audit = await engine.start("audited")
    kept = await engine.start("forever")
    active = await engine.start("waits")
    await engine.idle()
    await clock.advance("6d")
    await engine.idle()
    assert (await done.info()).status is RunStatus.COMPLETED
    await clock.advance("2d")
    await engine.idle()
    with pytest.raises(RunNotFoundError):
        await done.info()
    with pytest.raises(RunNotFoundError):
        await engine.history(done.id)
    assert (await audit.info()).status is RunStatus.COMPLETED
    assert (await active.info()).status is RunStatus.PARKED  # active runs are never deleted
    await clock.advance("30d")
    await engine.idle()
    with pytest.raises(RunNotFoundError):
        await audit.info()
    assert (await kept.info()).output == "kept"
    assert (await active.info()).status is RunStatus.PARKED
    assert [r.id for r in await engine.list_runs(workflow="quick")] == []


async def test_retention_is_checked_and_none_keeps_every_run(make_engine: Any, clock: Any) -> None:
    with pytest.raises(InvalidDurationError):
        await make_engine(retention="soon", open=False)
    with pytest.raises(InvalidInputError):
        await make_engine(retention=0, open=False)
    engine = await make_engine(retention=None)
    assert engine.retention is None
    with pytest.raises(InvalidDurationError, match="retention"):

        @engine.workflow(retention=-5)
        async def bad(ctx: Any, input: Any) -> None: ...

    @engine.workflow()
    async def quick(ctx: Any, input: Any) -> str:
        return "done"

    handle = await engine.start("quick")
    await engine.idle()
    await clock.advance("400d")
    await engine.idle()
    assert (await handle.info()).status is RunStatus.COMPLETED


async def test_the_retention_sweep_deletes_in_bounded_batches(
    make_engine: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(housekeeping, "RETENTION_BATCH", 2)
    monkeypatch.setattr(housekeeping, "RETENTION_BATCHES", 2)
    engine = await make_engine(retention="1d")

    @engine.workflow()
    async def quick(ctx: Any, input: Any) -> str:
        return "done"

    for _ in range(6):
        await engine.start("quick")
    await engine.idle()
    await clock.advance("2d")
    await engine.idle()
    # One sweep deleted two batches of two; the next one (a sweep interval later)
    # deletes the rest.
    assert len(await engine.list_runs(workflow="quick")) == 2
    await clock.advance(housekeeping.SWEEP_INTERVAL)
    await engine.idle()
    assert await engine.list_runs(workflow="quick") == []


async def test_pausing_a_run_mid_step_stops_it_at_its_last_commit(engine: Engine) -> None:
    gate = asyncio.Event()
    calls: list[int] = []

    @engine.workflow()
    async def slow(ctx: Any, input: Any) -> str:
        await ctx.step(lambda: "a", name="a")

        async def b() -> str:
            calls.append(1)
            await gate.wait()
            return "b"

        await ctx.step(b, name="b")
        await ctx.step(lambda: "c", name="c")
        return "done"

    handle = await engine.start("slow")
    for _ in range(500):
        if calls:
            break
        await asyncio.sleep(0.01)
    await handle.pause()
    gate.set()  # the step ends, but its advance may not commit it: the run is paused
    await engine.idle()
    assert [e.name for e in await engine.history(handle.id)] == ["a"]
    assert (await handle.info()).paused is True
    await handle.resume()
    assert await handle.result(timeout=10) == "done"
    assert len(calls) == 2  # (the step in flight at the pause ran again, as after a crash)
    assert [e.name for e in await engine.history(handle.id)] == ["a", "b", "c"]


async def test_retry_of_a_failed_gather_waits_again_for_what_the_failure_withdrew(
    engine: Engine,
) -> None:
    state = {"fail": True}

    @engine.workflow()
    async def fan_out(ctx: Any, input: Any) -> Any:
        def call() -> str:
            if state["fail"]:
                raise ValueError("down")
            return "ok"

        async def both() -> Any:
            return await ctx.gather(ctx.wait_for_signal("t"), ctx.wait_for_signal("u"))

        return await ctx.gather(ctx.step(call, name="call"), ctx.wait_for_signal("s"), both())

    handle = await engine.start("fan_out")
    await engine.idle()
    assert (await handle.info()).status is RunStatus.FAILED
    state["fail"] = False
    await handle.retry()
    await engine.idle()
    assert (await handle.info()).status is RunStatus.PARKED
    for name, value in (("s", 1), ("t", 2), ("u", 3)):
        await handle.signal(name, value)
    assert await handle.result(timeout=10) == ["ok", 1, [2, 3]]


def test_the_retried_journal_keeps_a_caught_failure_and_a_first_s_losers() -> None:
    def entry(pos: int, kind: str, state: str, branch: str | None) -> JournalEntry:
        return JournalEntry(pos, kind, f"e{pos}", state, b"null", None, 0.0, branch)

    journal = [
        entry(0, "step", "error", None),  # caught: the workflow went on after it
        entry(1, "first", "done", None),
        entry(2, "signal", "withdrawn", "0.1"),  # first's loser: stays withdrawn
        entry(3, "step", "done", None),
        entry(4, "gather", "done", None),
        entry(5, "signal", "withdrawn", "2.1"),  # withdrawn by the failure below
        entry(6, "step", "error", "2.0"),
    ]
    assert [e.pos for e in controls.retried_journal(journal)] == [0, 1, 2, 3, 4]
    assert [e.pos for e in controls.retried_journal(journal[:4])] == [0, 1, 2, 3]
    failed_last = [*journal[1:3], entry(3, "step", "error", None)]  # the line's last: goes
    assert [e.pos for e in controls.retried_journal(failed_last)] == [1, 2]


async def test_a_run_id_used_again_after_retention_answers_with_the_new_run(
    make_engine: Any, clock: Any
) -> None:
    engine = await make_engine(retention="1d")

    @engine.workflow()
    async def echo(ctx: Any, input: Any) -> Any:
        if input == "wait":
            await ctx.wait_for_signal("go")
        return input

    first = await engine.start("echo", "old output", id="reused")
    assert await first.result(timeout=10) == "old output"  # (its row kept by this process)
    await clock.advance("2d")
    await engine.idle()
    with pytest.raises(RunNotFoundError):
        await engine.get_run("reused")

    second = await engine.start("echo", "wait", id="reused")
    # The deleted run's output is not the new run's: it has not ended.
    with pytest.raises(ResultTimeoutError):
        await second.result(timeout=0.3)
    with pytest.raises(ResultTimeoutError):
        await engine.handle("reused").result(timeout=0.3)
    await engine.signal("reused", "go")
    assert await second.result(timeout=10) == "wait"
