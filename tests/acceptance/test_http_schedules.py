"""Schedules over HTTP: GET /schedules, POST /schedules/{id}/pause and /resume."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx

from parkway import Engine, Schedule
from parkway.http import create_app
from parkway.http import responses as s


@pytest.fixture
async def client(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)

    @engine.workflow(schedule=Schedule("0 * * * *", timezone="Europe/Paris", catch_up="all"))
    async def hourly(ctx, input):
        return None

    @engine.workflow()
    async def nightly(ctx, input):
        return None

    await engine.add_schedule("nightly-run", "nightly", "0 3 * * *")
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as c:
        yield c


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, f"{response.status_code}: {response.text}"
    assert response.headers["content-type"] == "application/json"
    return response.json()


async def test_schedules_are_listed_paused_and_resumed(
    client: httpx.AsyncClient, engine: Engine, clock, t0
) -> None:
    listed = ok(await client.get("/schedules"))
    for item in listed:
        s.ScheduleOut.model_validate(item)
    assert listed == [
        {
            "id": "hourly",
            "workflow": "hourly",
            "cron": "0 * * * *",
            "timezone": "Europe/Paris",
            "paused": False,
            "next_at": (t0 + timedelta(hours=1)).isoformat(),
            "last_run_id": None,
            "catch_up": "all",
        },
        {
            "id": "nightly-run",
            "workflow": "nightly",
            "cron": "0 3 * * *",
            "timezone": "UTC",
            "paused": False,
            "next_at": (t0 + timedelta(hours=3)).isoformat(),
            "last_run_id": None,
            "catch_up": "latest",
        },
    ]

    paused = ok(await client.post("/schedules/hourly/pause"))
    s.ScheduleOut.model_validate(paused)
    assert (paused["id"], paused["paused"], paused["next_at"]) == ("hourly", True, None)
    await clock.advance("90m")
    assert await engine.list_runs(workflow="hourly") == []
    assert ok(await client.get("/schedules"))[0]["paused"] is True

    resumed = ok(await client.post("/schedules/hourly/resume"))
    assert (resumed["paused"], resumed["next_at"]) == (False, (t0 + timedelta(hours=2)).isoformat())
    await clock.advance("30m")
    [first] = ok(await client.get("/schedules"))[:1]
    assert first["last_run_id"] == f"sched:hourly:{(t0 + timedelta(hours=2)).isoformat()}"


async def test_an_unknown_schedule_is_404(client: httpx.AsyncClient) -> None:
    for action in ("pause", "resume"):
        response = await client.post(f"/schedules/missing/{action}")
        assert response.status_code == 404
        body = response.json()
        assert body["error"] == "ScheduleNotFoundError" and "missing" in body["detail"]


async def test_a_malformed_schedule_id_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/schedules/bad%01id/pause")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["path", "id"]


async def test_a_wrong_method_is_405(client: httpx.AsyncClient) -> None:
    assert (await client.get("/schedules/hourly/pause")).status_code == 405
    assert (await client.post("/schedules")).status_code == 405


async def test_openapi_describes_the_schedule_routes(client: httpx.AsyncClient) -> None:
    doc = ok(await client.get("/openapi.json"))
    listing = doc["paths"]["/schedules"]["get"]["responses"]["200"]["content"]
    assert listing["application/json"]["schema"]["items"] == {
        "$ref": "#/components/schemas/ScheduleOut"
    }
    for action in ("pause", "resume"):
        op = doc["paths"][f"/schedules/{{id}}/{action}"]["post"]
        assert {"200", "404", "422"} <= set(op["responses"])
    fields = doc["components"]["schemas"]["ScheduleOut"]["properties"]
    assert set(fields) == {
        "id",
        "workflow",
        "cron",
        "timezone",
        "paused",
        "next_at",
        "last_run_id",
        "catch_up",
    }
