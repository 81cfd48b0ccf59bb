"""Runs' lifecycle in the logs: in process (the ``parkway.runs`` logger's records and
their fields) and through ``parkway worker`` (text and JSON lines on stderr)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from parkway import Engine, Retry, RunStatus, WorkflowFailedError
from parkway.testing import ManualClock

from .test_cli import WorkerProcess


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

FAILING_APP = """
from parkway import Engine

engine = Engine({url!r})


def total(items):
    return sum(item["price"] for item in items)


@engine.workflow()
async def checkout(ctx, cart):
    return await ctx.step(total, cart["items"])
"""


@pytest.fixture
def failing_app(tmp_path: Path) -> tuple[Path, str]:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    (tmp_path / "shop.py").write_text(textwrap.dedent(FAILING_APP.format(url=url)))
    return tmp_path, url


async def _failed_run(url: str, worker: WorkerProcess) -> str:
    """Start a checkout whose step raises TypeError; wait until the worker failed it."""
    async with Engine(url, worker=False) as client:
        handle = await client.start("checkout", {"items": [{"price": "3"}]}, id="cart-1")
        deadline = time.monotonic() + 30
        while (await client.get_run(handle.id)).status != RunStatus.FAILED:
            assert worker.proc.poll() is None, worker.stderr.read_text()
            assert time.monotonic() < deadline, worker.stderr.read_text()
            await _sleep()
    return handle.id


async def _sleep() -> None:
    import asyncio

    await asyncio.sleep(0.05)


async def test_parkway_worker_prints_a_failed_run_with_its_traceback(
    failing_app: tuple[Path, str],
) -> None:
    cwd, url = failing_app
    worker = WorkerProcess(cwd, "shop:engine")
    try:
        run_id = await _failed_run(url, worker)
        text = worker.stop()
    finally:
        worker.kill()
    assert f"INFO parkway.runs: run {run_id} started (checkout v1)" in text, text
    assert f"WARNING parkway.runs: run {run_id} step 'total' attempt 1 failed" in text, text
    assert f"ERROR parkway.runs: run {run_id} failed (checkout v1): StepFailedError" in text, text
    failure = text.split(f"run {run_id} failed")[1]
    assert "Traceback (most recent call last)" in failure, text
    assert 'return sum(item["price"] for item in items)' in failure, text
    assert "TypeError: unsupported operand type(s) for +" in failure, text


async def test_parkway_worker_logs_json_lines_with_the_fields(
    failing_app: tuple[Path, str],
) -> None:
    cwd, url = failing_app
    worker = WorkerProcess(cwd, "shop:engine", "--log-format", "json")
    try:
        run_id = await _failed_run(url, worker)
        text = worker.stop()
    finally:
        worker.kill()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # each one parses
    mine = [line for line in lines if line.get("run_id") == run_id]
    assert [line["lifecycle"] for line in mine] == ["started", "step_failed", "failed"], mine
    failed = mine[-1]
    assert failed["level"] == "ERROR" and failed["logger"] == "parkway.runs"
    assert failed["workflow"] == "checkout" and failed["version"] == "1"
    assert failed["error_type"] == "StepFailedError"
    assert "TypeError" in failed["traceback"] and 'item["price"]' in failed["traceback"]
    assert mine[1]["level"] == "WARNING" and mine[1]["attempt"] == 1
    assert isinstance(mine[1]["duration_ms"], float)
    assert {"time", "message"} <= set(failed)
    # The command's own lines are JSON too.
    assert any(
        line["logger"] == "parkway.cli" and "worker: started on" in line["message"]
        for line in lines
    ), lines


def test_a_log_format_that_does_not_exist_is_refused(failing_app: tuple[Path, str]) -> None:
    cwd, _ = failing_app
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "parkway", "worker", "shop:engine", "--log-format", "xml"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--log-format" in result.stderr and "'xml' is not one of" in result.stderr
