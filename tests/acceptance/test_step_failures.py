"""Failures a step lives through: timeouts, non-retryable errors, its own context
(attempt, idempotency key, heartbeats), retries you can see."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from parkway import (
    Engine,
    Retry,
    StepContext,
    WorkflowUsageError,
    step_context,
)


async def test_step_context_inside_sync_and_async_steps(engine: Engine) -> None:
    seen: list[StepContext] = []

    def sync_step() -> str:
        seen.append(step_context())
        return "sync"

    async def async_step() -> str:
        seen.append(step_context())
        return "async"

    @engine.workflow()
    async def contexts(ctx, input):
        return [await ctx.step(sync_step, name="one"), await ctx.step(async_step, name="two")]

    h = await engine.start("contexts", id="ctx-run")
    assert await h.result(timeout=5) == ["sync", "async"]
    assert [(c.run_id, c.workflow, c.step, c.attempt) for c in seen] == [
        ("ctx-run", "contexts", "one", 1),
        ("ctx-run", "contexts", "two", 1),
    ]
    positions = [e.position for e in await engine.history(h.id)]
    assert [c.position for c in seen] == positions
    assert [c.idempotency_key for c in seen] == [f"ctx-run:{p}" for p in positions]


async def test_step_context_outside_a_step_raises(engine: Engine) -> None:
    with pytest.raises(WorkflowUsageError, match="inside a running step"):
        step_context()
    failures: list[str] = []

    @engine.workflow()
    async def body_asks(ctx, input):
        try:
            step_context()
        except WorkflowUsageError as exc:
            failures.append(str(exc))
        return "done"

    assert await (await engine.start("body_asks")).result(timeout=5) == "done"
    assert len(failures) == 1


async def test_idempotency_key_is_the_same_on_every_attempt(engine: Engine) -> None:
    keys: list[tuple[int, str]] = []
    calls = Counter()

    def charge() -> str:
        ctx = step_context()
        keys.append((ctx.attempt, ctx.idempotency_key))
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError("gateway down")
        return ctx.idempotency_key

    @engine.workflow()
    async def pay(ctx, input):
        await ctx.step(lambda: "before", name="before")
        return await ctx.step(charge, retry=Retry(max_attempts=3, backoff=0))

    h = await engine.start("pay", id="pay-1")
    key = await h.result(timeout=5)
    assert [a for a, _ in keys] == [1, 2, 3]
    assert {k for _, k in keys} == {key}
    position = [e for e in await engine.history(h.id) if e.kind == "step"][-1].position
    assert key == f"pay-1:{position}"


async def test_gathered_steps_have_distinct_keys(engine: Engine) -> None:
    async def key(tag: str) -> Any:
        return [tag, step_context().idempotency_key]

    @engine.workflow()
    async def fan(ctx, input):
        return await ctx.gather(*(ctx.step(key, str(i), name=f"k{i}") for i in range(4)))

    h = await engine.start("fan")
    results = await h.result(timeout=5)
    keys = [k for _, k in results]
    assert len(set(keys)) == 4
    by_name = {e.name: e.position for e in await engine.history(h.id) if e.kind == "step"}
    assert keys == [f"{h.id}:{by_name[f'k{i}']}" for i in range(4)]
