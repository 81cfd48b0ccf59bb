"""A run's streams, through the public API on every backend: written from the workflow's body
(journaled, exactly once, also across a worker's SIGKILL) and from a step (at once, at least
once, with its attempt), read without waiting or followed live, over HTTP as Server-Sent
Events (against a real ``parkway serve`` too) or JSON, and refused at the edge when
malformed.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_streams.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from parkway import (
    Engine,
    StreamItem,
)
from tests.helpers import APPS


class Process:
    """A ``python -m parkway ...`` subprocess on ``streams_app``, its stderr in a file."""

    def __init__(self, tmp_path: Path, url: str, *args: str, env: dict[str, str]) -> None:
        self.stderr_path = tmp_path / f"{args[0]}-{time.monotonic_ns()}.stderr"
        full_env = {k: v for k, v in os.environ.items() if k != "PARKWAY_API_TOKEN"}
        full_env.update(PARKWAY_URL=url, **env)
        import subprocess

        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "parkway", *args],
                cwd=APPS,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.kill()


@pytest.mark.requires("shared")
async def test_body_writes_are_exactly_once_across_a_worker_sigkill(
    make_engine: Any, engine_url: str, tmp_path: Path, processes: list[Process]
) -> None:
    client: Engine = await make_engine(worker=False, clock=None)
    hold = tmp_path / "hold"
    hold.touch()
    env = {"STREAMS_HOLD": str(hold)}
    first = Process(tmp_path, engine_url, "worker", "streams_app:engine", "--lease", "1", env=env)
    processes.append(first)
    h = await client.start("chunks", id="crashing")
    reader = h.stream("out")
    seen: list[StreamItem] = []
    # Items 0-4 commit before the step runs; the step then holds: the worker dies in it.
    async with asyncio.timeout(30):
        async for item in reader:
            seen.append(item)
            if item.offset == 4:
                break
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    hold.unlink()
    # Another worker takes the run over once the lease expires and replays its body:
    # the items journaled before the kill are not written again.
    processes.append(Process(tmp_path, engine_url, "worker", "streams_app:engine", env=env))
    async with asyncio.timeout(30):
        seen += [item async for item in h.stream("out", offset=5)]
    assert await h.result(timeout=30) == "done", processes[-1].stderr
    assert [(i.offset, i.value, i.attempt) for i in seen] == [(k, k, None) for k in range(10)]
    assert [i.value for i in await h.read_stream("out")] == list(range(10))


async def test_sse_resumes_by_last_event_id_against_parkway_serve(
    engine_url: str, tmp_path: Path, processes: list[Process]
) -> None:
    import httpx

    from tests.helpers import free_port

    port = free_port()
    server = Process(
        tmp_path,
        engine_url,
        "serve",
        "streams_app:engine",
        "--port",
        str(port),
        "--log-level",
        "warning",
        env={},
    )
    processes.append(server)
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        deadline = time.monotonic() + 30
        while True:
            assert server.proc.poll() is None, server.stderr
            try:
                if (await http.get("/healthz")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, server.stderr
            await asyncio.sleep(0.05)
        created = await http.post("/runs", json={"workflow": "paced", "input": 3})
        run_id = created.json()["id"]
        url = f"/runs/{run_id}/streams/out"

        async def events(headers: dict[str, str]) -> AsyncIterator[dict[str, str]]:
            async with http.stream("GET", url, headers=headers) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                fields: dict[str, str] = {}
                async for line in response.aiter_lines():
                    if line == "" and fields:
                        yield fields
                        fields = {}
                    elif line and not line.startswith(":"):
                        name, _, value = line.partition(":")
                        fields[name] = value.removeprefix(" ")

        # The first connection sees item 0 live, then drops (the run waits meanwhile).
        async with asyncio.timeout(20):
            async for event in events({"Accept": "text/event-stream"}):
                assert event["id"] == "0"
                assert json.loads(event["data"])["value"] == {"k": 0}
                break
            last = "0"
            await http.post(f"/runs/{run_id}/signals/next", json=None)
            got: list[str] = []
            # Resumed after the last id it saw: item 1 and on, never item 0 again.
            async for event in events({"Last-Event-ID": last}):
                if event.get("event") == "end":
                    assert json.loads(event["data"]) == {"offset": 3}
                    break
                got.append(event["id"])
                assert json.loads(event["data"])["value"] == {"k": int(event["id"])}
                if event["id"] == "1":
                    await http.post(f"/runs/{run_id}/signals/next", json=None)
        assert got == ["1", "2"]
        # The stream was closed: a resume past its end gets no events.
        ended = await http.get(url, headers={"Last-Event-ID": "2"})
        assert ended.status_code in (200, 204)
        assert '"id"' not in ended.text and "id:" not in ended.text

        # A stream still open when the server is told to stop ends at once: the stop
        # does not wait out its grace period for it (the client reconnects elsewhere).
        created = await http.post("/runs", json={"workflow": "paced", "input": 2})
        url = f"/runs/{created.json()['id']}/streams/out"
        async with asyncio.timeout(20):
            async for event in events({}):
                assert event["id"] == "0"
                stopping = time.monotonic()
                server.proc.send_signal(signal.SIGTERM)
        assert time.monotonic() - stopping < 10
    assert server.proc.wait(timeout=20) == 0, server.stderr
    assert "Traceback" not in server.stderr
