"""The HTTP API's refusals: each names what is wrong, and a refused request writes nothing.

401 without the token, 404 for unknown runs and routes, 405 for a wrong
method, 409 when the engine cannot do it (finished run, no receiver), 413 for
bodies over 1 MiB, 422 naming the field at fault (body or query).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx

from parkway import Engine, ParkwayError, StoreError
from parkway.http import MAX_BODY_BYTES, create_app
from parkway.http import responses as s
from parkway.http.app import ROUTES

from .test_http import Served, register, served_app

TOKEN = "s3cret-token"


@pytest.fixture
async def client(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    register(engine)
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as c:
        yield c


def refused(response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, f"{response.status_code}: {response.text}"
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    (s.ValidationErrorOut if status == 422 else s.ErrorOut).model_validate(body)
    return body


def locs(response: httpx.Response) -> list[list[str | int]]:
    return [e["loc"] for e in refused(response, 422)["detail"]]


async def nothing_written(engine: Engine) -> None:
    await engine.idle()
    assert await engine.list_runs() == []
    assert await engine.messages() == []
    assert await engine.subscriptions() == []


# -- 404 / 405 -----------------------------------------------------------------------------------


async def test_an_unknown_run_is_404_on_every_run_route(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    for method, path in [
        ("GET", "/runs/nope"),
        ("GET", "/runs/nope/history"),
        ("POST", "/runs/nope/signals/x"),
        ("POST", "/runs/nope/cancel"),
    ]:
        body = refused(await client.request(method, path), 404)
        assert body["error"] == "RunNotFoundError" and "'nope'" in body["detail"], (method, path)
    await nothing_written(engine)


async def test_unknown_routes_and_wrong_methods_answer_json(client: httpx.AsyncClient) -> None:
    assert refused(await client.get("/nowhere"), 404)["detail"] == "Not Found"
    response = await client.delete("/runs")
    refused(response, 405)
    assert set(response.headers["allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


# -- 401 -----------------------------------------------------------------------------------------


def _requests() -> list[tuple[str, str]]:
    return [(r.method, r.path.replace("{id}", "r1").replace("{name}", "x")) for r in ROUTES]


@pytest.fixture
async def guarded(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., httpx.AsyncClient]]:
    """Clients (with the given headers) on an app whose token comes from PARKWAY_API_TOKEN."""
    monkeypatch.setenv("PARKWAY_API_TOKEN", TOKEN)
    register(engine)
    app = create_app(engine)
    clients: list[httpx.AsyncClient] = []

    def make(**headers: str) -> httpx.AsyncClient:
        c = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://parkway.test", headers=headers
        )
        clients.append(c)
        return c

    yield make
    for c in clients:
        await c.aclose()


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {TOKEN}x"},
    ],
    ids=["none", "wrong", "basic", "no-scheme", "empty", "longer"],
)
async def test_with_a_token_set_every_route_but_healthz_is_401_without_it(
    guarded: Callable[..., httpx.AsyncClient], engine: Engine, headers: dict[str, str]
) -> None:
    client = guarded(**headers)
    for method, path in _requests():
        response = await client.request(method, path, json={"workflow": "approval"})
        if path == "/healthz":
            assert response.status_code == 200
        elif path == "/":  # the page holds no data; it is where the token is pasted
            assert response.status_code == 401 and "sessionStorage" in response.text
        elif path.startswith("/callbacks/"):  # the callback's token is the capability
            assert response.status_code in (404, 422), (path, response.text)
        else:
            body = refused(response, 401)
            assert "Authorization: Bearer" in body["detail"], path
            assert response.headers["www-authenticate"] == "Bearer"
    await nothing_written(engine)


async def test_with_the_right_token_every_route_answers(
    guarded: Callable[..., httpx.AsyncClient], engine: Engine
) -> None:
    for scheme in ("Bearer", "bearer"):
        client = guarded(Authorization=f"{scheme} {TOKEN}")
        started = await client.post("/runs", json={"workflow": "approval", "id": "r1"})
        assert started.status_code == 201, started.text
        await engine.idle()
        for method, path in _requests():
            if method == "GET" and path != "/tasks/r1":  # (no task has that id)
                # (A stream's events follow a live run until it ends: its JSON form answers.)
                accept = {"Accept": "application/json"} if "/streams/" in path else {}
                response = await client.get(path, headers=accept)
                assert response.status_code == 200, (path, response.text)
        assert (await client.get("/runs/r1")).json()["status"] == "parked"


async def test_an_explicit_token_wins_over_the_environment(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARKWAY_API_TOKEN", "from-env")
    app = create_app(engine, api_token="given")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert (
            await c.get("/runs", headers={"Authorization": "Bearer from-env"})
        ).status_code == 401
        assert (await c.get("/runs", headers={"Authorization": "Bearer given"})).status_code == 200
    open_app = create_app(engine, api_token="")  # empty: no token required
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=open_app), base_url="http://t"
    ) as c:
        assert (await c.get("/runs")).status_code == 200


# -- 422: bodies ---------------------------------------------------------------------------------

BAD_BODIES: list[tuple[str, Any, list[Any]]] = [
    # route, body, the loc of each error
    ("/events", {}, [["body", "name"]]),
    ("/events", {"name": 5}, [["body", "name"]]),
    ("/events", {"name": "   "}, [["body", "name"]]),
    ("/events", {"name": "x", "paylaod": {}}, [["body", "paylaod"]]),
    ("/events", {"name": "x", "subject": "*"}, [["body", "subject"]]),
    ("/events", {"name": "x", "subject": ""}, [["body", "subject"]]),
    ("/events", {"name": "x", "id": 7, "domain": ["a"]}, [["body", "id"], ["body", "domain"]]),
    ("/events", [1, 2], [["body"]]),
    ("/events", "order.created", [["body"]]),
    ("/messages", {"name": "credit.score"}, [["body", "key"]]),
    ("/messages", {"name": "credit.score", "key": 12}, [["body", "key"]]),
    ("/messages", {"name": "credit.score", "key": " "}, [["body", "key"]]),
    ("/messages", {"name": "m", "key": "k", "ttl": "soon"}, [["body", "ttl"]]),
    ("/messages", {"name": "m", "key": "k", "ttl": -5}, [["body", "ttl"]]),
    ("/messages", {"name": "m", "key": "k", "ttl": True}, [["body", "ttl"]]),
    ("/messages", {"name": "m", "key": "k", "message_id": ""}, [["body", "message_id"]]),
    ("/runs", {}, [["body", "workflow"]]),
    ("/runs", {"workflow": "nobody"}, [["body", "workflow"]]),
    ("/runs", {"workflow": "approval", "id": ""}, [["body", "id"]]),
    ("/runs", {"workflow": "approval", "subject": 5}, [["body", "subject"]]),
    ("/runs", {"workflow": "approval", "inptu": 1}, [["body", "inptu"]]),
    (
        "/runs",
        {"workflow": "typed", "input": {"sku": "a", "qty": "many"}},
        [["body", "input", "qty"]],
    ),
    ("/runs", {"workflow": "typed", "input": {"qty": 1}}, [["body", "input", "sku"]]),
]


@pytest.mark.parametrize(("path", "body", "expected"), BAD_BODIES)
async def test_an_invalid_body_is_422_naming_the_field_and_writes_nothing(
    client: httpx.AsyncClient, engine: Engine, path: str, body: Any, expected: list[Any]
) -> None:
    response = await client.post(path, json=body)
    assert locs(response) == expected
    for error in response.json()["detail"]:
        assert error["msg"] and error["type"]
    await nothing_written(engine)


async def test_a_rejected_event_is_not_recorded(client: httpx.AsyncClient, engine: Engine) -> None:
    bad = {"name": "order.created", "id": "ev-1", "subject": "o:1", "extra": True}
    assert locs(await client.post("/events", json=bad)) == [["body", "extra"]]
    del bad["extra"]
    result = (await client.post("/events", json=bad)).json()
    assert result["duplicate"] is False and result["started"] == ["evt:ev-1:fulfilment"]


async def test_invalid_input_says_why(client: httpx.AsyncClient) -> None:
    response = await client.post("/runs", json={"workflow": "typed", "input": {"sku": "a"}})
    [error] = refused(response, 422)["detail"]
    assert error["type"] == "InvalidInputError" and "qty" in error["msg"]
    unknown = refused(await client.post("/runs", json={"workflow": "nobody"}), 422)["detail"][0]
    assert "approval" in unknown["msg"]  # lists the workflows that are registered


@pytest.mark.parametrize(
    "content",
    [b"", b"   ", b"{", b"{'name': 'x'}", b"\xff\xfe", b"NaN", b'{"name": "x",}'],
    ids=["empty", "blank", "truncated", "single-quotes", "not-utf8", "nan", "trailing-comma"],
)
async def test_a_body_that_is_not_json_is_422(
    client: httpx.AsyncClient, engine: Engine, content: bytes
) -> None:
    for path in ("/events", "/messages", "/runs"):
        response = await client.post(
            path, content=content, headers={"content-type": "application/json"}
        )
        assert locs(response) == [["body"]], path
    bad_signal = await client.post("/runs/r1/signals/x", content=content.strip() or b"{")
    assert locs(bad_signal) == [["body"]]
    await nothing_written(engine)


# -- 422: query strings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/runs?status=asleep", [["query", "status"]]),
        ("/runs?limit=0", [["query", "limit"]]),
        ("/runs?limit=lots", [["query", "limit"]]),
        ("/runs?limit=100000", [["query", "limit"]]),
        ("/runs?workflow=", [["query", "workflow"]]),
        ("/runs?staus=parked", [["query", "staus"]]),
        ("/runs?status=parked&status=failed", [["query", "status"]]),
        ("/runs?status=nope&limit=-1", [["query", "status"], ["query", "limit"]]),
        ("/messages?status=lost", [["query", "status"]]),
        ("/subscriptions?run=r1", [["query", "run"]]),
    ],
)
async def test_an_invalid_query_is_422_naming_the_parameter(
    client: httpx.AsyncClient, url: str, expected: list[Any]
) -> None:
    assert locs(await client.get(url)) == expected


# -- 409 -----------------------------------------------------------------------------------------


async def test_a_finished_run_refuses_signals_with_409(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    await client.post("/runs", json={"workflow": "approval", "id": "r1"})
    await engine.idle()
    assert (await client.post("/runs/r1/signals/approve", json=True)).status_code == 202
    await engine.idle()
    body = refused(await client.post("/runs/r1/signals/approve", json=True), 409)
    assert body["error"] == "RunClosedError" and "completed" in body["detail"]


async def test_a_message_nobody_can_take_with_ttl_0_is_409_and_not_buffered(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    body = refused(await client.post("/messages", json={"name": "m", "key": "k", "ttl": 0}), 409)
    assert body["error"] == "CorrelationError"
    await nothing_written(engine)


# -- 413 -----------------------------------------------------------------------------------------


def _padded_start(size: int) -> bytes:
    """A valid POST /runs body of exactly ``size`` bytes."""
    head, tail = b'{"workflow": "approval", "id": "big", "input": "', b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


async def test_a_body_of_exactly_1_mib_is_accepted(client: httpx.AsyncClient) -> None:
    response = await client.post("/runs", content=_padded_start(MAX_BODY_BYTES))
    assert response.status_code == 201, response.text


async def test_a_body_over_1_mib_is_413_and_writes_nothing(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    big = _padded_start(MAX_BODY_BYTES + 1)
    for path in ("/runs", "/events", "/messages", "/runs/r1/signals/x", "/runs/r1/cancel"):
        body = refused(await client.post(path, content=big), 413)
        assert "1 MiB" in body["detail"], path
    await nothing_written(engine)


async def test_a_streamed_body_over_1_mib_without_length_is_413(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"workflow": "approval", "input": "'
        for _ in range(20):  # 1.25 MiB in all, announced by no Content-Length
            yield b"x" * (64 * 1024)
        yield b'"}'

    response = await client.post("/runs", content=chunks())
    assert "content-length" not in response.request.headers
    refused(response, 413)
    await nothing_written(engine)


async def test_a_lying_content_length_is_refused_before_reading(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    response = await client.post(
        "/runs", content=b"{}", headers={"content-length": str(MAX_BODY_BYTES + 1)}
    )
    refused(response, 413)
    await nothing_written(engine)


# -- the command -------------------------------------------------------------------------------


def test_serve_without_the_http_extra_says_how_to_install_it(tmp_path: Path) -> None:
    # A uvicorn that cannot be imported, first on the path, stands for a missing extra.
    shadow = tmp_path / "shadow" / "uvicorn"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named uvicorn')\n")
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), env.get("PYTHONPATH", "")])
    served_app(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "parkway", "serve", "approvals:engine"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode != 0
    assert "pip install 'parkway[http]'" in result.stderr, result.stderr
    assert "uvicorn" in result.stderr and "Traceback" not in result.stderr


def test_serve_on_a_taken_port_fails_cleanly(tmp_path: Path) -> None:
    first = Served(served_app(tmp_path), "approvals:engine")
    try:
        first.wait_ready()
        env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "parkway",
                "serve",
                "approvals:engine",
                "--port",
                str(first.port),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 1
        assert f"cannot listen on 127.0.0.1:{first.port}" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert first.stop() == 0, first.stderr
    finally:
        first.kill()


# -- 500 / 503 -----------------------------------------------------------------------------------


async def test_an_unexpected_error_is_a_json_500_without_details(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(**_: Any) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(engine, "list_runs", broken)
    transport = httpx.ASGITransport(
        app=create_app(engine, api_token=""), raise_app_exceptions=False
    )
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        body = refused(await c.get("/runs"), 500)
    assert body["error"] == "RuntimeError" and "secret" not in body["detail"]


async def test_a_store_failure_is_a_503_naming_it(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(**_: Any) -> None:
        raise StoreError("PostgreSQL db:5432: connection refused (rolled back; retry)")

    monkeypatch.setattr(engine, "list_runs", down)
    transport = httpx.ASGITransport(app=create_app(engine, api_token=""))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        body = refused(await c.get("/runs"), 503)
        assert body["error"] == "StoreError" and "connection refused" in body["detail"]
        assert refused(await c.get("/healthz"), 503)["error"] == "StoreError"


async def test_a_closed_engine_is_503_and_the_app_lifespan_opens_and_closes_it() -> None:
    engine = Engine("memory://")
    register(engine)
    app = create_app(engine, api_token="")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        assert refused(await c.get("/healthz"), 503)["detail"].startswith("the engine is not open")
        refused(await c.post("/runs", json={"workflow": "approval"}), 503)
        # Served by an ASGI server (uvicorn myapp:app), the app opens the engine it was given.
        async with app.router.lifespan_context(app):
            assert (await c.get("/healthz")).status_code == 200
            assert (await c.post("/runs", json={"workflow": "approval"})).status_code == 201
        refused(await c.get("/runs"), 503)


async def test_an_event_the_extractor_cannot_route_is_422(make_engine: Any) -> None:
    def extractor(event: Any) -> tuple[str, str]:
        return "shop", f"customer:{event.payload['customer']}"

    engine = await make_engine(event_extractor=extractor)
    app = create_app(engine, api_token="")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        [error] = refused(await c.post("/events", json={"name": "x", "payload": {}}), 422)["detail"]
        assert error["type"] == "RoutingError" and "customer" in error["msg"]
        routed = await c.post("/events", json={"name": "x", "payload": {"customer": 5}})
        assert routed.status_code == 200, routed.text


async def test_a_store_failure_is_503_not_the_clients_fault(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unreachable(*_: Any, **__: Any) -> None:
        try:
            raise OSError("connection refused")
        except OSError as exc:
            raise ParkwayError("no connection to PostgreSQL within 5s") from exc

    monkeypatch.setattr(engine, "publish", unreachable)
    app = create_app(engine, api_token="")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        body = refused(await c.post("/events", json={"name": "x"}), 503)
    assert body["error"] == "ParkwayError" and "no connection" in body["detail"]
