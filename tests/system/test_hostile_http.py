"""Hostile input over HTTP, on every backend: a 4xx naming the field (422), the route
(404/405), the media type (415), the size (413) or the Host (400), never a 500 or a
misleading 503, and the server answers on afterwards.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_hostile_http.py.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx


def _post(url: str, data: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _paused_post(port: int, path: str, data: bytes, headers: dict[str, str] | None = None) -> int:
    """POST the headers, then (a moment later) the body; the answer's status."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest("POST", path)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(data)))
        connection.endheaders()
        time.sleep(0.2)
        connection.send(data)
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_blocking_client_sending_2_mib_sees_the_413_every_time(serving: Any) -> None:
    server = serving()
    big = b'{"workflow": "approval", "input": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    headers = {"Content-Type": "application/json"}
    for attempt in range(20):
        status, answer = _post(f"{server.url}/runs", big, headers)
        assert status == 413, (attempt, answer)
        assert "1 MiB" in answer["detail"]
    # A client that sends its headers, then the body a moment later: an answer given
    # before reading the body, and the connection closed, would reset it mid-send.
    for _ in range(3):
        assert _paused_post(server.port, "/runs", big) == 413
    # Early answers of every kind wait for the body too: unknown route, the signal route.
    for path in ("/nowhere", "/runs/r1/signals/x"):
        status, _ = _post(server.url + path, big, headers)
        assert status in (404, 413), path
    # Sent in chunks, with no length announced.
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    chunks = (b"x" * 65536 for _ in range(32))
    connection.request("POST", "/runs", body=chunks, headers=headers, encode_chunked=True)
    assert connection.getresponse().status == 413
    connection.close()
    status, created = _post(f"{server.url}/runs", b'{"workflow": "approval"}', headers)
    assert status == 201, created


def test_a_blocking_client_without_the_token_sees_the_401(serving: Any) -> None:
    server = serving(env={"PARKWAY_API_TOKEN": "t0ken"})
    big = b"[" + b"1," * (1024 * 1024) + b"1]"
    for _ in range(5):
        status, answer = _post(f"{server.url}/events", big, {"Content-Type": "application/json"})
        assert status == 401, answer
    assert _paused_post(server.port, "/events", big) == 401
    assert _paused_post(server.port, "/events", big, {"Authorization": "Bearer t0ken"}) == 413


def test_serve_answers_only_its_own_host_names(serving: Any) -> None:
    server = serving()
    with httpx.Client(base_url=server.url, timeout=10) as c:
        assert c.get("/runs").status_code == 200
        assert c.get("/runs", headers={"host": f"localhost:{server.port}"}).status_code == 200
        rebound = c.get("/runs", headers={"host": f"evil.example:{server.port}"})
        assert rebound.status_code == 400 and "--allow-host" in rebound.json()["detail"]
        assert c.get("/healthz", headers={"host": "evil.example"}).status_code == 200
    named = serving("--allow-host", "parkway.internal")
    with httpx.Client(base_url=named.url, timeout=10) as c:
        assert c.get("/runs", headers={"host": "parkway.internal"}).status_code == 200
        assert c.get("/runs", headers={"host": "evil.example"}).status_code == 400
    anything = serving("--allow-host", "*")
    with httpx.Client(base_url=anything.url, timeout=10) as c:
        assert c.get("/runs", headers={"host": "evil.example"}).status_code == 200


def test_serve_warns_when_anyone_on_the_network_may_steer_it(serving: Any) -> None:
    exposed = serving("--host", "0.0.0.0")
    assert "warning: listening on every interface with no PARKWAY_API_TOKEN" in exposed.stderr
    guarded = serving("--host", "0.0.0.0", env={"PARKWAY_API_TOKEN": "t0ken"})
    local = serving()
    for server in (guarded, local):
        assert "warning" not in server.stderr, server.stderr
    with httpx.Client(timeout=10) as c:  # reached through the loopback address all the same
        assert c.get(f"http://127.0.0.1:{exposed.port}/runs").status_code == 200
    # A warning in the logs' own terms: at WARNING, where log shippers filter for it.
    logged = serving("--host", "0.0.0.0", "--log-format", "json")
    lines = [json.loads(line) for line in logged.stderr.splitlines() if line.startswith("{")]
    [warning] = [line for line in lines if "no PARKWAY_API_TOKEN" in str(line)]
    assert warning["level"] == "WARNING", warning
