"""Failures a step lives through: timeouts, non-retryable errors, its own context (attempt,
idempotency key, heartbeats), retries you can see.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_step_failures.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parkway import (
    Engine,
    Retry,
)
from tests.acceptance.test_step_failures import _until
from tests.conftest import MakeEngine
from tests.helpers import ok_json, parkway

HEARTBEAT_APP = """
import asyncio, json, os, pathlib

from parkway import Engine, step_context

engine = Engine(os.environ["PARKWAY_URL"])
LOG = pathlib.Path(os.environ["STEP_LOG"])


async def export():
    ctx = step_context()
    with LOG.open("a") as log:
        log.write(json.dumps([ctx.attempt, ctx.idempotency_key, ctx.last_heartbeat]) + "\\n")
    if ctx.last_heartbeat is None:
        for row in range(100):
            ctx.heartbeat({"row": row})
        await ctx.heartbeat({"row": 100})
        LOG.with_suffix(".ready").touch()
        await asyncio.sleep(60)  # killed here
    return ctx.last_heartbeat["row"]


@engine.workflow(name="long_export")
async def long_export(ctx, input):
    await ctx.step(lambda: "first", name="first")
    return await ctx.step(export, name="export")
"""


@pytest.mark.requires("persistent")
async def test_heartbeats_and_the_key_survive_a_killed_worker(
    make_engine: MakeEngine, engine_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "heartbeat_app.py").write_text(HEARTBEAT_APP)
    log = tmp_path / "steps.log"
    client = await make_engine(worker=False, clock=None)
    h = await client.start("long_export", id="export-1")
    env = {**os.environ, "PARKWAY_URL": engine_url, "STEP_LOG": str(log)}
    with (tmp_path / "worker.stderr").open("wb") as stderr:
        worker = subprocess.Popen(  # noqa: ASYNC220 (started, not waited for)
            [sys.executable, "-m", "parkway", "worker", "heartbeat_app:engine", "--lease", "1s"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        for _ in range(3000):
            if log.with_suffix(".ready").exists() or worker.poll() is not None:
                break
            await asyncio.sleep(0.01)
        assert log.with_suffix(".ready").exists(), (tmp_path / "worker.stderr").read_text()
    finally:
        worker.kill()
        await asyncio.to_thread(worker.wait)
    # The same workflow, in this process: its run is taken over once the lease expires.
    monkeypatch.setenv("PARKWAY_URL", engine_url)
    monkeypatch.setenv("STEP_LOG", str(log))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import heartbeat_app

        engine = await make_engine(clock=None)
        engine.workflow(name="long_export")(heartbeat_app.long_export)
    finally:
        sys.modules.pop("heartbeat_app", None)
    assert await engine.handle(h.id).result(timeout=20) == 100
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    [key] = {key for _, key, _ in runs}
    position = [e for e in await engine.history(h.id) if e.name == "export"][-1].position
    assert key == f"export-1:{position}"
    # The attempt cut short counts: the next is attempt 2, and resumes where it got to.
    assert [(attempt, last) for attempt, _, last in runs] == [(1, None), (2, {"row": 100})]


@pytest.mark.requires("persistent")
async def test_the_cli_and_http_show_a_retry(
    engine: Engine, engine_url: str, clock, tmp_path: Path
) -> None:
    def charge() -> None:
        raise ConnectionError("gateway down")

    @engine.workflow()
    async def billing(ctx, input):
        return await ctx.step(charge, name="charge", retry=Retry(max_attempts=3, backoff="30s"))

    h = await engine.start("billing", id="bill-1")
    info = await _until(engine, h.id, lambda i: bool(i.waiting))
    at = info.waiting[0]["at"]
    table = await asyncio.to_thread(parkway, "runs", "--url", engine_url, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if line.startswith("bill-1 "))
    assert f"retry of step 'charge' (attempt 2/3 at {at:%H:%M:%S})" in row
    shown = ok_json(
        await asyncio.to_thread(parkway, "show", "bill-1", "--url", engine_url, cwd=tmp_path)
    )
    assert shown["waiting"] == [
        {
            "kind": "retry",
            "name": "charge",
            "attempt": 2,
            "max_attempts": 3,
            "at": at.isoformat(),
            "error": {"type": "ConnectionError", "message": "gateway down", "traceback": None},
        }
    ]
    assert [(e["kind"], e["attempt"]) for e in shown["history"]] == [("attempt", 1), ("step", 1)]
