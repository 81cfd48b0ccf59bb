"""Talking to the Restate stack: a minimal ingress client, and the SDK app's
announcements (which runs wait, on what). Part of the Restate adapter
(``benchmarks.peers.restate_bench``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any


class Announcements:
    """Reads ``key\\tawakeable-id`` lines that the SDK app appends; keeps the first per key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ids: dict[str, str] = {}
        self._offset = 0
        self._buffer = b""

    def poll(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return len(self.ids)
        self._offset += len(chunk)
        data = self._buffer + chunk
        lines = data.split(b"\n")
        self._buffer = lines.pop()  # an incomplete last line waits for the next poll
        for line in lines:
            key, _, ident = line.decode().partition("\t")
            self.ids.setdefault(key, ident)
        return len(self.ids)


class IngressClient:
    """A minimal HTTP/1.1 keep-alive client for the measured calls to the ingress.

    httpx costs about 1 ms of CPU per request here (a few hundred requests/s in this
    process on a 2-core machine, against ~10,000/s for this loop): the client would be the
    bottleneck, and would take its CPU from the server and the SDK it measures. httpx still
    does the unmeasured admin calls. One request per connection at a time; a connection
    that errs or times out is dropped, never reused.
    """

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def request(
        self, method: str, path: str, body: bytes = b"", timeout_s: float | None = None
    ) -> tuple[int, bytes]:
        async with asyncio.timeout(timeout_s if timeout_s is not None else self.timeout_s):
            if self._idle:
                conn = self._idle.pop()
            else:
                conn = await asyncio.open_connection(self.host, self.port)
            try:
                status, data, keep = await self._roundtrip(conn, method, path, body)
            except BaseException:
                conn[1].close()
                raise
        if keep:
            self._idle.append(conn)
        else:
            conn[1].close()
        return status, data

    async def _roundtrip(
        self,
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        method: str,
        path: str,
        body: bytes,
    ) -> tuple[int, bytes, bool]:
        reader, writer = conn
        # No content-type without a body: the ingress rejects one for a handler without input.
        typed = "content-type: application/json\r\n" if body else ""
        writer.write(
            f"{method} {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n{typed}"
            f"accept: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        status = int((await reader.readuntil(b"\r\n")).split()[1])
        length: int | None = None
        chunked = False
        keep = True
        while True:
            line = await reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                chunked = "chunked" in value
            elif name == "connection":
                keep = "close" not in value
        if chunked:
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":
                        pass  # trailers
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            return status, b"".join(parts), keep
        if length is None:
            return status, await reader.read(), False
        return status, await reader.readexactly(length), keep

    async def close(self) -> None:
        while self._idle:
            _, writer = self._idle.pop()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None
