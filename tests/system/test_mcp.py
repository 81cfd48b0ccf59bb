"""``parkway mcp APP``: the MCP SDK's own client against the server in a subprocess.

The server (stdio) and the test's engine share one SQLite store: each tool's
answer is checked against the Python API's, and the runs it starts or steers are
advanced by the test's worker. Bad arguments come back as tool errors naming the
field, and the server keeps serving.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from parkway import Engine, RunStatus
from parkway.integrations.mcp import TOOLS
from tests.helpers import APPS


def _load_app() -> Any:
    spec = importlib.util.spec_from_file_location("parkway_mcp_app", APPS / "mcp_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def mcp_session(url: str, tmp_path: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "parkway", "mcp", "mcp_app:engine", "--url", url],
        cwd=APPS,
    )
    with (tmp_path / "mcp.stderr").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    value = result.structured_content
    # A list comes wrapped as {"result": [...]} (a tool's output is an object).
    return value["result"] if isinstance(value, dict) and set(value) == {"result"} else value


async def error(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result
    return " ".join(getattr(block, "text", "") for block in result.content)


def plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    app = _load_app()
    app.engine.configure(url=f"sqlite:///{tmp_path / 'mcp.db'}")
    app.engine.run_worker = True
    async with app.engine:
        yield app.engine


async def test_every_tool_answers_as_the_python_api(engine: Engine, tmp_path: Path) -> None:
    async with mcp_session(engine.url, tmp_path) as session:
        listed = (await session.list_tools()).tools
        assert [t.name for t in listed] == list(TOOLS)
        schemas = {t.name: t.input_schema for t in listed}
        assert all(s["type"] == "object" for s in schemas.values())
        assert schemas["get_run"]["required"] == ["run_id"]
        assert schemas["list_runs"]["properties"]["limit"]["maximum"] == 1000

        # start, list_tasks, complete_task, get_run, history, list_runs
        started = await call(session, "start", workflow="refund", input=7, id="refund-7")
        assert started["id"] == "refund-7" and started["workflow"] == "refund"
        await engine.idle()
        [task] = await call(session, "list_tasks")
        assert task == plain((await engine.tasks())[0].to_dict())
        assert task["name"] == "approve-refund" and task["data"] == {"order": 7}
        done = await call(session, "complete_task", task_id=task["id"], result={"approved": True})
        assert done["status"] == "completed"
        assert await engine.handle("refund-7").result(timeout=10) == {"order": 7, "approved": True}
        assert await call(session, "get_run", run_id="refund-7") == plain(
            (await engine.get_run("refund-7")).to_dict()
        )
        assert await call(session, "history", run_id="refund-7") == plain(
            [e.to_dict() for e in await engine.history("refund-7")]
        )
        runs = await call(session, "list_runs", workflow="refund", status="completed")
        assert [r["id"] for r in runs] == ["refund-7"]

        # update, signal, publish, correlate
        handle = await engine.start("conversation", id="talk")
        await engine.idle()
        updated = await call(session, "update", run_id="talk", name="add", payload=5)
        assert updated == {"run_id": "talk", "update": "add", "result": 5}
        await call(session, "signal", run_id="talk", name="say", payload="hello")
        await engine.idle()
        published = await call(session, "publish", name="shipped", payload=1, subject="order:7")
        assert published["resumed"] == ["talk"]
        await engine.idle()
        correlated = await call(
            session, "correlate", name="invoice", key="inv-1", payload={"total": 3}
        )
        assert correlated["run_id"] == "talk"
        assert await handle.result(timeout=10) == {
            "said": "hello",
            "heard": 1,
            "message": {"total": 3},
            "total": 5,
        }

        # cancel
        await engine.start("forever", id="forever")
        cancelled = await call(session, "cancel", run_id="forever")
        assert cancelled["id"] == "forever"
        await engine.idle()
        assert (await engine.get_run("forever")).status == RunStatus.CANCELLED


async def test_a_bad_argument_is_a_tool_error_naming_the_field(
    engine: Engine, tmp_path: Path
) -> None:
    await engine.start("refund", 1, id="r1")
    await engine.idle()
    [task] = await engine.tasks()
    async with mcp_session(engine.url, tmp_path) as session:
        assert "run_id" in await error(session, "get_run", run_id=12)
        assert "run_id" in await error(session, "get_run")
        assert "limit" in await error(session, "list_runs", limit=0)
        assert "RunNotFoundError" in await error(session, "get_run", run_id="nope")
        message = await error(session, "complete_task", task_id=task.id, result={"note": "x"})
        assert "InvalidInputError" in message and "approved" in message
        assert "status" in await error(session, "list_runs", status="sleeping")
        assert "workflow" in await error(session, "start", workflow="")
        assert "run id" in await error(session, "start", workflow="refund", id="\x00")
        assert "NotFound" in await error(session, "complete_task", task_id="t-0", result={})
        # ... and the server serves on.
        assert (await call(session, "get_run", run_id="r1"))["status"] == "parked"
        await call(session, "complete_task", task_id=task.id, result={"approved": False})
    assert await engine.handle("r1").result(timeout=10) == {"order": 1, "approved": False}


def test_without_the_extra_the_command_names_it(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys
        sys.modules["mcp"] = None  # as if the extra were not installed
        from parkway.cli import main
        main(["mcp", "mcp_app:engine", "--url", sys.argv[1]])
    """)
    url = f"sqlite:///{tmp_path / 'x.db'}"
    Path(tmp_path / "x.db").touch()
    done = subprocess.run(
        [sys.executable, "-c", script, url], capture_output=True, text=True, cwd=APPS
    )
    assert done.returncode == 1
    assert "pip install 'parkway[mcp]'" in done.stderr


def test_http_needs_host_and_port(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "parkway", "mcp", "mcp_app:engine", "--http", "8765"],
        capture_output=True,
        text=True,
        cwd=APPS,
    )
    assert done.returncode == 2
    assert "HOST:PORT" in done.stderr


async def test_over_http_the_api_token_is_required(engine: Engine, tmp_path: Path) -> None:
    import asyncio
    import socket

    import httpx
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PARKWAY_API_TOKEN": "s3cret"}
    with (tmp_path / "http.stderr").open("wb") as err:
        proc = subprocess.Popen(  # noqa: ASYNC220 (started once; the test awaits its port)
            [
                sys.executable,
                "-m",
                "parkway",
                "mcp",
                "mcp_app:engine",
                "--url",
                engine.url,
                "--http",
                f"127.0.0.1:{port}",
            ],
            cwd=APPS,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(200):
                try:
                    refused = await client.post(url, json={})
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail((tmp_path / "http.stderr").read_text())
        assert refused.status_code == 401
        await engine.start("refund", 3, id="r3")
        headers = {"Authorization": "Bearer s3cret"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            assert (await call(session, "get_run", run_id="r3"))["id"] == "r3"
    finally:
        proc.terminate()
        proc.wait(10)
