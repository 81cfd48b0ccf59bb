"""``create_app(engine)`` inside an application's own FastAPI app, under a path prefix:
its lifespan, its routes, its dashboard (in a real browser too)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="fastapi is in the dev extra")
import httpx
from fastapi import FastAPI

from parkway import Engine
from parkway.http import create_app, lifespan
from parkway.testing import ManualClock

from .test_dashboard_browser import browser  # noqa: F401  (the fixture)
from .test_http import register


def shop(engine: Engine) -> FastAPI:
    """An application with routes of its own and parkway's API under /parkway."""
    app = FastAPI(lifespan=lifespan(engine))

    @app.get("/hello")
    async def hello() -> dict[str, str]:
        return {"hello": "world"}

    @app.post("/orders/{order_id}")
    async def place(order_id: str) -> dict[str, str]:
        handle = await engine.start("approval", {"order": order_id}, id=order_id)
        return {"run": handle.id}

    app.mount("/parkway", create_app(engine, api_token=""))
    return app


@contextlib.asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client on ``app``, between its lifespan's startup and shutdown."""
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://shop.test") as http,
    ):
        yield http


async def test_mounted_in_fastapi_the_app_s_lifespan_opens_the_engine(
    engine_url: str, clock: ManualClock
) -> None:
    engine = Engine(engine_url, clock=clock)
    register(engine)
    async with served(shop(engine)) as http:
        assert engine.is_open
        assert (await http.get("/hello")).json() == {"hello": "world"}
        assert (await http.post("/orders/a/1")).status_code == 404  # (FastAPI's own routing)
        assert (await http.post("/orders/o-1")).json() == {"run": "o-1"}
        assert (await http.get("/parkway/healthz")).json() == {"status": "ok"}
        await engine.idle()
        run = (await http.get("/parkway/runs/o-1")).json()
        assert (run["status"], run["input"]) == ("parked", {"order": "o-1"})
        sent = await http.post("/parkway/runs/o-1/signals/approve", json="yes")
        assert sent.status_code == 202, sent.text
        started = await http.post("/parkway/runs", json={"workflow": "approval", "id": "a/b"})
        assert started.status_code == 201, started.text
        await engine.idle()
        # A run id holding "/" is still reachable under the prefix.
        assert (await http.get("/parkway/runs/a%2Fb")).json()["id"] == "a/b"
        assert (await http.get("/parkway/runs/a%2Fb/history")).status_code == 200
        assert (await http.get("/parkway/runs/o-1")).json()["status"] == "completed"
        page = await http.get("/parkway/")
        assert page.status_code == 200 and "<title>" in page.text
        assert page.headers["content-type"].startswith("text/html")
        # The page calls the API beside itself, never at the root.
        assert 'fetch("/' not in page.text and "fetch('/" not in page.text
        assert (await http.get("/parkway")).status_code in (200, 307)
    assert not engine.is_open


async def test_an_engine_the_application_opened_itself_is_left_open(
    make_engine: Any,
) -> None:
    engine = await make_engine()
    register(engine)
    async with served(shop(engine)) as http:
        assert (await http.get("/parkway/healthz")).status_code == 200
    assert engine.is_open


async def test_mounted_without_a_lifespan_the_503_says_what_to_do(engine_url: str) -> None:
    engine = Engine(engine_url)
    register(engine)
    app = FastAPI()  # (no lifespan: nothing opens the engine)
    app.mount("/parkway", create_app(engine, api_token=""))
    async with served(app) as http:
        answer = await http.get("/parkway/runs")
    assert answer.status_code == 503
    detail = answer.json()["detail"]
    assert detail.startswith("the engine is not open")
    assert "lifespan never ran" in detail and "mounted" in detail
    assert "FastAPI(lifespan=parkway.http.lifespan(engine))" in detail


# -- the dashboard under a prefix, in a browser ---------------------------------------------------

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
    (tmp_path / "shopweb.py").write_text(textwrap.dedent(SHOP_APP.format(url=url)))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PARKWAY_URL", "PARKWAY_API_TOKEN")}
    err = (tmp_path / "uvicorn.stderr").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "shopweb:app", "--port", str(port), "--log-level",
         "warning"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
    )  # fmt: skip
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
    browser: Any,  # noqa: F811
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
