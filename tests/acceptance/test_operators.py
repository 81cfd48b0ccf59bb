"""Who did what, on every backend: each control (pause, resume, cancel, retry,
update, and the bulk cancel and retry) takes ``by`` and leaves an ``operator`` entry
(``action``, ``by``, ``at``) in the run's history and an INFO log line; from the
command line ``by`` is the OS user, over HTTP the name of the API token
(``PARKWAY_API_TOKENS``); a bad ``by`` is refused, naming the field."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest
from click.testing import CliRunner

from parkway import (
    Engine,
    HistoryEntry,
    InvalidArgumentError,
    InvalidInputError,
    UpdateRejectedError,
)
from parkway.cli import cli


def _register(engine: Engine) -> dict[str, bool]:
    state = {"fail": True}

    @engine.workflow()
    async def approval(ctx: Any, input: Any) -> Any:
        ctx.on_update("note", lambda value: f"noted {value}")
        return await ctx.wait_for_signal("approve")

    @engine.workflow()
    async def fragile(ctx: Any, input: Any) -> Any:
        def call() -> str:
            if state["fail"]:
                raise ValueError("down")
            return "up"

        return await ctx.step(call, name="call")

    return state


def _operators(history: list[HistoryEntry]) -> list[tuple[str, str | None]]:
    out = []
    for entry in history:
        if entry.kind == "operator":
            assert entry.position == -1 and entry.status == "done" and entry.error is None
            assert entry.name == entry.result["action"]
            assert datetime.fromisoformat(entry.result["at"]) == entry.at
            out.append((entry.result["action"], entry.result["by"]))
    return out


async def test_every_control_records_who_asked(
    make_engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    engine = await make_engine()
    state = _register(engine)
    caplog.set_level(logging.INFO, logger="parkway.operators")
    run = await engine.start("approval", None, id="a1")
    await engine.idle()
    await engine.pause(run.id, by="alice")
    await engine.pause(run.id, by="alice")  # (paused already: nothing done, nothing recorded)
    await engine.resume(run.id, by="bob")
    assert await engine.update(run.id, "note", 1, by="carol") == "noted 1"
    await engine.cancel(run.id, by="dave")
    history = await engine.history(run.id)
    assert _operators(history) == [
        ("pause", "alice"),
        ("resume", "bob"),
        ("update", "carol"),
        ("cancel", "dave"),
    ]
    # Among the journal's entries, in time: after the wait the run parked on.
    assert history[0].kind == "signal"
    records = [r for r in caplog.records if r.name == "parkway.operators"]
    logged = [(r.__dict__["run_id"], r.__dict__["action"], r.__dict__["by"]) for r in records]
    assert logged == [
        ("a1", "pause", "alice"),
        ("a1", "resume", "bob"),
        ("a1", "update", "carol"),
        ("a1", "cancel", "dave"),
    ]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "parkway.operators")

    failing = await engine.start("fragile", None, id="f1")
    await engine.idle()
    await engine.retry(failing.id, by="erin")  # fails again
    await engine.idle()
    state["fail"] = False
    assert await engine.retry_runs(workflow="fragile", by="ops") == 1
    await engine.idle()
    assert _operators(await engine.history(failing.id)) == [("retry", "erin"), ("retry", "ops")]
    fork = await engine.fork(failing.id, by="frank")  # (recorded on the source run)
    await engine.idle()
    assert _operators(await engine.history(failing.id))[-1] == ("fork", "frank")
    assert _operators(await engine.history(fork.id)) == []
    parked = [await engine.start("approval", None, id=f"b{i}") for i in range(3)]
    await engine.idle()
    assert await engine.cancel_runs(workflow="approval", by="ops") == 3
    for handle in parked:
        assert _operators(await engine.history(handle.id)) == [("cancel", "ops")]
    # Without by: logged, but the history stays the journal's alone.
    quiet = await engine.start("approval", None, id="q1")
    await engine.idle()
    caplog.clear()
    await engine.pause(quiet.id)
    assert _operators(await engine.history(quiet.id)) == []
    assert [r.__dict__["by"] for r in caplog.records if r.name == "parkway.operators"] == [None]
    # An update the run refuses changes nothing: no entry.
    refusing = await engine.start("approval", None, id="r1")
    await engine.idle()
    with pytest.raises(UpdateRejectedError):
        await engine.update(refusing.id, "nope", 1, by="carol")
    assert _operators(await engine.history(refusing.id)) == []


@pytest.mark.parametrize("by", [5, "", "   ", "x" * 500, "a\nb"])
async def test_a_bad_by_is_refused_naming_the_field(make_engine: Any, by: Any) -> None:
    engine = await make_engine()
    _register(engine)
    run = await engine.start("approval", None, id="a1")
    await engine.idle()
    for control in (engine.pause, engine.resume, engine.cancel, engine.retry):
        with pytest.raises(InvalidInputError) as caught:
            await control(run.id, by=by)
        assert caught.value.field == "by"
    with pytest.raises(InvalidInputError):
        await engine.update(run.id, "note", 1, by=by)
    with pytest.raises(InvalidInputError):
        await engine.cancel_runs(workflow="approval", by=by)
    assert _operators(await engine.history(run.id)) == []
    assert not (await engine.get_run(run.id)).paused


@pytest.mark.requires("shared")
async def test_the_command_line_records_the_os_user(
    make_engine: Any, engine_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGNAME", "ola")  # (what getpass.getuser() reads first)
    engine = await make_engine(clock=None)  # (a worker beside the commands: the wall's time)
    state = _register(engine)

    async def parkway(*args: str) -> Any:
        result = await asyncio.to_thread(CliRunner().invoke, cli, [*args, "--url", engine_url])
        assert result.exit_code == 0, result.output
        return result.output

    run = await engine.start("approval", None, id="a1")
    failing = await engine.start("fragile", None, id="f1")
    await _until_status(engine, run.id, "parked")
    await _until_status(engine, failing.id, "failed")
    await parkway("pause", run.id)
    await parkway("resume", run.id)
    await parkway("update", run.id, "note", "2")
    await parkway("cancel", run.id)
    state["fail"] = False
    await parkway("retry", failing.id)
    await _until_status(engine, failing.id, "completed")
    others = [await engine.start("approval", None, id=f"b{i}") for i in range(2)]
    await _until_status(engine, others[-1].id, "parked")
    await parkway("cancel", "--workflow", "approval")
    assert _operators(await engine.history(run.id)) == [
        ("pause", "ola"),
        ("resume", "ola"),
        ("update", "ola"),
        ("cancel", "ola"),
    ]
    assert _operators(await engine.history(failing.id)) == [("retry", "ola")]
    for handle in others:
        assert _operators(await engine.history(handle.id)) == [("cancel", "ola")]
    shown = json.loads(await parkway("show", run.id))
    assert [e["result"]["by"] for e in shown["history"] if e["kind"] == "operator"] == ["ola"] * 4


async def _until_status(engine: Engine, run_id: str, status: str, timeout: float = 15) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while (await engine.get_run(run_id)).status != status:
        assert asyncio.get_running_loop().time() < deadline, await engine.get_run(run_id)
        await asyncio.sleep(0.02)


# -- over HTTP ---------------------------------------------------------------------------------

httpx = pytest.importorskip("httpx")


@pytest.fixture
async def served(engine: Engine) -> AsyncIterator[tuple[Engine, dict[str, bool]]]:
    yield engine, _register(engine)


def _client(app: Any) -> Any:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://parkway.test")


async def test_http_records_the_name_of_the_token(
    served: tuple[Engine, dict[str, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("starlette")
    from parkway.http import create_app

    engine, state = served
    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    monkeypatch.setenv("PARKWAY_API_TOKENS", "alice:tok1, bob:tok2")
    alice, bob = {"Authorization": "Bearer tok1"}, {"Authorization": "Bearer tok2"}
    async with _client(create_app(engine)) as http:
        run = await engine.start("approval", None, id="a1")
        failing = await engine.start("fragile", None, id="f1")
        await engine.idle()
        assert (await http.post(f"/runs/{run.id}/pause")).status_code == 401
        assert (
            await http.post(f"/runs/{run.id}/pause", headers={"Authorization": "Bearer x"})
        ).status_code == 401
        assert (await http.post(f"/runs/{run.id}/pause", headers=alice)).status_code == 200
        assert (await http.post(f"/runs/{run.id}/resume", headers=bob)).status_code == 200
        answer = await http.post(f"/runs/{run.id}/updates/note", json={"payload": 3}, headers=alice)
        assert answer.status_code == 200, answer.text
        assert (await http.post(f"/runs/{run.id}/cancel", headers=bob)).status_code == 202
        state["fail"] = False
        assert (await http.post(f"/runs/{failing.id}/retry", headers=alice)).status_code == 200
        await engine.idle()
        others = [await engine.start("approval", None, id=f"b{i}") for i in range(2)]
        await engine.idle()
        bulk = await http.post("/runs/cancel", json={"workflow": "approval"}, headers=bob)
        assert bulk.status_code == 200, bulk.text
        history = (await http.get(f"/runs/{run.id}/history", headers=alice)).json()
    assert [
        (e["result"]["action"], e["result"]["by"]) for e in history if e["kind"] == "operator"
    ] == [("pause", "alice"), ("resume", "bob"), ("update", "alice"), ("cancel", "bob")]
    assert _operators(await engine.history(failing.id)) == [("retry", "alice")]
    for handle in others:
        assert _operators(await engine.history(handle.id)) == [("cancel", "bob")]


async def test_http_names_the_single_token_api_and_no_token_nobody(
    served: tuple[Engine, dict[str, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("starlette")
    from parkway.http import create_app

    engine, _ = served
    monkeypatch.delenv("PARKWAY_API_TOKENS", raising=False)
    monkeypatch.setenv("PARKWAY_API_TOKEN", "secret")
    run = await engine.start("approval", None, id="a1")
    await engine.idle()
    async with _client(create_app(engine)) as http:
        headers = {"Authorization": "Bearer secret"}
        assert (await http.post(f"/runs/{run.id}/pause", headers=headers)).status_code == 200
    monkeypatch.delenv("PARKWAY_API_TOKEN")
    async with _client(create_app(engine)) as http:
        assert (await http.post(f"/runs/{run.id}/resume")).status_code == 200
    async with _client(create_app(engine, api_tokens={"zoe": "tok9"})) as http:
        headers = {"Authorization": "Bearer tok9"}
        assert (await http.post(f"/runs/{run.id}/cancel", headers=headers)).status_code == 202
    assert _operators(await engine.history(run.id)) == [("pause", "api"), ("cancel", "zoe")]


@pytest.mark.parametrize("tokens", ["alice", "alice:", ":zz9", "alice:zz9,bob:zz9"])
async def test_malformed_named_tokens_are_refused_when_the_app_is_made(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, tokens: str
) -> None:
    pytest.importorskip("starlette")
    from parkway.http import create_app

    monkeypatch.setenv("PARKWAY_API_TOKENS", tokens)
    with pytest.raises(InvalidArgumentError) as caught:
        create_app(engine)
    assert caught.value.field == "PARKWAY_API_TOKENS"
    assert "zz9" not in str(caught.value)  # (a token is never shown)
