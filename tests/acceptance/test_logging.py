"""Runs' lifecycle in the logs: in process (the ``parkway.runs`` logger's records and
their fields) and through ``parkway worker`` (text and JSON lines on stderr)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from parkway import Engine, Retry, RunStatus, WorkflowFailedError
from parkway.testing import ManualClock


def lifecycle(caplog: pytest.LogCaptureFixture, run_id: str) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name == "parkway.runs" and getattr(r, "run_id", "") == run_id
    ]


def register(engine: Engine) -> None:
    def add(a: int, b: Any) -> int:
        return a + b  # b = None: TypeError

    @engine.workflow(version="2")
    async def fragile(ctx, input):
        return await ctx.step(add, 1, input, retry=Retry(max_attempts=2, backoff=0))

    @engine.workflow()
    async def approval(ctx, input):
        decision = await ctx.wait_for_signal("approve", timeout="1h")
        return await ctx.step(lambda: f"approved by {decision}", name="record")


@pytest.fixture
async def logged(make_engine: Any, caplog: pytest.LogCaptureFixture) -> Engine:
    """An engine with this module's workflows, its INFO records captured."""
    engine: Engine = await make_engine()
    register(engine)
    caplog.set_level(logging.INFO, logger="parkway")
    return engine


async def test_a_failed_run_is_an_error_with_its_traceback_and_each_attempt_a_warning(
    logged: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    engine = logged
    handle = await engine.start("fragile", None, id="fragile-1")
    with pytest.raises(WorkflowFailedError):
        await handle.result(timeout=10)

    records = lifecycle(caplog, "fragile-1")
    assert [(r.levelname, r.lifecycle) for r in records] == [  # type: ignore[attr-defined]
        ("INFO", "started"),
        ("WARNING", "step_failed"),
        ("WARNING", "step_failed"),
        ("ERROR", "failed"),
    ]
    _, first, second, failed = records
    for record in records:
        assert (record.workflow, record.version) == ("fragile", "2")  # type: ignore[attr-defined]
    assert [first.attempt, second.attempt] == [1, 2]  # type: ignore[attr-defined]
    assert first.step.endswith("add") and first.error_type == "TypeError"  # type: ignore[attr-defined]
    assert first.duration_ms >= 0  # type: ignore[attr-defined]
    assert "attempt 1 failed" in first.getMessage() and "TypeError" in first.getMessage()
    assert failed.error_type == "StepFailedError"  # type: ignore[attr-defined]
    assert "run fragile-1 failed (fragile v2)" in failed.getMessage()
    # The traceback goes where a formatter prints an exception's: down to the step's line.
    assert failed.exc_text is not None
    assert "Traceback (most recent call last)" in failed.exc_text
    assert "return a + b" in failed.exc_text and "TypeError" in failed.exc_text
    assert "return a + b" in caplog.text


async def test_a_run_that_parks_resumes_and_completes_says_so_with_what_it_waited_for(
    logged: Engine, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    engine = logged
    handle = await engine.start("approval", {"amount": 5}, id="approval-1")
    await engine.idle()
    await engine.signal("approval-1", "approve", "ann")
    assert await handle.result(timeout=10) == "approved by ann"

    records = lifecycle(caplog, "approval-1")
    kinds = [r.lifecycle for r in records]  # type: ignore[attr-defined]
    assert kinds == ["started", "parked", "resumed", "step", "completed"], kinds
    parked, resumed, step = records[1], records[2], records[3]
    timeout = clock.datetime().timestamp() + 3600
    [wait] = parked.waiting_for  # type: ignore[attr-defined]
    assert wait["kind"] == "signal" and wait["name"] == "approve"
    assert wait["until"].startswith(time.strftime("%Y-%m-%dT%H", time.gmtime(timeout)))
    assert "parked on signal 'approve' (until " in parked.getMessage()
    assert resumed.woken_by == ["signal"]  # type: ignore[attr-defined]
    assert resumed.wake_latency_ms >= 0  # type: ignore[attr-defined]
    assert step.step == "record" and step.duration_ms >= 0  # type: ignore[attr-defined]
    assert all(r.levelname == "INFO" for r in records)


async def test_a_cancelled_run_is_logged_once(
    logged: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    engine = logged
    await engine.start("approval", None, id="approval-2")
    await engine.idle()
    await engine.cancel("approval-2")
    await engine.idle()
    assert (await engine.get_run("approval-2")).status == RunStatus.CANCELLED
    records = lifecycle(caplog, "approval-2")
    assert [r.lifecycle for r in records] == ["started", "parked", "cancelled"]  # type: ignore[attr-defined]
    assert "run approval-2 cancelled (approval v1)" in records[-1].getMessage()


async def test_nothing_is_logged_at_info_unless_asked(
    logged: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    engine = logged
    caplog.set_level(logging.WARNING, logger="parkway")
    handle = await engine.start("approval", None, id="approval-3")
    await engine.idle()
    await engine.signal(handle.id, "approve", "bo")
    await handle.result(timeout=10)
    assert lifecycle(caplog, "approval-3") == []


# -- through `parkway worker` --------------------------------------------------------------------
