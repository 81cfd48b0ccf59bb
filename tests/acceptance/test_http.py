"""The HTTP API, driven as clients drive it: every route over every backend, then for real.

The tests call the ASGI app in-process (``httpx.ASGITransport``) over the
``engine`` fixture; tests/system/test_http.py runs ``python -m parkway serve``
in a subprocess and talks to it over a socket. Every response is held to the
response models that ``/openapi.json`` publishes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx
from pydantic import BaseModel

from parkway import Engine
from parkway.http import create_app
from parkway.http import responses as s
from parkway.http.app import ROUTES
from parkway.testing import ManualClock

# -- the app under test --------------------------------------------------------------------------


class Order(BaseModel):
    sku: str
    qty: int


def register(engine: Engine) -> None:
    """The workflows every test here can use."""

    @engine.workflow()
    async def approval(ctx, input):
        decision = await ctx.wait_for_signal("approve")
        return {"input": input, "decision": decision}

    @engine.workflow(on_event="order.created")
    async def fulfilment(ctx, order):
        shipped = await ctx.wait_for_event("order.shipped")
        return {"order": order, "shipped": shipped}

    @engine.workflow()
    async def loan(ctx, app_id):
        return await ctx.wait_for_message("credit.score", app_id)

    @engine.workflow(on_message="signup")
    async def onboarding(ctx, profile):
        return profile

    @engine.workflow()
    async def typed(ctx, order: Order):
        return order.qty


@pytest.fixture
async def client(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the app over this test's engine, with no token required."""
    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    register(engine)
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as c:
        yield c


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, f"{response.status_code}: {response.text}"
    assert response.headers["content-type"] == "application/json"
    return response.json()


def conform(model: type[BaseModel], data: Any, *, many: bool = False) -> Any:
    """Assert ``data`` has exactly the documented shape (the models forbid extra fields)."""
    for item in data if many else [data]:
        model.model_validate(item)
    return data


# -- runs ----------------------------------------------------------------------------------------


async def test_a_run_is_started_inspected_signalled_and_completes(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    created = ok(await client.post("/runs", json={"workflow": "approval", "input": {"n": 1}}), 201)
    run_id = conform(s.RunIdOut, created)["id"]
    await engine.idle()

    run = conform(s.RunInfoOut, ok(await client.get(f"/runs/{run_id}")))
    assert (run["id"], run["workflow"], run["status"]) == (run_id, "approval", "parked")
    assert run["input"] == {"n": 1} and run["output"] is None and run["domain"] == "default"
    history = conform(s.HistoryEntryOut, ok(await client.get(f"/runs/{run_id}/history")), many=True)
    assert [(h["kind"], h["name"], h["status"]) for h in history] == [
        ("signal", "approve", "pending")
    ]

    sent = ok(await client.post(f"/runs/{run_id}/signals/approve", json={"by": "ann"}), 202)
    assert conform(s.SignalOut, sent) == {"id": run_id, "signal": "approve"}
    await engine.idle()

    run = conform(s.RunInfoOut, ok(await client.get(f"/runs/{run_id}")))
    assert run["status"] == "completed"
    assert run["output"] == {"input": {"n": 1}, "decision": {"by": "ann"}}
    history = ok(await client.get(f"/runs/{run_id}/history"))
    assert [(h["name"], h["status"], h["result"]) for h in history] == [
        ("approve", "done", {"by": "ann"})
    ]


async def test_a_signal_body_is_any_json_value_and_an_empty_body_is_null(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    for run_id, content, expected in [
        ("text", b'"yes"', "yes"),
        ("empty", b"", None),
        ("number", b"42", 42),
        ("list", b"[1, 2]", [1, 2]),
    ]:
        ok(await client.post("/runs", json={"workflow": "approval", "id": run_id}), 201)
        ok(await client.post(f"/runs/{run_id}/signals/approve", content=content), 202)
        await engine.idle()
        assert ok(await client.get(f"/runs/{run_id}"))["output"]["decision"] == expected, run_id


async def test_starting_an_existing_id_returns_that_run(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    body = {
        "workflow": "approval",
        "id": "order-7",
        "subject": "client:5",
        "domain": "shop",
        "input": 1,
    }
    assert ok(await client.post("/runs", json=body), 201) == {"id": "order-7"}
    assert ok(await client.post("/runs", json={**body, "input": 2}), 201) == {"id": "order-7"}
    await engine.idle()
    runs = ok(await client.get("/runs"))
    assert [(r["id"], r["input"], r["subject"], r["domain"]) for r in runs] == [
        ("order-7", 1, "client:5", "shop")
    ]


async def test_runs_are_listed_newest_first_and_filtered(
    client: httpx.AsyncClient, engine: Engine, clock: ManualClock
) -> None:
    for run_id, subject, domain in [
        ("a1", "client:1", "shop"),
        ("a2", "client:2", "shop"),
        ("a3", "client:1", "billing"),
    ]:
        ok(
            await client.post(
                "/runs",
                json={"workflow": "approval", "id": run_id, "subject": subject, "domain": domain},
            ),
            201,
        )
        await clock.advance("1s")
    ok(await client.post("/runs", json={"workflow": "loan", "id": "l1", "input": "APP-1"}), 201)
    await engine.idle()
    ok(await client.post("/runs/a2/signals/approve"), 202)
    await engine.idle()

    async def ids(**query: Any) -> list[str]:
        runs = conform(s.RunInfoOut, ok(await client.get("/runs", params=query)), many=True)
        return [r["id"] for r in runs]

    assert await ids() == ["l1", "a3", "a2", "a1"]
    assert await ids(workflow="approval") == ["a3", "a2", "a1"]
    assert await ids(status="parked") == ["l1", "a3", "a1"]
    assert await ids(status="completed") == ["a2"]
    assert await ids(subject="client:1") == ["a3", "a1"]
    assert await ids(domain="shop") == ["a2", "a1"]
    assert await ids(workflow="approval", status="parked", domain="shop") == ["a1"]
    assert await ids(limit=2) == ["l1", "a3"]
    assert await ids(workflow="nobody") == []


async def test_cancel_stops_a_parked_run_and_leaves_a_finished_one_alone(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    ok(await client.post("/runs", json={"workflow": "approval", "id": "c1"}), 201)
    await engine.idle()
    assert conform(s.RunIdOut, ok(await client.post("/runs/c1/cancel"), 202)) == {"id": "c1"}
    await engine.idle()
    assert ok(await client.get("/runs/c1"))["status"] == "cancelled"
    assert ok(await client.post("/runs/c1/cancel"), 202) == {"id": "c1"}
    assert ok(await client.get("/runs/c1"))["status"] == "cancelled"


async def test_a_run_id_with_slashes_is_reachable_on_every_run_route(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    run_id = "orders/2026/7"
    ok(await client.post("/runs", json={"workflow": "approval", "id": run_id}), 201)
    await engine.idle()
    for path in ("/runs/orders%2F2026%2F7", "/runs/orders/2026/7"):
        assert ok(await client.get(path))["id"] == run_id
    assert ok(await client.get(f"/runs/{run_id}/history"))[0]["kind"] == "signal"
    ok(await client.post(f"/runs/{run_id}/signals/approve", json=True), 202)
    await engine.idle()
    assert ok(await client.get(f"/runs/{run_id}"))["status"] == "completed"
    ok(await client.post(f"/runs/{run_id}/cancel"), 202)
    # An id that ends like a sub-route is still a run id for GET.
    assert (await client.get("/runs/nobody/cancel")).status_code == 404
    assert (await client.get("/runs/nobody/history")).status_code == 404


# -- events --------------------------------------------------------------------------------------


async def test_an_event_starts_its_subscribers_and_a_later_one_resumes_them(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    body = {"name": "order.created", "payload": {"order": 1}, "id": "ev-1", "subject": "order:1"}
    result = conform(s.PublishResultOut, ok(await client.post("/events", json=body)))
    assert result["started"] == ["evt:ev-1:fulfilment"] and result["touched"] == 1
    assert result["event_id"] == "ev-1" and result["duplicate"] is False
    await engine.idle()

    subs = conform(s.SubscriptionInfoOut, ok(await client.get("/subscriptions")), many=True)
    assert [(x["run_id"], x["kind"], x["name"], x["subject"]) for x in subs] == [
        ("evt:ev-1:fulfilment", "event", "order.shipped", "order:1")
    ]

    other = {"name": "order.shipped", "payload": {"via": "dhl"}, "subject": "order:2"}
    assert ok(await client.post("/events", json=other))["touched"] == 0
    shipped = ok(await client.post("/events", json={**other, "subject": "order:1"}))
    assert shipped["resumed"] == ["evt:ev-1:fulfilment"]
    assert [d["run_id"] for d in shipped["deliveries"]] == ["evt:ev-1:fulfilment"]
    await engine.idle()
    run = ok(await client.get("/runs/evt:ev-1:fulfilment"))
    assert run["status"] == "completed" and run["subject"] == "order:1"
    assert run["output"] == {"order": {"order": 1}, "shipped": {"via": "dhl"}}

    again = ok(await client.post("/events", json=body))
    assert again["duplicate"] is True and again["started"] == [] and again["touched"] == 0


async def test_an_event_without_payload_or_routing_is_accepted(client: httpx.AsyncClient) -> None:
    result = ok(await client.post("/events", json={"name": "ping"}))
    assert result["touched"] == 0 and result["duplicate"] is False and result["event_id"]


# -- messages ------------------------------------------------------------------------------------


async def test_messages_are_delivered_started_buffered_and_expire_into_dead_letters(
    client: httpx.AsyncClient, engine: Engine, clock: ManualClock
) -> None:
    ok(await client.post("/runs", json={"workflow": "loan", "id": "loan-1", "input": "APP-1"}), 201)
    await engine.idle()
    subs = ok(await client.get("/subscriptions", params={"name": "credit.score"}))
    assert [(x["run_id"], x["kind"], x["key"]) for x in subs] == [("loan-1", "message", "APP-1")]

    delivered = ok(
        await client.post(
            "/messages", json={"name": "credit.score", "key": "APP-1", "payload": {"score": 700}}
        )
    )
    assert conform(s.CorrelationResultOut, delivered) == {
        "outcome": "delivered",
        "run_id": "loan-1",
    }
    started = ok(
        await client.post(
            "/messages", json={"name": "signup", "key": "u-9", "payload": {"email": "a@b.c"}}
        )
    )
    assert started == {"outcome": "started", "run_id": "msg:signup:u-9"}

    body = {"name": "credit.score", "key": "APP-2", "payload": 1, "message_id": "m-1", "ttl": "10m"}
    assert ok(await client.post("/messages", json=body)) == {"outcome": "buffered", "run_id": None}
    assert ok(await client.post("/messages", json=body))["outcome"] == "duplicate"
    await engine.idle()
    assert ok(await client.get("/runs/loan-1"))["output"] == {"score": 700}
    assert ok(await client.get("/runs/msg:signup:u-9"))["output"] == {"email": "a@b.c"}

    buffered = conform(s.MessageInfoOut, ok(await client.get("/messages")), many=True)
    assert [
        (m["name"], m["key"], m["payload"], m["message_id"], m["status"]) for m in buffered
    ] == [("credit.score", "APP-2", 1, "m-1", "buffered")]
    assert ok(await client.get("/messages", params={"status": "expired"})) == []

    await clock.advance("11m")
    dead = conform(s.MessageInfoOut, ok(await client.get("/messages?status=expired")), many=True)
    assert [(m["key"], m["status"]) for m in dead] == [("APP-2", "expired")]
    assert dead[0]["reason"]
    assert ok(await client.get("/messages?status=buffered")) == []


async def test_dead_letters_are_retried_and_discarded_over_http(
    client: httpx.AsyncClient, engine: Engine, clock: ManualClock
) -> None:
    for key in ("APP-1", "APP-2"):
        body = {"name": "credit.score", "key": key, "payload": {"score": 1}, "ttl": "1m"}
        assert ok(await client.post("/messages", json=body))["outcome"] == "buffered"
    await clock.advance("2m")
    dead = ok(await client.get("/messages?status=expired"))
    ids = {m["key"]: m["id"] for m in dead}
    assert set(ids) == {"APP-1", "APP-2"}

    # Nobody waits: with ttl 0 it stays a dead letter (409); by default it is buffered again.
    refused = await client.post(f"/messages/{ids['APP-1']}/retry", json={"ttl": 0})
    assert refused.status_code == 409, refused.text
    assert [m["status"] for m in ok(await client.get("/messages"))] == ["expired", "expired"]
    again = ok(await client.post(f"/messages/{ids['APP-1']}/retry"))
    assert again == {"outcome": "buffered", "run_id": None}

    # A receiver now waits: the retried message reaches it.
    ok(await client.post("/runs", json={"workflow": "loan", "id": "l2", "input": "APP-2"}), 201)
    await engine.idle()
    delivered = ok(await client.post(f"/messages/{ids['APP-2']}/retry", json={}))
    assert delivered == {"outcome": "delivered", "run_id": "l2"}
    await engine.idle()
    assert ok(await client.get("/runs/l2"))["output"] == {"score": 1}

    [rebuffered] = ok(await client.get("/messages?status=buffered"))
    assert ok(await client.delete(f"/messages/{rebuffered['id']}")) == {"id": rebuffered["id"]}
    assert ok(await client.get("/messages")) == []

    # Bad input names its field; unknown ids are 404.
    assert (await client.delete(f"/messages/{rebuffered['id']}")).status_code == 404
    assert (await client.post("/messages/999/retry")).status_code == 404
    bad = await client.post("/messages/abc/retry")
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["path", "message_id"]
    bad = await client.post("/messages/1/retry", json={"ttl": "soon"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "ttl"]
    bad = await client.post("/messages/1/retry", json={"tll": 5})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "tll"]


async def test_a_message_with_a_numeric_ttl_in_seconds_is_buffered(
    client: httpx.AsyncClient,
) -> None:
    body = {"name": "credit.score", "key": "APP-3", "ttl": 90}
    assert ok(await client.post("/messages", json=body))["outcome"] == "buffered"
    [message] = ok(await client.get("/messages"))
    assert message["payload"] is None
    received = message["received_at"]
    expires = message["expires_at"]
    assert _seconds_between(received, expires) == pytest.approx(90)


def _seconds_between(start: str, end: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


async def test_subscriptions_are_filtered_by_run_and_by_name(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    ok(await client.post("/runs", json={"workflow": "loan", "id": "loan-1", "input": "A"}), 201)
    ok(await client.post("/runs", json={"workflow": "loan", "id": "loan-2", "input": "B"}), 201)
    ok(await client.post("/events", json={"name": "order.created", "id": "e", "subject": "o:1"}))
    await engine.idle()

    async def runs(**query: str) -> list[str]:
        return sorted(x["run_id"] for x in ok(await client.get("/subscriptions", params=query)))

    assert await runs() == ["evt:e:fulfilment", "loan-1", "loan-2"]
    assert await runs(run_id="loan-2") == ["loan-2"]
    assert await runs(name="order.shipped") == ["evt:e:fulfilment"]
    assert await runs(name="credit.score", run_id="loan-1") == ["loan-1"]
    assert await runs(run_id="nobody") == []


# -- health, schema, dashboard -------------------------------------------------------------------


async def test_healthz_answers_ok(client: httpx.AsyncClient) -> None:
    assert conform(s.HealthOut, ok(await client.get("/healthz"))) == {"status": "ok"}


async def test_openapi_describes_every_route_its_bodies_and_responses(
    client: httpx.AsyncClient,
) -> None:
    doc = ok(await client.get("/openapi.json"))
    assert doc["openapi"].startswith("3.1")
    served = {(r.method, r.path) for r in ROUTES}
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    expected = {
        ("POST", "/events"),
        ("GET", "/events"),
        ("GET", "/workers"),
        ("POST", "/messages"),
        ("POST", "/runs"),
        ("GET", "/runs"),
        ("GET", "/runs/counts"),
        ("GET", "/runs/{id}"),
        ("GET", "/runs/{id}/history"),
        ("POST", "/runs/{id}/signals/{name}"),
        ("POST", "/runs/{id}/cancel"),
        ("POST", "/runs/{id}/pause"),
        ("POST", "/runs/{id}/resume"),
        ("POST", "/runs/{id}/retry"),
        ("POST", "/runs/{id}/fork"),
        ("POST", "/runs/cancel"),
        ("POST", "/runs/retry"),
        ("GET", "/runs/{id}/values"),
        ("GET", "/runs/{id}/values/{name}"),
        ("GET", "/runs/{id}/streams/{key}"),
        ("POST", "/runs/{id}/updates/{name}"),
        ("GET", "/subscriptions"),
        ("GET", "/messages"),
        ("POST", "/messages/{message_id}/retry"),
        ("DELETE", "/messages/{message_id}"),
        ("GET", "/schedules"),
        ("POST", "/schedules/{id}/pause"),
        ("POST", "/schedules/{id}/resume"),
        ("POST", "/callbacks/{token}"),
        ("POST", "/callbacks/{token}/fail"),
        ("GET", "/tasks"),
        ("GET", "/tasks/{id}"),
        ("POST", "/tasks/{id}/complete"),
        ("GET", "/healthz"),
        ("GET", "/openapi.json"),
        ("GET", "/"),
    }
    assert documented == served == expected
    schemas = doc["components"]["schemas"]

    def resolve(node: Any) -> None:  # every $ref points at a schema that exists
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref is not None:
                assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas
            for value in node.values():
                resolve(value)
        elif isinstance(node, list):
            for value in node:
                resolve(value)

    resolve(doc)
    bodies = {"/events": "PublishRequest", "/messages": "CorrelateRequest", "/runs": "StartRequest"}
    for path, name in bodies.items():
        body = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{name}"}
    assert set(schemas["PublishRequest"]["required"]) == {"name"}
    assert set(schemas["CorrelateRequest"]["required"]) == {"name", "key"}
    assert set(schemas["StartRequest"]["properties"]) == {
        "workflow",
        "input",
        "id",
        "subject",
        "domain",
        "priority",
        "timeout",
    }
    assert "requestBody" in doc["paths"]["/runs/{id}/signals/{name}"]["post"]
    params = {p["name"] for p in doc["paths"]["/runs"]["get"]["parameters"]}
    assert params == {
        "workflow",
        "status",
        "subject",
        "domain",
        "limit",
        "search",
        "parent_id",
        "created_after",
        "created_before",
        "before",
    }
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            assert any(c.startswith("2") for c in codes), (method, path)
            public = path == "/healthz" or path.startswith("/callbacks/")
            assert ("401" in codes) == (not public), (method, path)
            if "requestBody" in op:
                assert {"413", "422"} <= codes, (method, path)
            if "{id}" in path:
                assert "404" in codes, (method, path)
    assert "409" in doc["paths"]["/runs/{id}/signals/{name}"]["post"]["responses"]
    assert "409" in doc["paths"]["/messages"]["post"]["responses"]
    retry = doc["paths"]["/messages/{message_id}/retry"]["post"]
    assert {"404", "409", "422"} <= set(retry["responses"])
    assert retry["parameters"][0]["schema"]["type"] == "integer"


async def test_the_dashboard_is_one_self_contained_page(client: httpx.AsyncClient) -> None:
    response = await client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "connect-src 'self'" in response.headers["content-security-policy"]
    page = response.text
    assert "<script>" in page and "</html>" in page
    # Nothing is fetched from elsewhere: no CDN, no web font, no external script or style.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert not re.search(r"""url\(\s*["']?(https?:)?//|@import""", page)
    assert not re.search(r"""fetch\(\s*["'`]https?:""", page)
    for route in ("/runs", "/events", "/messages", "/subscriptions", "/signals/", "/cancel"):
        assert route in page, route
    assert "sessionStorage" in page


# -- the real server -----------------------------------------------------------------------------
