"""Runs' lifecycle in the logs: in process (the ``parkway.runs`` logger's records and their
fields) and through ``parkway worker`` (text and JSON lines on stderr).

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_logging.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parkway import Engine, RunStatus
from tests.helpers import WorkerProcess, write_app

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
    write_app(tmp_path, "shop", FAILING_APP, url)
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
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "--log-format" in result.stderr and "'xml' is not one of" in result.stderr
