"""Schedule ticks as values: run ids, ticks read back from them, and what a firing
plans after downtime (no store, no clock)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from parkway.core.schedules import FIRE_BATCH, plan
from parkway.schedules import run_id, tick_of, ticks
from parkway.store.schedules import ScheduleRecord

T0 = datetime(2030, 1, 1, tzinfo=UTC).timestamp()


def record(cron: str, catch_up: str, last_tick: float) -> ScheduleRecord:
    return ScheduleRecord(
        id="s",
        workflow="wf",
        cron=cron,
        timezone="UTC",
        catch_up=catch_up,
        input=b"null",
        paused=False,
        last_tick=last_tick,
        next_at=None,
        last_run_id=None,
        created_at=last_tick,
        updated_at=last_tick,
    )


def test_a_run_id_names_its_tick_and_gives_it_back() -> None:
    assert run_id("nightly", T0 + 300) == "sched:nightly:2030-01-01T00:05:00+00:00"
    assert tick_of("sched:a:b:2030-01-01T00:05:00+00:00") == datetime(2030, 1, 1, 0, 5, tzinfo=UTC)
    for other in ("evt:x:wf", "sched:", "sched:x:yesterday", "order-1"):
        assert tick_of(other) is None


def test_ticks_are_strictly_after_and_in_order() -> None:
    found = ticks("*/5 * * * *", "UTC", T0)
    assert [next(found) - T0 for _ in range(3)] == [300, 600, 900]


@pytest.mark.parametrize(
    ("catch_up", "fired"),
    [("latest", [3000]), ("all", [600 * k for k in range(1, 6)]), ("none", [])],
)
def test_missed_ticks_follow_catch_up_and_later_ones_fire(catch_up: str, fired: list[int]) -> None:
    # Registered at T0, down until T0 + 3000 (the 00:50 tick exactly), fired at 00:55.
    got, cursor, next_at = plan(record("*/10 * * * *", catch_up, T0), T0 + 3300, T0 + 3000)
    assert [t - T0 for t in got] == fired
    assert cursor == T0 + 3000 and next_at == T0 + 3600


def test_ticks_after_the_worker_came_up_always_fire() -> None:
    got, _, _ = plan(record("*/10 * * * *", "none", T0), T0 + 1300, T0 + 500)
    assert [t - T0 for t in got] == [600, 1200]


def test_a_year_down_with_a_tick_each_second_plans_quickly() -> None:
    year = 365 * 86_400
    began = time.perf_counter()
    got, cursor, _ = plan(record("* * * * * *", "latest", T0), T0 + year, T0 + year)
    assert got == [T0 + year] and cursor == T0 + year
    all_ticks, cursor, next_at = plan(record("* * * * * *", "all", T0), T0 + year, T0 + year)
    assert len(all_ticks) == FIRE_BATCH and next_at == cursor + 1  # the rest: next batch
    assert time.perf_counter() - began < 2
