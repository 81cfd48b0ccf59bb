"""The HTTP API, driven as clients drive it: every route over every backend, then for real.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_http.py.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.helpers import Served, served_app


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(served_app(tmp_path), "approvals:engine")
    try:
        yield server
    finally:
        server.kill()


def test_parkway_serve_runs_the_engine_and_stops_cleanly_on_sigterm(served: Served) -> None:
    served.wait_ready()
    with httpx.Client(base_url=served.url, timeout=10) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        created = http.post("/runs", json={"workflow": "approval", "input": {"n": 1}})
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        sent = http.post(f"/runs/{run_id}/signals/x", json="go")
        assert sent.status_code == 202, sent.text
        deadline = time.monotonic() + 20
        while (run := http.get(f"/runs/{run_id}").json())["status"] != "completed":
            assert time.monotonic() < deadline, f"the run did not complete: {run}"
            time.sleep(0.05)
        assert run["output"] == {"input": {"n": 1}, "decision": "go"}
    assert served.stop() == 0, served.stderr
    assert "listening on " + served.url in served.stderr
    assert "stopped (SIGTERM)" in served.stderr
    assert "Traceback" not in served.stderr
