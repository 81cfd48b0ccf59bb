"""The operator controls over HTTP: pause, resume and retry of a run, bulk cancel and
retry, each held to the response models ``/openapi.json`` publishes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx

from parkway import Engine
from parkway.http import create_app
from parkway.http import responses as s

from .test_http import conform, ok


@pytest.fixture
async def client(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    state = {"fail": True}

    @engine.workflow()
    async def approval(ctx: Any, input: Any) -> Any:
        return await ctx.wait_for_signal("approve")

    @engine.workflow()
    async def fragile(ctx: Any, input: Any) -> Any:
        def call() -> str:
            if state["fail"]:
                raise ValueError("down")
            return "up"

        return await ctx.step(call, name="call")

    engine.fragile_state = state  # type: ignore[attr-defined]
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as c:
        yield c


async def _start(client: httpx.AsyncClient, engine: Engine, workflow: str, **body: Any) -> str:
    run_id: str = ok(await client.post("/runs", json={"workflow": workflow, **body}), 201)["id"]
    await engine.idle()
    return run_id


async def test_pause_and_resume_over_http(client: httpx.AsyncClient, engine: Engine) -> None:
    run_id = await _start(client, engine, "approval")
    paused = conform(s.RunInfoOut, ok(await client.post(f"/runs/{run_id}/pause")))
    assert (paused["id"], paused["status"], paused["paused"]) == (run_id, "parked", True)
    assert ok(await client.get(f"/runs/{run_id}"))["paused"] is True
    ok(await client.post(f"/runs/{run_id}/signals/approve", json="yes"), 202)
    await engine.idle()
    assert ok(await client.get(f"/runs/{run_id}"))["status"] == "parked"
    resumed = conform(s.RunInfoOut, ok(await client.post(f"/runs/{run_id}/resume")))
    assert resumed["paused"] is False
    await engine.idle()
    done = ok(await client.get(f"/runs/{run_id}"))
    assert (done["status"], done["output"], done["paused"]) == ("completed", "yes", False)
    for action in ("pause", "resume", "retry"):
        refused = await client.post(f"/runs/{run_id}/{action}")
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == "RunStateError"
        assert "completed" in refused.json()["detail"]
        missing = await client.post(f"/runs/nope/{action}")
        assert missing.status_code == 404, missing.text
        assert "GET /runs" in missing.json()["detail"]


async def test_retry_over_http(client: httpx.AsyncClient, engine: Engine) -> None:
    run_id = await _start(client, engine, "fragile")
    assert ok(await client.get(f"/runs/{run_id}"))["status"] == "failed"
    engine.fragile_state["fail"] = False  # type: ignore[attr-defined]
    retried = conform(s.RunInfoOut, ok(await client.post(f"/runs/{run_id}/retry")))
    assert (retried["status"], retried["error"]) == ("running", None)
    await engine.idle()
    assert ok(await client.get(f"/runs/{run_id}"))["output"] == "up"


async def test_bulk_cancel_and_retry_over_http(client: httpx.AsyncClient, engine: Engine) -> None:
    waiting = [await _start(client, engine, "approval", subject="s1") for _ in range(2)]
    other = await _start(client, engine, "approval", subject="s2")
    failed = [await _start(client, engine, "fragile") for _ in range(2)]
    body = {"workflow": "approval", "subject": "s1"}
    assert conform(s.CountOut, ok(await client.post("/runs/cancel", json=body))) == {"count": 2}
    for run_id in waiting:
        assert ok(await client.get(f"/runs/{run_id}"))["status"] == "cancelled"
    assert ok(await client.get(f"/runs/{other}"))["status"] == "parked"
    engine.fragile_state["fail"] = False  # type: ignore[attr-defined]
    retried = ok(await client.post("/runs/retry", json={"all": True}))
    assert retried == {"count": 2}
    await engine.idle()
    for run_id in failed:
        assert ok(await client.get(f"/runs/{run_id}"))["output"] == "up"
    later = {"created_before": "2000-01-01T00:00:00Z"}
    assert ok(await client.post("/runs/cancel", json=later)) == {"count": 0}
    assert ok(await client.post("/runs/cancel", json={"all": True})) == {"count": 1}


@pytest.mark.parametrize("path", ["/runs/cancel", "/runs/retry"])
async def test_a_bulk_operation_refuses_an_empty_filter_and_bad_fields(
    client: httpx.AsyncClient, engine: Engine, path: str
) -> None:
    run_id = await _start(client, engine, "approval")
    for body in ({}, {"all": False}, {"workflow": None}):
        response = await client.post(path, json=body)
        assert response.status_code == 422, response.text
        [error] = response.json()["detail"]
        assert error["loc"] == ["body"] and '"all": true' in error["msg"]
    for body, field in (
        ({"status": "sleeping"}, "status"),
        ({"created_before": "last tuesday"}, "created_before"),
        ({"created_before": 2.2e-16}, "created_before"),  # (a number: no, though pydantic takes it)
        ({"created_before": 1700000000}, "created_before"),
        ({"workflow": ""}, "workflow"),
        ({"workflow": "approval", "colour": "red"}, "colour"),
        ({"all": "yes"}, "all"),
    ):
        response = await client.post(path, json=body)
        assert response.status_code == 422, response.text
        assert [e["loc"] for e in response.json()["detail"]] == [["body", field]], body
    retry_parked = await client.post("/runs/retry", json={"status": "parked"})
    assert retry_parked.status_code == 422
    assert retry_parked.json()["detail"][0]["loc"] == ["body", "status"]
    assert ok(await client.get(f"/runs/{run_id}"))["status"] == "parked"  # nothing written
