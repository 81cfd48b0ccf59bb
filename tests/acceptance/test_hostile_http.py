"""Hostile input over HTTP, on every backend: a 4xx naming the field (422), the
route (404/405), the media type (415), the size (413) or the Host (400), never a
500 or a misleading 503, and the server answers on afterwards.

The tests here call the ASGI app in-process; those about connections (413 to a
blocking client, the Host check and the start-up warning of ``parkway serve``)
run the real server in a subprocess, in tests/system/test_hostile_http.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx

from parkway import Engine
from parkway.http import create_app
from parkway.http.openapi import openapi_document
from parkway.limits import (
    MAX_DEPTH,
    MAX_DURATION_SECONDS,
    MAX_ID_LENGTH,
    MAX_KEY_LENGTH,
    MAX_NAME_LENGTH,
)

from .test_hostile import nested
from .test_http import register
from .test_http_errors import locs, nothing_written, refused


@pytest.fixture
async def client(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    register(engine)
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as c:
        yield c


DEEP = "__deep__"


def body(data: Any, depth: int = 0) -> dict[str, Any]:
    """Keyword arguments for a JSON body as sent (NUL escaped as \u0000), where
    the string ``DEEP`` stands for a list ``depth`` levels deep."""
    text = json.dumps(data).replace(f'"{DEEP}"', "[" * depth + "0" + "]" * depth)
    return {"content": text, "headers": {"content-type": "application/json"}}


async def works(client: httpx.AsyncClient, engine: Engine) -> None:
    started = await client.post("/runs", json={"workflow": "approval", "input": 1})
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    await engine.idle()
    assert (await client.post(f"/runs/{run_id}/signals/approve", json="ok")).status_code == 202
    await engine.idle()
    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "completed"


# -- nesting -------------------------------------------------------------------------------------


async def test_payloads_at_the_depth_limit_are_taken(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    deepest = nested(MAX_DEPTH)
    started = await client.post("/runs", **body({"workflow": "approval", "input": deepest}))
    run_id = started.json()["id"]
    await engine.idle()
    assert (await client.get(f"/runs/{run_id}")).json()["input"] == deepest
    # The output ({"input": ..., "decision": ...}) is one level more than the signal.
    decision = nested(MAX_DEPTH - 1)
    assert (await client.post(f"/runs/{run_id}/signals/approve", **body(decision))).is_success
    await engine.idle()
    run = (await client.get(f"/runs/{run_id}")).json()
    assert run["status"] == "failed" and "nested deeper" in run["error"]["message"]
    again = await client.post("/runs", **body({"workflow": "approval", "input": 1}))
    await engine.idle()
    again_id = again.json()["id"]
    await client.post(f"/runs/{again_id}/signals/approve", **body(decision))
    await engine.idle()
    done = (await client.get(f"/runs/{again_id}")).json()
    assert done["status"] == "completed" and done["output"]["decision"] == decision
    assert (await client.get("/runs")).status_code == 200
    assert (await client.get(f"/runs/{run_id}/history")).status_code == 200
    event = {"name": "order.created", "payload": deepest}
    assert (await client.post("/events", **body(event))).status_code == 200
    message = {"name": "credit.score", "key": "k", "payload": deepest}
    assert (await client.post("/messages", **body(message))).json()["outcome"] == "buffered"
    assert (await client.get("/messages")).json()[0]["payload"] == deepest


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 253, 254, 255, 256, 1_000])
async def test_payloads_past_the_depth_limit_are_422_naming_the_field(
    client: httpx.AsyncClient, engine: Engine, depth: int
) -> None:
    await client.post("/runs", json={"workflow": "approval", "id": "r1"})
    await engine.idle()
    for path, data, loc in [
        ("/events", {"name": "order.created", "payload": DEEP}, ["body", "payload"]),
        ("/messages", {"name": "signup", "key": "k", "payload": DEEP}, ["body", "payload"]),
        ("/runs", {"workflow": "approval", "input": DEEP}, ["body", "input"]),
    ]:
        response = await client.post(path, **body(data, depth))
        [error] = refused(response, 422)["detail"]
        assert error["loc"][: len(loc)] == loc, path
        assert f"nested deeper than {MAX_DEPTH} levels" in error["msg"], path
    signal = await client.post("/runs/r1/signals/approve", **body(DEEP, depth))
    [error] = refused(signal, 422)["detail"]
    assert error["loc"][0] == "body" and "nested deeper" in error["msg"]
    assert [r["id"] for r in (await client.get("/runs")).json()] == ["r1"]
    await works(client, engine)


async def test_json_nested_past_what_the_parser_reads_is_422(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    for path in ("/events", "/messages", "/runs"):
        response = await client.post(
            path,
            content=b'{"payload": ' + deep + b"}",
            headers={"content-type": "application/json"},
        )
        assert locs(response) == [["body"]], path
    await nothing_written(engine)
    await works(client, engine)


# -- values --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"NaN", b"Infinity", b"-Infinity", b"1e400", b'"\\ud800"', b'{"\\udfff": 1}'],
    ids=["nan", "infinity", "-infinity", "1e400", "surrogate", "surrogate-key"],
)
async def test_json_values_the_parser_refuses_are_422(
    client: httpx.AsyncClient, engine: Engine, raw: bytes
) -> None:
    content = b'{"name": "order.created", "payload": ' + raw + b"}"
    headers = {"content-type": "application/json"}
    assert locs(await client.post("/events", content=content, headers=headers)) == [["body"]]
    await nothing_written(engine)


async def test_huge_and_negative_numbers_round_trip(client: httpx.AsyncClient) -> None:
    numbers = {"max": 2**64 - 1, "min": -(2**63), "neg": -1.5e308, "tiny": 5e-324, "zero": -0.0}
    created = await client.post("/runs", json={"workflow": "approval", "id": "n", "input": numbers})
    assert created.status_code == 201
    assert (await client.get("/runs/n")).json()["input"] == numbers


async def test_nul_inside_a_payload_is_data(client: httpx.AsyncClient, engine: Engine) -> None:
    text = "a\x00b\nc\u2028d"
    ok = await client.post("/runs", **body({"workflow": "approval", "id": "t", "input": text}))
    assert ok.status_code == 201, ok.text
    assert (await client.get("/runs/t")).json()["input"] == text


# -- fields --------------------------------------------------------------------------------------

TOO_LONG = {
    "id": "i" * (MAX_ID_LENGTH + 1),
    "name": "n" * (MAX_NAME_LENGTH + 1),
    "key": "k" * (MAX_KEY_LENGTH + 1),
}
BAD_FIELDS: list[tuple[str, dict[str, Any], list[Any], str]] = [
    ("/runs", {"workflow": "approval", "id": TOO_LONG["id"]}, ["body", "id"], "at most 255"),
    ("/runs", {"workflow": "approval", "id": "x" * 10_000}, ["body", "id"], "at most 255"),
    ("/runs", {"workflow": "approval", "subject": "s" * 129}, ["body", "subject"], "at most 128"),
    ("/runs", {"workflow": "approval", "domain": "d" * 129}, ["body", "domain"], "at most 128"),
    ("/runs", {"workflow": TOO_LONG["name"]}, ["body", "workflow"], "at most 128"),
    ("/runs", {"workflow": "approval", "id": "a\x00b"}, ["body", "id"], "NUL"),
    ("/runs", {"workflow": "approval", "id": "a\nb"}, ["body", "id"], "control character"),
    ("/runs", {"workflow": "approval", "subject": "\x7f"}, ["body", "subject"], "control"),
    ("/runs", {"workflow": "approval", "domain": "a\x85"}, ["body", "domain"], "control"),
    ("/runs", {"workflow": "\u3000"}, ["body", "workflow"], "blank"),
    ("/events", {"name": TOO_LONG["name"]}, ["body", "name"], "at most 128"),
    ("/events", {"name": "x", "id": TOO_LONG["id"]}, ["body", "id"], "at most 255"),
    ("/events", {"name": "x\x00"}, ["body", "name"], "NUL"),
    ("/events", {"name": "x", "subject": "s\x00"}, ["body", "subject"], "NUL"),
    ("/messages", {"name": "m", "key": TOO_LONG["key"]}, ["body", "key"], "at most 128"),
    ("/messages", {"name": "m", "key": "k\x00"}, ["body", "key"], "NUL"),
    ("/messages", {"name": "m", "key": "k", "message_id": "\x00"}, ["body", "message_id"], "NUL"),
    ("/messages", {"name": "m", "key": "k", "ttl": "36526d"}, ["body", "ttl"], "100 years"),
    ("/messages", {"name": "m", "key": "k", "ttl": 1e20}, ["body", "ttl"], "100 years"),
    ("/messages", {"name": "m", "key": "k", "ttl": 10**30}, ["body", "ttl"], "100 years"),
    ("/messages", {"name": "m", "key": "k", "ttl": "99999999d"}, ["body", "ttl"], "100 years"),
    ("/messages", {"name": "m", "key": "k", "ttl": "٣s"}, ["body", "ttl"], "not a duration"),
    ("/messages", {"name": "m", "key": "k", "ttl": ""}, ["body", "ttl"], "not a duration"),
    ("/messages", {"name": "m", "key": "k", "ttl": "1e3s"}, ["body", "ttl"], "not a duration"),
]


@pytest.mark.parametrize(
    ("path", "data", "loc", "says"),
    BAD_FIELDS,
    ids=[f"{path}-{loc[-1]}-{says}" for path, _, loc, says in BAD_FIELDS],
)
async def test_fields_past_their_limits_are_422_naming_them(
    client: httpx.AsyncClient, engine: Engine, path: str, data: Any, loc: list[Any], says: str
) -> None:
    response = await client.post(path, **body(data))
    [error] = refused(response, 422)["detail"]
    assert error["loc"] == loc
    assert says in error["msg"], error
    await nothing_written(engine)


async def test_fields_at_their_limits_are_taken(client: httpx.AsyncClient, engine: Engine) -> None:
    run_id, subject = "🆔" * MAX_ID_LENGTH, "🐚" * 128
    created = await client.post(
        "/runs",
        json={"workflow": "approval", "id": run_id, "subject": subject, "domain": "d" * 128},
    )
    assert created.status_code == 201, created.text
    assert (await client.get(f"/runs/{run_id}")).json()["subject"] == subject
    message = {"name": "n" * 128, "key": "k" * 128, "message_id": "m" * 255, "ttl": "36525d"}
    assert (await client.post("/messages", json=message)).json()["outcome"] == "buffered"
    longest = {"name": "m", "key": "k", "ttl": MAX_DURATION_SECONDS}
    assert (await client.post("/messages", json=longest)).json()["outcome"] == "buffered"
    assert len((await client.get("/messages")).json()) == 2
    assert (await client.get("/subscriptions")).status_code == 200


# -- paths ---------------------------------------------------------------------------------------

REACHABLE_IDS = ["a/history", "a/cancel", "a/signals/x", "100%", "%2F", "a%b", "a b", "ü/🦜", "?#"]


@pytest.mark.parametrize("run_id", REACHABLE_IDS)
async def test_every_id_that_can_be_created_is_reachable_on_every_route(
    client: httpx.AsyncClient, engine: Engine, run_id: str
) -> None:
    from urllib.parse import quote

    assert (await client.post("/runs", json={"workflow": "approval", "id": run_id})).is_success
    await engine.idle()
    path = "/runs/" + quote(run_id, safe="")
    assert (await client.get(path)).json()["id"] == run_id
    assert [h["name"] for h in (await client.get(path + "/history")).json()] == ["approve"]
    signalled = await client.post(path + "/signals/" + quote("approve", safe=""), json=run_id)
    assert signalled.json() == {"id": run_id, "signal": "approve"}
    await engine.idle()
    assert (await client.get(path)).json()["output"]["decision"] == run_id
    assert (await client.post(path + "/cancel")).json() == {"id": run_id}
    assert [r["id"] for r in (await client.get("/runs")).json()] == [run_id]


@pytest.mark.parametrize("raw", ["%00", "a%0Ab", "%7F", "%C2%85", "%FF", "%ED%A0%80"])
async def test_a_path_id_no_run_can_have_is_422(
    client: httpx.AsyncClient, engine: Engine, raw: str
) -> None:
    for method, path in [
        ("GET", f"/runs/{raw}"),
        ("GET", f"/runs/{raw}/history"),
        ("POST", f"/runs/{raw}/cancel"),
        ("POST", f"/runs/{raw}/signals/x"),
        ("POST", f"/runs/r/signals/{raw}"),
    ]:
        response = await client.request(method, path)
        [error] = refused(response, 422)["detail"]
        assert error["loc"][0] == "path", (method, path)
    await nothing_written(engine)


async def test_a_post_to_a_run_path_without_such_a_route_is_405(client: httpx.AsyncClient) -> None:
    for path in ("/runs/x", "/runs/x/history", "/runs/x/signals"):
        response = await client.post(path)
        refused(response, 405)
        assert "GET" in response.headers["allow"]


@pytest.mark.parametrize(
    "raw", ["٣", "²", "-1", "1.0", "0x1", "1e3", " 1", "9" * 30, str(2**63), str(2**64)]
)
async def test_message_ids_are_ascii_digits_and_none_is_found_past_64_bits(
    client: httpx.AsyncClient, engine: Engine, raw: str
) -> None:
    from urllib.parse import quote

    await client.post("/messages", json={"name": "m", "key": "k"})
    [kept] = (await client.get("/messages")).json()
    for method, path in [("DELETE", "/messages/{}"), ("POST", "/messages/{}/retry")]:
        response = await client.request(method, path.format(quote(raw, safe="")))
        if raw.isascii() and raw.isdigit():
            assert refused(response, 404)["error"] == "MessageNotFoundError", (method, raw)
        else:
            assert response.status_code in (404, 405, 422), (method, raw, response.text)
            if response.status_code == 422:
                assert locs(response) == [["path", "message_id"]]
    assert (await client.get("/messages")).json() == [kept]


# -- media types ---------------------------------------------------------------------------------

BODY_ROUTES = [
    ("POST", "/events", b'{"name": "order.created", "payload": {}}'),
    ("POST", "/messages", b'{"name": "signup", "key": "k"}'),
    ("POST", "/runs", b'{"workflow": "approval", "id": "x"}'),
    ("POST", "/runs/x/signals/approve", b'"yes"'),
    ("POST", "/runs/x/cancel", b""),
    ("POST", "/runs/x/pause", b""),
    ("POST", "/runs/x/resume", b""),
    ("POST", "/runs/x/retry", b""),
    ("POST", "/runs/cancel", b'{"all": true}'),
    ("POST", "/runs/retry", b'{"all": true}'),
    ("POST", "/messages/1/retry", b"{}"),
    ("DELETE", "/messages/1", b""),
]


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "text/json",
        "application/jsonx",
        "",
    ],
)
async def test_a_body_that_is_not_sent_as_json_is_415(
    client: httpx.AsyncClient, engine: Engine, content_type: str
) -> None:
    await client.post("/runs", json={"workflow": "approval", "id": "x"})
    await engine.idle()
    for method, path, content in BODY_ROUTES:
        response = await client.request(
            method, path, content=content, headers={"content-type": content_type}
        )
        assert "application/json" in refused(response, 415)["detail"], path
    assert [r["status"] for r in (await client.get("/runs")).json()] == ["parked"]
    assert (await client.get("/messages")).json() == []


async def test_a_browser_must_say_its_body_is_json(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    # A cross-site page can POST without a Content-Type (a Blob), with no CORS
    # preflight; the browser says where it comes from.
    await client.post("/runs", json={"workflow": "approval", "id": "x"})
    await engine.idle()
    for origin in (
        {"origin": "https://evil.example"},
        {"origin": "null"},
        {"sec-fetch-site": "cross-site"},
    ):
        for method, path, content in BODY_ROUTES:
            response = await client.request(method, path, content=content, headers=origin)
            refused(response, 415)
    # A script (no Origin) may leave the Content-Type out; a browser may say JSON.
    assert (await client.post("/runs/x/signals/approve", content=b'"yes"')).status_code == 202
    await engine.idle()
    as_json = {"origin": "http://parkway.test", "content-type": "application/json; charset=utf-8"}
    created = await client.post("/runs", content=b'{"workflow": "approval"}', headers=as_json)
    assert created.status_code == 201, created.text


# -- the Host header -----------------------------------------------------------------------------


async def test_an_app_given_its_hosts_refuses_others(engine: Engine) -> None:
    register(engine)
    app = create_app(engine, api_token="", allowed_hosts={"parkway.internal"})
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.internal") as c:
        assert (await c.get("/runs")).status_code == 200
        for host in (
            "127.0.0.1:8000",
            "localhost",
            "[::1]:8000",
            "10.1.2.3",
            "PARKWAY.internal.",
            "app.localhost",
        ):
            assert (await c.get("/runs", headers={"host": host})).status_code == 200, host
        for host in ("evil.example", "parkway.internal.evil.example", "127.0.0.1.nip.io"):
            response = await c.post("/runs", json={"workflow": "approval"}, headers={"host": host})
            assert "--allow-host" in refused(response, 400)["detail"], host
            assert (await c.get("/", headers={"host": host})).status_code == 400
        # Health probes come by whatever name the balancer knows.
        assert (await c.get("/healthz", headers={"host": "evil.example"})).status_code == 200
    assert await engine.list_runs() == []


# -- the real server -----------------------------------------------------------------------------


# -- the document --------------------------------------------------------------------------------


def test_the_document_lists_every_status_a_route_answers() -> None:
    doc = openapi_document()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            if method in ("post", "delete"):
                assert {"400", "413", "415", "422"} <= codes, (method, path)
            if path not in ("/", "/openapi.json"):
                assert "503" in codes, (method, path)
            if "{" in path:
                assert "422" in codes, (method, path)
    page = doc["paths"]["/"]["get"]["responses"]
    assert set(page["200"]["content"]) == set(page["401"]["content"]) == {"text/html"}


NAME_SAMPLES = [
    "approval",
    "a b",
    " x ",
    "🦜",
    "",
    " ",
    "\u3000",
    "a\x00",
    "a\nb",
    "\x7f",
    "x" * 128,
]


@pytest.mark.parametrize("value", NAME_SAMPLES, ids=repr)
async def test_the_documented_patterns_take_what_the_server_takes(
    client: httpx.AsyncClient, value: str
) -> None:
    schema = openapi_document()["components"]["schemas"]["PublishRequest"]["properties"]["name"]
    documented = re.search(schema["pattern"], value) is not None and 1 <= len(value) <= 128
    response = await client.post("/events", **body({"name": value}))
    assert (response.status_code == 200) is documented, (value, response.text)
    ttl = openapi_document()["components"]["schemas"]["CorrelateRequest"]["properties"]["ttl"]
    pattern = ttl["anyOf"][1]["pattern"]
    for duration in ("10s", " 1.5h ", "٣s", "", "1e3s", "3S", "36525d"):
        taken = await client.post("/messages", json={"name": "m", "key": "k", "ttl": duration})
        assert (taken.status_code == 200) is bool(re.search(pattern, duration)), duration


@pytest.mark.parametrize("raw", ["%00", "a%0Ab", "%7F", "%C2%9F"])
async def test_a_filter_no_value_can_match_is_422_not_a_store_error(
    client: httpx.AsyncClient, raw: str
) -> None:
    for url, param in [
        (f"/runs?subject={raw}", "subject"),
        (f"/runs?workflow={raw}", "workflow"),
        (f"/runs?domain={raw}", "domain"),
        (f"/subscriptions?run_id={raw}", "run_id"),
        (f"/subscriptions?name={raw}", "name"),
    ]:
        assert locs(await client.get(url)) == [["query", param]], url
    long = "x" * 10_000  # a filter may be longer than an id given (composed ids are)
    assert (await client.get(f"/runs?subject={long}")).json() == []
    assert (await client.get(f"/subscriptions?run_id={long}")).json() == []
