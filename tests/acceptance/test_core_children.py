"""Child runs: start_child / child, results, failures, cancellation."""

from __future__ import annotations

from collections import Counter

import pytest

from parkway import (
    ChildHandle,
    Engine,
    RunCancelledError,
    RunStatus,
    UnknownWorkflowError,
    WorkflowFailedError,
)


async def test_child_returns_its_result_to_the_parent(engine: Engine) -> None:
    @engine.workflow()
    async def square(ctx, input):
        return input * input

    @engine.workflow()
    async def parent(ctx, input):
        a = await ctx.child("square", 3)
        b = await ctx.child(square, 4)
        return [a, b]

    h = await engine.start("parent", id="par", subject="s:1", domain="d")
    assert await h.result(timeout=5) == [9, 16]
    children = await engine.list_runs(workflow="square")
    assert len(children) == 2
    for child in children:
        assert child.parent_id == "par"
        assert child.status is RunStatus.COMPLETED
        assert (child.domain, child.subject) == ("d", "s:1")
    assert sorted(c.output for c in children) == [9, 16]


async def test_start_child_with_id_runs_children_concurrently(engine: Engine) -> None:
    @engine.workflow()
    async def worker(ctx, input):
        return await ctx.wait_for_signal("go") + input

    @engine.workflow()
    async def fan_out(ctx, input):
        handles = [await ctx.start_child("worker", i, id=f"w{i}") for i in range(3)]
        assert all(isinstance(h, ChildHandle) for h in handles)
        return [await h.result() for h in handles]

    h = await engine.start("fan_out")
    await engine.idle()
    # All three children exist and wait at once.
    for i in range(3):
        info = await engine.get_run(f"w{i}")
        assert info.status is RunStatus.PARKED
        assert info.parent_id == h.id
    assert (await h.info()).status is RunStatus.PARKED
    for i in (2, 0, 1):
        await engine.signal(f"w{i}", "go", 10)
    assert await h.result(timeout=5) == [10, 11, 12]


async def test_children_are_started_once_across_parent_replays(engine: Engine) -> None:
    calls = Counter()

    @engine.workflow()
    async def child_wf(ctx, input):
        await ctx.step(lambda: calls.update(["child"]), name="count")
        return await ctx.wait_for_signal("go")

    @engine.workflow()
    async def parent(ctx, input):
        handle = await ctx.start_child("child_wf", id="only-child")
        own = await ctx.wait_for_signal("parent-go")
        return [own, await handle.result()]

    h = await engine.start("parent")
    await engine.idle()
    await h.signal("parent-go", "p")
    await engine.idle()
    await engine.signal("only-child", "go", "c")
    assert await h.result(timeout=5) == ["p", "c"]
    assert [r.id for r in await engine.list_runs(workflow="child_wf")] == ["only-child"]
    assert calls == {"child": 1}


async def test_child_failure_surfaces_in_the_parent(engine: Engine) -> None:
    @engine.workflow()
    async def fails(ctx, input):
        raise ValueError(f"bad item {input}")

    @engine.workflow()
    async def catches(ctx, input):
        try:
            await ctx.child("fails", 7, id="c-fail")
        except WorkflowFailedError as exc:
            return {"type": exc.type, "message": exc.error_message, "run": exc.run_id}
        return "not reached"

    h = await engine.start("catches")
    assert await h.result(timeout=5) == {
        "type": "ValueError",
        "message": "bad item 7",
        "run": "c-fail",
    }
    assert (await engine.get_run("c-fail")).status is RunStatus.FAILED


async def test_uncaught_child_failure_fails_the_parent(engine: Engine) -> None:
    @engine.workflow()
    async def fails(ctx, input):
        raise ValueError("child broke")

    @engine.workflow()
    async def parent(ctx, input):
        return await ctx.child("fails")

    h = await engine.start("parent")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert exc_info.value.type == "WorkflowFailedError"
    assert "child broke" in exc_info.value.error_message
    info = await h.info()
    assert info.status is RunStatus.FAILED
    assert "child broke" in info.error.message


async def test_child_of_an_unknown_workflow_fails_in_the_parent(engine: Engine) -> None:
    @engine.workflow()
    async def parent(ctx, input):
        try:
            await ctx.child("nope")
        except UnknownWorkflowError as exc:
            return str(exc)
        return "not reached"

    h = await engine.start("parent")
    assert "nope" in await h.result(timeout=5)
    assert [r.workflow for r in await engine.list_runs()] == ["parent"]


async def test_cancelling_a_parent_cancels_its_active_child(engine: Engine) -> None:
    @engine.workflow()
    async def child_wf(ctx, input):
        return await ctx.wait_for_signal("never")

    @engine.workflow()
    async def done_child(ctx, input):
        return "finished"

    @engine.workflow()
    async def parent(ctx, input):
        finished = await ctx.child("done_child", id="kid-done")
        return [finished, await ctx.child("child_wf", id="kid")]

    h = await engine.start("parent")
    await engine.idle()
    assert (await engine.get_run("kid")).status is RunStatus.PARKED
    await h.cancel()
    await engine.idle()

    with pytest.raises(RunCancelledError):
        await h.result(timeout=5)
    with pytest.raises(RunCancelledError):
        await engine.handle("kid").result(timeout=5)
    assert (await engine.get_run("kid")).status is RunStatus.CANCELLED
    # A child that had already finished stays finished.
    assert (await engine.get_run("kid-done")).status is RunStatus.COMPLETED


async def test_cancelled_child_raises_run_cancelled_in_the_parent(engine: Engine) -> None:
    @engine.workflow()
    async def child_wf(ctx, input):
        return await ctx.wait_for_signal("never")

    @engine.workflow()
    async def parent(ctx, input):
        try:
            await ctx.child("child_wf", id="kid")
        except RunCancelledError as exc:
            return f"child {exc.run_id} cancelled"
        return "not reached"

    h = await engine.start("parent")
    await engine.idle()
    await engine.cancel("kid")
    assert await h.result(timeout=5) == "child kid cancelled"
