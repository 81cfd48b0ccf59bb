"""Hostile input at every edge (the Python API, the command line, HTTP), on every backend: each
call answers within its timeout with a result or a ``ParkwayError`` naming what is wrong (a
4xx over HTTP, a clean error and a non-zero exit from the CLI), never another exception, a
hang or a 5xx; what is taken comes back unchanged; the store works on afterwards.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_hostile_inputs.py.
"""

from __future__ import annotations

import http.client
import socket
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx


def raw_request(port: int, head: bytes, body: bytes = b"", *, read: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + body)
        if not read:
            return b""
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_the_server_logs_no_traceback_for_cut_bodies_or_4xx(serving: Any) -> None:
    server = serving("--log-level", "info")
    # Less body than announced, then the client goes away.
    for _ in range(3):
        head = (
            b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n"
        )
        raw_request(server.port, head, b'{"workflow": "appr', read=True)
    # Every kind of 4xx.
    with httpx.Client(base_url=server.url, timeout=30) as http_client:
        for method, path, content in [
            ("POST", "/runs", b'{"workflow": "approval", "input": 12345678901234567890123}'),
            ("POST", "/runs", b"{"),
            ("GET", "/runs?created_before=0.5", b""),
            ("GET", "/runs/nope", b""),
            ("GET", "/nowhere", b""),
            ("DELETE", "/runs", b""),
            ("POST", "/runs/x/signals/a%00b", b"1"),
        ]:
            response = http_client.request(
                method, path, content=content, headers={"content-type": "application/json"}
            )
            assert 400 <= response.status_code < 500, (path, response.text)
        assert http_client.get("/healthz").status_code == 200


def _blocking_post(port: int, size: int, *, chunked: bool = False) -> int:
    """A client that sends all of its body before it reads (as urllib does)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"}
        if chunked:
            body: Any = (b"x" * 1024 * 1024 for _ in range(size // (1024 * 1024)))
            connection.request("POST", "/runs", body=body, headers=headers, encode_chunked=True)
        else:
            connection.request("POST", "/runs", body=b"x" * size, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_body_of_any_size_gets_a_413_the_client_can_read(serving: Any) -> None:
    server = serving()
    for size in (2 * 1024 * 1024, 40 * 1024 * 1024):
        assert _blocking_post(server.port, size) == 413
        assert _blocking_post(server.port, size, chunked=True) == 413
    # A client that waits for "100 Continue" gets the 413 and sends nothing.
    head = (
        b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: 1000000000\r\n\r\n"
    )
    answer = raw_request(server.port, head)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    with httpx.Client(base_url=server.url, timeout=30) as http_client:
        created = http_client.post("/runs", json={"workflow": "approval"})
        assert created.status_code == 201, created.text
