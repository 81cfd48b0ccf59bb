"""Prometheus metrics after a scripted scenario, read back with prometheus_client's own parser:
from ``Engine.render_metrics``, from ``/metrics`` of the HTTP app, and from ``parkway worker
--metrics-port``.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_metrics.py.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client", reason="the metrics extra is in the dev extra")
import httpx

from parkway import Engine
from tests.acceptance.test_metrics import parse, value
from tests.helpers import WorkerProcess
from tests.system.test_logging import FAILING_APP


async def test_parkway_worker_serves_metrics_on_its_port(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    (tmp_path / "shop.py").write_text(FAILING_APP.format(url=url))
    worker = WorkerProcess(tmp_path, "shop:engine", "--metrics-port", "0")
    try:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"metrics at (http://\S+)", worker.stderr.read_text())):
            assert worker.proc.poll() is None, worker.stderr.read_text()
            assert time.monotonic() < deadline, worker.stderr.read_text()
            await asyncio.sleep(0.05)
        address = found.group(1)
        async with Engine(url, worker=False) as client:
            handle = await client.start("checkout", {"items": [{"price": 2}, {"price": 3}]})
            assert await handle.result(timeout=30) == 5
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.get(address)
            missing = await http.get(address.replace("/metrics", "/other"))
            refused = await http.post(address)
        assert answer.status_code == 200, answer.text
        samples = parse(answer.text)
        assert value(samples, "parkway_runs_completed_total", workflow="checkout") == 1
        assert (
            value(samples, "parkway_steps_total", workflow="checkout", step="total", outcome="ok")
            == 1
        )
        assert value(samples, "parkway_tasks_due") == 0
        assert (missing.status_code, refused.status_code) == (404, 405)
        worker.stop()
    finally:
        worker.kill()
