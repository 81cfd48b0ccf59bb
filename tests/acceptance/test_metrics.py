"""Prometheus metrics after a scripted scenario, read back with prometheus_client's own
parser: from ``Engine.render_metrics``, from ``/metrics`` of the HTTP app, and from
``parkway worker --metrics-port``."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("prometheus_client", reason="the metrics extra is in the dev extra")
import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from parkway import CorrelationError, Engine, WorkflowFailedError
from parkway.errors import InvalidArgumentError, MetricsDisabledError
from parkway.http import create_app
from parkway.testing import ManualClock

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(engine: Engine) -> Samples:
    body, content_type = await engine.render_metrics()
    assert content_type.startswith("text/plain")
    return parse(body.decode())


def register(engine: Engine) -> None:
    def broken() -> None:
        raise TypeError("nope")

    @engine.workflow()
    async def ok(ctx, input):
        return await ctx.step(lambda: input, name="echo")

    @engine.workflow()
    async def bad(ctx, input):
        return await ctx.step(broken, name="boom")

    @engine.workflow()
    async def waits(ctx, input):
        return await ctx.wait_for_signal("go")

    @engine.workflow()
    async def paid(ctx, input):
        return await ctx.wait_for_event("payment", match={"order": input})

    @engine.workflow()
    async def receiver(ctx, key):
        return await ctx.wait_for_message("reply", key)


async def test_the_counts_after_a_scripted_scenario(make_engine: Any, clock: ManualClock) -> None:
    registry = CollectorRegistry()
    engine = await make_engine(metrics=registry)
    register(engine)
    for n in (1, 2):
        assert await (await engine.start("ok", n)).result(timeout=10) == n
    with pytest.raises(WorkflowFailedError):
        await (await engine.start("bad")).result(timeout=10)
    for run_id in ("w1", "w2", "w3"):
        await engine.start("waits", id=run_id)
    await engine.start("paid", "o-1", id="p1")
    await engine.start("receiver", "k1", id="r1")
    await engine.idle()
    await engine.signal("w1", "go", "now")
    await engine.cancel("w2")
    assert (await engine.publish("payment", {"order": "nobody"})).touched == 0  # unmatched
    assert (await engine.publish("payment", {"order": "o-1"}, id="ev-1")).resumed == ["p1"]
    assert (await engine.publish("payment", {"order": "o-1"}, id="ev-1")).duplicate
    assert (await engine.correlate("reply", "k1", 1)).outcome == "delivered"
    assert (await engine.correlate("reply", "k9", 2, ttl="30s")).outcome == "buffered"
    with pytest.raises(CorrelationError):
        await engine.correlate("reply", "k8", 3, ttl=0)
    await engine.idle()
    await clock.advance("2m")  # the buffered message expires: a dead letter

    samples = await scrape(engine)
    for workflow, started in [("ok", 2), ("bad", 1), ("waits", 3), ("paid", 1), ("receiver", 1)]:
        assert value(samples, "parkway_runs_started_total", workflow=workflow) == started
    assert value(samples, "parkway_runs_completed_total", workflow="ok") == 2
    assert value(samples, "parkway_runs_completed_total", workflow="waits") == 1
    assert value(samples, "parkway_runs_completed_total", workflow="paid") == 1
    assert value(samples, "parkway_runs_completed_total", workflow="receiver") == 1
    assert value(samples, "parkway_runs_failed_total", workflow="bad") == 1
    assert value(samples, "parkway_runs_cancelled_total", workflow="waits") == 1
    assert value(samples, "parkway_steps_total", workflow="ok", step="echo", outcome="ok") == 2
    assert value(samples, "parkway_steps_total", workflow="bad", step="boom", outcome="error") == 1
    assert value(samples, "parkway_step_duration_seconds_count", workflow="ok", step="echo") == 2
    assert value(samples, "parkway_wakes_total", workflow="waits", kind="signal") == 1
    assert value(samples, "parkway_wakes_total", workflow="paid", kind="delivery") == 1
    assert value(samples, "parkway_wakes_total", workflow="receiver", kind="message") == 1
    latency = value(samples, "parkway_wake_latency_seconds_count", workflow="paid", kind="delivery")
    assert latency == 1
    assert value(samples, "parkway_publishes_total", outcome="unmatched") == 1
    assert value(samples, "parkway_publishes_total", outcome="delivered") == 1
    assert value(samples, "parkway_publishes_total", outcome="duplicate") == 1
    for outcome, count in [("delivered", 1), ("buffered", 1), ("refused", 1)]:
        assert value(samples, "parkway_correlations_total", outcome=outcome) == count
    # The store's gauges: one run still parked (w3), nothing due, one dead letter.
    assert value(samples, "parkway_runs_parked", workflow="waits") == 1
    assert value(samples, "parkway_runs_parked", workflow="ok") == 0
    assert value(samples, "parkway_tasks_due") == 0
    assert value(samples, "parkway_oldest_due_task_age_seconds") == 0
    assert value(samples, "parkway_dead_letters") == 1
    assert value(samples, "parkway_lease_takeovers_total") == 0


async def test_the_backlog_and_the_age_of_the_oldest_due_task(
    make_engine: Any, clock: ManualClock
) -> None:
    # A client only: what it starts waits for a worker, and ages.
    engine = await make_engine(worker=False, metrics=CollectorRegistry())
    await engine.start("ok", 1, id="a")
    await engine.start("ok", 2, id="b")
    await engine.close()
    await clock.advance("90s")  # (no engine attached: time just moves)
    await engine.open()
    samples = await scrape(engine)
    assert value(samples, "parkway_tasks_due") == 2
    assert value(samples, "parkway_oldest_due_task_age_seconds") == pytest.approx(90)


async def test_a_run_taken_over_from_an_expired_lease_is_counted(
    make_engine: Any, clock: ManualClock
) -> None:
    engine = await make_engine(worker=False, metrics=CollectorRegistry())
    register(engine)
    await engine.start("ok", 7, id="t1")
    # A worker claims it and dies: its lease has run out already.
    now = time.time()
    claimed = await engine.store.claim(
        "dead-worker", now=clock.now(), wall_now=now, lease_until=now - 1, limit=1
    )
    assert claimed == ["t1"]
    await engine.close()
    engine.configure(worker=True)
    await engine.open()
    assert await engine.handle("t1").result(timeout=10) == 7
    samples = await scrape(engine)
    assert value(samples, "parkway_lease_takeovers_total") == 1


async def test_metrics_off_is_a_clear_error_and_a_404_over_http(make_engine: Any) -> None:
    engine = await make_engine()
    with pytest.raises(MetricsDisabledError, match=r"metrics=True"):
        await engine.render_metrics()
    transport = httpx.ASGITransport(app=create_app(engine, api_token=""))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        answer = await http.get("/metrics")
    assert answer.status_code == 404
    assert answer.json()["error"] == "MetricsDisabledError"
    assert "pip install 'parkway[metrics]'" in answer.json()["detail"]


async def test_the_http_app_serves_metrics(make_engine: Any) -> None:
    engine = await make_engine(metrics=CollectorRegistry())
    register(engine)
    await (await engine.start("ok", 1)).result(timeout=10)
    transport = httpx.ASGITransport(app=create_app(engine, api_token="secret"))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        assert (await http.get("/metrics")).status_code == 401  # the token guards it too
        answer = await http.get("/metrics", headers={"Authorization": "Bearer secret"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples = parse(answer.text)
    assert value(samples, "parkway_runs_completed_total", workflow="ok") == 1


def test_engines_sharing_a_registry_share_its_counters() -> None:
    registry = CollectorRegistry()
    Engine("memory://", metrics=registry)
    Engine("memory://", metrics=registry)  # (no duplicate registration)
    with pytest.raises(InvalidArgumentError, match="metrics must be True, False, None or a"):
        Engine("memory://", metrics="yes")


# -- parkway worker --metrics-port -------------------------------------------------------------
