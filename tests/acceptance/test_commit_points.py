"""When a worker commits: before a step's side effect, unless all it holds is a wait's input.

A step's side effect must follow a durable history: every step result, side
value, child or timer before it is committed first. The input a wait took (a
signal, an event, a message) is the exception: it stays in the store until the
commit that consumes it, so a replay after a crash takes the same one, and the
wait's result commits with the next step's instead of in a commit of its own.
The crash side of this is in ``test_crash.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from parkway import Engine

pytestmark = pytest.mark.timeout(60)
# Where the wake comes from: this process (the run is handed to its worker) or
# another one (the worker claims the run).
SENDERS = ["here", pytest.param("elsewhere", marks=pytest.mark.requires("shared"))]


def count_commits(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many lease-fenced commits (a worker's, for a run it advances) ``engine``
    has made so far. (Claims are not counted: on some stores they are transactions.)"""
    store: Any = engine.store
    original = store.transaction
    count = 0

    @asynccontextmanager
    async def counting(*, readonly: bool = False) -> AsyncIterator[Any]:
        nonlocal count
        fenced = False
        async with original(readonly=readonly) as tx:
            update_leased = tx.runs.update_leased

            async def spy(*args: Any, **kwargs: Any) -> Any:
                nonlocal fenced
                fenced = True
                return await update_leased(*args, **kwargs)

            tx.runs.update_leased = spy
            try:
                yield tx
            finally:  # (a store may keep its transaction's parts for the next one)
                del tx.runs.update_leased
        count += fenced

    monkeypatch.setattr(store, "transaction", counting)
    return lambda: count


async def commits_before_step(
    engine_url: str, monkeypatch: pytest.MonkeyPatch, between: str, wake: str, sender: str
) -> tuple[int, int, Any]:
    """Park a run on a wait, wake it (from this engine or another); the worker's
    commits between the park and the step after the wait, and to the run's end."""
    worker = Engine(engine_url)
    client = worker if sender == "here" else Engine(engine_url, worker=False)
    seen: list[int] = []
    commits = count_commits(worker, monkeypatch)

    def effect(value: Any) -> Any:
        seen.append(commits())
        return value

    for engine in (worker, client) if client is not worker else (worker,):

        @engine.workflow("waiter")
        async def waiter(ctx: Any, input: Any) -> Any:
            if wake == "signal":
                got = await ctx.wait_for_signal("go")
            elif wake == "event":
                got = await ctx.wait_for_event("paid", match={"order": 1})
            else:
                got = await ctx.wait_for_message("score", "K-1")
            if between == "now":
                ctx.now()  # a side value: must be durable before the step
            elif between == "step":
                await ctx.step(lambda: "first", name="first")
            return await ctx.step(effect, got, name="effect")

    async with contextlib.AsyncExitStack() as stack:
        for engine in (worker, client) if client is not worker else (worker,):
            await stack.enter_async_context(engine)
        handle = await client.start("waiter", None, id="w")
        await worker.idle(timeout=10)
        parked = commits()
        if wake == "signal":
            await client.signal("w", "go", {"v": 1})
        elif wake == "event":
            await client.publish("paid", {"order": 1, "v": 1})
        else:
            await client.correlate("score", "K-1", {"v": 1})
        output = await handle.result(timeout=10)
        await asyncio.sleep(0)
        return seen[-1] - parked, commits() - parked, output


@pytest.mark.parametrize("sender", SENDERS)
@pytest.mark.parametrize("wake", ["signal", "event", "message"])
async def test_the_step_after_a_wait_commits_with_the_wait(
    engine_url: str, monkeypatch: pytest.MonkeyPatch, wake: str, sender: str
) -> None:
    before, total, output = await commits_before_step(engine_url, monkeypatch, "", wake, sender)
    assert before == 0  # the step ran on the wait's input without a commit first
    assert total == 1  # one commit: the wait's result, the step's and the run's end
    assert output == {"v": 1} if wake == "signal" else output["v"] == 1


@pytest.mark.parametrize("sender", SENDERS)
@pytest.mark.parametrize("between", ["now", "step"])
async def test_a_side_value_or_step_result_commits_before_the_next_step(
    engine_url: str, monkeypatch: pytest.MonkeyPatch, between: str, sender: str
) -> None:
    before, total, output = await commits_before_step(
        engine_url, monkeypatch, between, "signal", sender
    )
    assert before == 1
    assert total == 2
    assert output == {"v": 1}


@pytest.mark.requires("group_commit")
async def test_runs_advanced_together_share_their_commits(engine_url: str) -> None:
    engine = Engine(engine_url)

    @engine.workflow()
    async def three(ctx: Any, i: int) -> int:
        a = await ctx.step(lambda: i + 1, name="a")
        b = await ctx.step(lambda: a * 2, name="b")
        return int(await ctx.step(lambda: b + 1, name="c"))

    async with engine:
        handles = [await engine.start("three", i) for i in range(60)]
        assert [await h.result(timeout=30) for h in handles] == [(i + 1) * 2 + 1 for i in range(60)]
        committer = engine.worker.committer if engine.worker is not None else None
    assert committer is not None
    # Every step commit of every run went through it, and runs in flight together
    # shared transactions: fewer transactions than commits.
    assert committer.jobs >= 60 * 3
    assert committer.batches < committer.jobs


async def test_a_lone_run_commits_each_step_at_once(engine_url: str) -> None:
    # (No company to wait for: a lone run's commits are transactions of one.)
    engine = Engine(engine_url)

    @engine.workflow()
    async def three(ctx: Any, _: Any) -> str:
        await ctx.step(lambda: 1, name="a")
        await ctx.step(lambda: 2, name="b")
        return str(await ctx.step(lambda: 3, name="c"))

    async with engine:
        assert await (await engine.start("three", None)).result(timeout=10) == "3"
        committer = engine.worker.committer if engine.worker is not None else None
    if committer is not None:
        assert committer.batches == committer.jobs >= 3
