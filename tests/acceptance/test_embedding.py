"""``create_app(engine)`` inside an application's own FastAPI app, under a path prefix:
its lifespan, its routes, its dashboard (in a real browser too)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="fastapi is in the dev extra")
import httpx
from fastapi import FastAPI

from parkway import Engine
from parkway.http import create_app, lifespan
from parkway.testing import ManualClock

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
