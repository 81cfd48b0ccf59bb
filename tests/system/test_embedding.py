"""``create_app(engine)`` inside an application's own FastAPI app, under a path prefix: its
lifespan, its routes, its dashboard (in a real browser too).

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_embedding.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write_app

pytest.importorskip("fastapi", reason="fastapi is in the dev extra")
import httpx

SHOP_APP = """
from fastapi import FastAPI
from parkway import Engine
from parkway.http import create_app, lifespan

engine = Engine({url!r})


@engine.workflow()
async def approval(ctx, input):
    return await ctx.wait_for_signal("approve")


app = FastAPI(lifespan=lifespan(engine))
app.mount("/ops/parkway", create_app(engine, api_token=""))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def shop_server(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    write_app(tmp_path, "shopweb", SHOP_APP, url)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PARKWAY_URL", "PARKWAY_API_TOKEN")}
    err = (tmp_path / "uvicorn.stderr").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "shopweb:app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "uvicorn.stderr").read_text()
            try:
                if httpx.get(f"{base}/ops/parkway/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "uvicorn.stderr").read_text()
            time.sleep(0.05)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err.close()


def test_the_dashboard_works_under_the_mount_prefix(
    browser: Any,
    shop_server: str,
) -> None:
    from playwright.sync_api import expect

    with httpx.Client(base_url=shop_server, timeout=10) as http:
        created = http.post("/ops/parkway/runs", json={"workflow": "approval", "id": "order-7"})
        assert created.status_code == 201, created.text
    page = browser.new_page()
    failures: list[str] = []
    page.on("response", lambda r: failures.append(r.url) if r.status >= 400 else None)
    page.on("pageerror", lambda exc: failures.append(str(exc)))
    for entry in ("/ops/parkway/", "/ops/parkway"):  # (the second redirects to the first)
        page.goto(shop_server + entry)
        expect(page.locator('#runs tr[data-run-id="order-7"]')).to_contain_text("parked")
        expect(page.locator("#health")).to_have_text("healthy")
    page.locator('#runs tr[data-run-id="order-7"]').click()
    page.fill("#signal-name", "approve")
    page.fill("#signal-payload", '"ops"')
    page.click("#signal-send")
    expect(page.locator("#run-info")).to_contain_text("completed", timeout=15_000)
    assert failures == []
