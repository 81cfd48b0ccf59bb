"""Failures a step lives through: timeouts, non-retryable errors, its own context
(attempt, idempotency key, heartbeats), retries you can see."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from parkway import (
    Engine,
    InvalidArgumentError,
    NonRetryableError,
    ParkwayError,
    Retry,
    RunInfo,
    RunStatus,
    SerializationError,
    StepContext,
    StepFailedError,
    WorkflowFailedError,
    WorkflowUsageError,
    step_context,
)
from tests.conftest import MakeEngine


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


# -- step timeouts -------------------------------------------------------------------------------


async def test_an_async_step_is_cancelled_at_its_timeout_and_retried(engine: Engine) -> None:
    calls = Counter()
    cancelled = asyncio.Event()

    async def slow_then_fast() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return f"attempt {calls['n']}"

    @engine.workflow()
    async def timed(ctx, input):
        return await ctx.step(
            slow_then_fast, name="call", timeout=0.2, retry=Retry(max_attempts=2, backoff=0)
        )

    h = await engine.start("timed")
    assert await h.result(timeout=10) == "attempt 2"
    assert cancelled.is_set()
    first, step = await engine.history(h.id)
    assert (first.kind, first.name, first.attempt) == ("attempt", "call", 1)
    assert first.error is not None and first.error.type == "StepTimeoutError"
    assert "timed out after 0.2s" in first.error.message
    assert (step.kind, step.status, step.result) == ("step", "done", "attempt 2")


async def test_the_last_timeout_surfaces_as_step_failed(engine: Engine) -> None:
    async def hangs() -> None:
        await asyncio.sleep(30)

    @engine.workflow()
    async def hanging(ctx, input):
        try:
            await ctx.step(hangs, timeout="100ms", retry=Retry(max_attempts=2, backoff=0))
        except StepFailedError as exc:
            return [exc.error_type, exc.attempts]

    h = await engine.start("hanging")
    assert await h.result(timeout=10) == ["StepTimeoutError", 2]


async def test_a_step_timeout_fails_the_run_when_not_caught(engine: Engine) -> None:
    def sleeps() -> None:
        time.sleep(1)

    @engine.workflow()
    async def uncaught(ctx, input):
        await ctx.step(sleeps, timeout=timedelta(milliseconds=100))

    h = await engine.start("uncaught")
    with pytest.raises(WorkflowFailedError) as failure:
        await h.result(timeout=10)
    assert failure.value.error is not None
    assert failure.value.error.type == "StepFailedError"
    assert "StepTimeoutError" in failure.value.error.message


async def test_an_abandoned_sync_step_frees_its_slot_and_its_late_result_is_dropped(
    make_engine: MakeEngine,
) -> None:
    engine = await make_engine(concurrency=1)
    release, finished = threading.Event(), threading.Event()

    def stuck() -> str:
        release.wait(20)
        finished.set()
        return "late"

    def quick() -> str:
        return "quick"

    @engine.workflow()
    async def abandons(ctx, input):
        try:
            return await ctx.step(stuck, timeout=0.2)
        except StepFailedError as exc:
            return exc.error_type

    @engine.workflow()
    async def after(ctx, input):
        return await ctx.step(quick)

    first = await engine.start("abandons")
    assert await first.result(timeout=10) == "StepTimeoutError"
    # The thread still runs the abandoned call, and the only slot is free again.
    assert not finished.is_set()
    second = await engine.start("after")
    assert await second.result(timeout=10) == "quick"
    assert not finished.is_set()
    release.set()
    assert await asyncio.to_thread(finished.wait, 10)
    await asyncio.sleep(0.2)  # (the late result reaches the loop, and is dropped)
    assert await (await engine.start("after")).result(timeout=10) == "quick"
    history = await engine.history(first.id)
    assert "late" not in [e.result for e in history]
    assert [(e.kind, e.status) for e in history] == [("attempt", "error"), ("step", "error")]


@pytest.mark.parametrize("bad", [0, -1, "soon", True, float("nan"), "0s", [1]], ids=repr)
async def test_bad_step_timeouts_are_rejected_at_the_call(engine: Engine, bad: Any) -> None:
    @engine.workflow()
    async def bad_timeout(ctx, input):
        try:
            await ctx.step(lambda: 1, name="never", timeout=bad)
        except ParkwayError as exc:
            return [type(exc).__name__, str(exc)]
        return "accepted"

    kind, message = await (await engine.start("bad_timeout")).result(timeout=5)
    assert kind == "InvalidDurationError"
    assert "ctx.step timeout" in message


# -- retries and non-retryable errors ------------------------------------------------------------


class CardDeclined(Exception):
    pass


class FraudSuspected(NonRetryableError):
    """The card's issuer suspects fraud: final."""


@pytest.mark.parametrize(
    ("raised", "non_retryable"),
    [
        (CardDeclined, (CardDeclined,)),
        (CardDeclined, ("CardDeclined",)),
        (CardDeclined, (f"{__name__}.CardDeclined",)),
        (CardDeclined, (Exception,)),  # a base class covers its subclasses
        (NonRetryableError, ()),
        (FraudSuspected, ()),
    ],
    ids=["class", "name", "qualified-name", "base-class", "NonRetryableError", "subclass"],
)
async def test_non_retryable_failures_fail_the_step_at_once(
    engine: Engine, raised: type[Exception], non_retryable: tuple[Any, ...]
) -> None:
    calls = Counter()

    def charge() -> None:
        calls["n"] += 1
        raise raised("declined")

    @engine.workflow()
    async def paying(ctx, input):
        retry = Retry(max_attempts=5, backoff=0, non_retryable=non_retryable)
        try:
            await ctx.step(charge, name="charge", retry=retry)
        except StepFailedError as exc:
            return [exc.error_type, exc.attempts]

    assert await (await engine.start("paying")).result(timeout=5) == [raised.__name__, 1]
    assert calls["n"] == 1


async def test_other_failures_are_still_retried(engine: Engine) -> None:
    calls = Counter()

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError("down")
        return "ok"

    @engine.workflow()
    async def retried(ctx, input):
        retry = Retry(max_attempts=3, backoff=0, non_retryable=(CardDeclined, "ValueError"))
        return await ctx.step(flaky, retry=retry)

    assert await (await engine.start("retried")).result(timeout=5) == "ok"
    assert calls["n"] == 3


def test_retry_rejects_a_backoff_above_its_cap() -> None:
    with pytest.raises(InvalidArgumentError, match="max_backoff") as caught:
        Retry(backoff="10m")  # (it used to wait 60 s without a word)
    assert caught.value.field == "Retry.backoff"
    with pytest.raises(InvalidArgumentError):
        Retry(backoff=5, max_backoff=1)
    assert Retry(backoff="10m", max_backoff="1h").delay(1) == 600


@pytest.mark.parametrize("bad", [(42,), ("",), (object,), 3, (ValueError, None)], ids=repr)
def test_retry_rejects_what_is_no_exception_class_nor_name(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="non_retryable"):
        Retry(non_retryable=bad)


def test_retry_takes_a_list_or_one_class_as_non_retryable() -> None:
    assert Retry(non_retryable=[ValueError, "KeyError"]).non_retryable == (ValueError, "KeyError")
    assert Retry(non_retryable=ValueError).non_retryable == (ValueError,)
    assert not Retry(non_retryable=ValueError).retries(ValueError("x"))
    assert Retry(non_retryable=ValueError).retries(KeyError("x"))


# -- attempt history and RunInfo.waiting ------------------------------------------------------


async def test_failed_attempts_stay_in_history_after_success(engine: Engine, clock) -> None:
    calls = Counter()

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError(f"down #{calls['n']}")
        return "up"

    @engine.workflow()
    async def recovers(ctx, input):
        return await ctx.step(flaky, name="call", retry=Retry(max_attempts=3, backoff=0))

    h = await engine.start("recovers")
    assert await h.result(timeout=5) == "up"
    history = await engine.history(h.id)
    assert [(e.kind, e.name, e.status, e.attempt) for e in history] == [
        ("attempt", "call", "error", 1),
        ("attempt", "call", "error", 2),
        ("step", "call", "done", None),
    ]
    for entry, n in zip(history[:2], (1, 2), strict=True):
        assert entry.error is not None
        assert (entry.error.type, entry.error.message) == ("ConnectionError", f"down #{n}")
        assert entry.started_at is not None and entry.ended_at is not None
        assert entry.started_at <= entry.ended_at
        assert entry.position == history[2].position
    assert (await engine.get_run(h.id)).waiting == []


async def test_a_run_waiting_to_retry_says_so(engine: Engine, clock) -> None:
    calls = Counter()

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 2:
            raise ConnectionError("gateway down")
        return "ok"

    @engine.workflow()
    async def backs_off(ctx, input):
        return await ctx.step(flaky, name="charge", retry=Retry(max_attempts=4, backoff="30s"))

    h = await engine.start("backs_off")
    info = await _until(engine, h.id, lambda i: bool(i.waiting))
    assert info.status == RunStatus.RUNNING
    [wait] = info.waiting
    assert wait == {
        "kind": "retry",
        "name": "charge",
        "attempt": 2,
        "max_attempts": 4,
        "at": clock.datetime() + timedelta(seconds=30),
        "error": wait["error"],
    }
    assert wait["error"]["type"] == "ConnectionError"
    assert wait["error"]["message"] == "gateway down"
    assert info.to_dict()["waiting"][0]["at"] == wait["at"].isoformat()
    tried, pending = await engine.history(h.id)
    assert (tried.kind, tried.attempt, pending.kind, pending.status) == (
        "attempt",
        1,
        "step",
        "pending",
    )
    await clock.advance(30)
    assert await h.result(timeout=5) == "ok"
    assert (await engine.get_run(h.id)).waiting == []


async def test_waiting_lists_each_kind_of_wait(engine: Engine, clock) -> None:
    @engine.workflow()
    async def signal_wait(ctx, input):
        return await ctx.wait_for_signal("approve", timeout="1h")

    @engine.workflow()
    async def event_wait(ctx, input):
        return await ctx.wait_for_event("paid", subject="order-1", match={"ok": True})

    @engine.workflow()
    async def message_wait(ctx, input):
        return await ctx.wait_for_message("reply", "k-1", timeout=60)

    @engine.workflow()
    async def timer_wait(ctx, input):
        await ctx.sleep("2h")

    @engine.workflow()
    async def first_wait(ctx, input):
        return await ctx.first(go=ctx.wait_for_signal("go"), late=ctx.sleep(30))

    now = clock.datetime()
    expected = {
        "signal_wait": [{"kind": "signal", "name": "approve", "at": now + timedelta(hours=1)}],
        "event_wait": [
            {
                "kind": "event",
                "name": "paid",
                "subject": "order-1",
                "match": {"ok": True},
                "at": None,
            }
        ],
        "message_wait": [
            {"kind": "message", "name": "reply", "key": "k-1", "at": now + timedelta(seconds=60)}
        ],
        "timer_wait": [{"kind": "timer", "name": "sleep", "at": now + timedelta(hours=2)}],
        "first_wait": [
            {"kind": "signal", "name": "go", "at": None},
            {"kind": "timer", "name": "late", "at": now + timedelta(seconds=30)},
        ],
    }
    for workflow, waits in expected.items():
        h = await engine.start(workflow)
        info = await _until(engine, h.id, lambda i: i.status == RunStatus.PARKED)
        assert info.waiting == waits, workflow
        listed = {r.id: r for r in await engine.list_runs(workflow=workflow)}
        assert listed[h.id].waiting == waits, workflow
    done = await engine.start("signal_wait")
    await _until(engine, done.id, lambda i: i.status == RunStatus.PARKED)
    await engine.signal(done.id, "approve", {"yes": True})
    assert await done.result(timeout=5) == {"yes": True}
    assert (await engine.get_run(done.id)).waiting == []


async def _until(engine: Engine, run_id: str, ok: Callable[[RunInfo], bool]) -> RunInfo:
    for _ in range(500):
        info = await engine.get_run(run_id)
        if ok(info):
            return info
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never got there: {info}")


# -- heartbeats ----------------------------------------------------------------------------------


async def test_the_next_attempt_resumes_from_the_last_heartbeat(engine: Engine) -> None:
    seen: list[tuple[int, Any]] = []

    async def export() -> int:
        ctx = step_context()
        seen.append((ctx.attempt, ctx.last_heartbeat))
        start = (ctx.last_heartbeat or {"row": 0})["row"]
        for row in range(start, 1000):
            ctx.heartbeat({"row": row})  # (not awaited: coalesced, flushed at the end)
            if ctx.attempt == 1 and row == 600:
                raise ConnectionError("export interrupted")
        return start

    @engine.workflow()
    async def exporting(ctx, input):
        return await ctx.step(export, retry=Retry(max_attempts=2, backoff=0))

    h = await engine.start("exporting")
    assert await h.result(timeout=10) == 600
    assert seen == [(1, None), (2, {"row": 600})]


async def test_heartbeats_in_a_tight_loop_are_coalesced(engine: Engine) -> None:
    commits: list[int] = []

    async def busy() -> str:
        ctx = step_context()
        dues = [ctx.heartbeat({"i": i}) for i in range(5000)]
        await dues[-1]  # durable: the latest details are committed
        commits.append(len({id(d) for d in dues}))
        return "done"

    @engine.workflow()
    async def beating(ctx, input):
        return await ctx.step(busy)

    assert await (await engine.start("beating")).result(timeout=10) == "done"
    # The calls share a commit or two (the first call's, and one for those that
    # came while it was under way): never one per call.
    assert len(commits) == 1 and commits[0] <= 2


async def test_a_sync_step_heartbeats_from_its_thread(engine: Engine) -> None:
    seen: list[Any] = []

    def job() -> int:
        ctx = step_context()
        seen.append(ctx.last_heartbeat)
        if ctx.attempt == 1:
            for page in range(50):
                due = ctx.heartbeat({"page": page})
            due.result(timeout=5)  # type: ignore[union-attr]  (waits for durability)
            raise TimeoutError("the API hung up")
        return ctx.last_heartbeat["page"]

    @engine.workflow()
    async def paging(ctx, input):
        return await ctx.step(job, retry=Retry(max_attempts=2, backoff=0))

    h = await engine.start("paging")
    assert await h.result(timeout=10) == 49
    assert seen == [None, {"page": 49}]


async def test_heartbeat_details_must_be_json(engine: Engine) -> None:
    async def bad() -> str:
        with pytest.raises(SerializationError, match="heartbeat"):
            await step_context().heartbeat({"when": object()})
        return "refused"

    @engine.workflow()
    async def bad_beat(ctx, input):
        return await ctx.step(bad)

    assert await (await engine.start("bad_beat")).result(timeout=10) == "refused"
