"""Schedules: one run per cron tick, on every backend, whatever processes work.

Ticks under the manual clock (ids, ``ctx.scheduled_at``, ``next_at``), the first
tick after registration, pause and resume, catch-up after a restart, two engines
on one store, daylight-saving days, and bad input refused with nothing written.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from parkway import (
    Engine,
    InvalidScheduleError,
    ParkwayError,
    RunStatus,
    Schedule,
    ScheduleInfo,
    ScheduleNotFoundError,
)
from parkway.testing import ManualClock


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def run_id(schedule_id: str, tick: datetime) -> str:
    return f"sched:{schedule_id}:{tick.isoformat()}"


async def scheduled_runs(engine: Engine, workflow: str) -> list[str]:
    """The workflow's runs, oldest tick first."""
    return sorted(r.id for r in await engine.list_runs(workflow=workflow, limit=1000))


# -- ticks -----------------------------------------------------------------------------------


async def test_a_decorator_schedule_starts_one_run_per_tick(engine: Engine, clock, t0) -> None:
    seen: list[tuple[str, datetime | None]] = []

    @engine.workflow(schedule="*/5 * * * *")
    async def report(ctx, input):
        seen.append((ctx.run_id, ctx.scheduled_at))
        return input

    [info] = await engine.schedules()
    assert info == ScheduleInfo(
        "report", "report", "*/5 * * * *", "UTC", False, t0 + timedelta(minutes=5), None
    )
    await clock.advance("16m")
    ticks = [t0 + timedelta(minutes=m) for m in (5, 10, 15)]
    assert sorted(seen) == [(run_id("report", t), t) for t in ticks]
    assert all(
        t is not None and t.tzinfo is not None and t.utcoffset() == timedelta(0) for _, t in seen
    )
    assert await scheduled_runs(engine, "report") == [run_id("report", t) for t in ticks]
    for r in await engine.list_runs(workflow="report"):
        assert r.status is RunStatus.COMPLETED
    [info] = await engine.schedules()
    assert info.next_at == t0 + timedelta(minutes=20)
    assert info.last_run_id == run_id("report", ticks[-1])


async def test_schedule_object_gives_timezone_catch_up_and_input(engine: Engine, clock, t0) -> None:
    @engine.workflow(
        schedule=Schedule("0 9 * * *", timezone="Europe/Paris", catch_up="all", input={"n": 1})
    )
    async def morning(ctx, input):
        return {"input": input, "at": ctx.scheduled_at.isoformat()}

    [info] = await engine.schedules()
    # 09:00 in Paris in January is 08:00 UTC.
    assert info.next_at == t0 + timedelta(hours=8)
    assert (info.timezone, info.catch_up, info["input"]) == ("Europe/Paris", "all", {"n": 1})
    await clock.advance("1d")
    [run] = await engine.list_runs(workflow="morning")
    assert run.id == run_id("morning", t0 + timedelta(hours=8))
    assert run.output == {"input": {"n": 1}, "at": (t0 + timedelta(hours=8)).isoformat()}


async def test_a_run_no_schedule_started_has_no_scheduled_at(engine: Engine) -> None:
    @engine.workflow()
    async def plain(ctx, input):
        return ctx.scheduled_at

    assert await (await engine.start("plain")).result(timeout=10) is None


async def test_the_first_tick_is_the_first_after_registration(engine: Engine, clock, t0) -> None:
    @engine.workflow()
    async def job(ctx, input):
        return None

    await clock.advance("7m")  # registered at 00:07: the 00:05 tick is not caught up
    info = await engine.add_schedule("every-5", "job", "*/5 * * * *")
    assert info.next_at == t0 + timedelta(minutes=10)
    await clock.advance("2m")
    assert await scheduled_runs(engine, "job") == []
    await clock.advance("1m")
    assert await scheduled_runs(engine, "job") == [run_id("every-5", t0 + timedelta(minutes=10))]


async def test_a_six_field_expression_ticks_each_second(engine: Engine, clock, t0) -> None:
    @engine.workflow()
    async def often(ctx, input):
        return None

    await engine.add_schedule("often", often, "*/20 * * * * *")
    await clock.advance("1m")
    assert len(await scheduled_runs(engine, "often")) == 3


async def test_a_schedule_fires_on_real_time_without_being_polled() -> None:
    engine = Engine("memory://")
    lateness: list[float] = []

    @engine.workflow()
    async def each_second(ctx, input):
        lateness.append(time.time() - ctx.scheduled_at.timestamp())

    async with engine:
        await engine.add_schedule("s", "each_second", "* * * * * *")
        await asyncio.sleep(2.6)
    assert len(lateness) >= 2
    assert max(lateness) < 0.5  # the worker woke for the tick, not on its next poll


# -- dynamic schedules -------------------------------------------------------------------------


async def test_add_list_pause_resume_remove(engine: Engine, clock, t0) -> None:
    @engine.workflow()
    async def ping(ctx, input):
        return input

    added = await engine.add_schedule("p", "ping", "0 * * * *", input={"x": 1})
    assert (added.id, added.workflow, added.paused) == ("p", "ping", False)
    assert added.next_at == t0 + timedelta(hours=1)
    await clock.advance("1h")
    assert await scheduled_runs(engine, "ping") == [run_id("p", t0 + timedelta(hours=1))]

    paused = await engine.pause_schedule("p")
    assert paused.paused and paused.next_at is None
    await clock.advance("3h")  # 02:00, 03:00, 04:00 pass while paused: skipped
    assert len(await scheduled_runs(engine, "ping")) == 1
    await clock.advance("30m")
    resumed = await engine.resume_schedule("p")
    assert not resumed.paused and resumed.next_at == t0 + timedelta(hours=5)
    await clock.advance("30m")
    assert await scheduled_runs(engine, "ping") == [
        run_id("p", t0 + timedelta(hours=1)),
        run_id("p", t0 + timedelta(hours=5)),
    ]
    [info] = await engine.schedules()
    assert info.last_run_id == run_id("p", t0 + timedelta(hours=5))

    await engine.remove_schedule("p")
    assert await engine.schedules() == []
    await clock.advance("3h")
    assert len(await scheduled_runs(engine, "ping")) == 2  # its runs stay; no new one


async def test_adding_an_existing_id_changes_its_definition(engine: Engine, clock, t0) -> None:
    @engine.workflow()
    async def job(ctx, input):
        return input

    await engine.add_schedule("j", "job", "0 * * * *")
    changed = await engine.add_schedule("j", "job", "30 * * * *", input=7)
    assert changed.cron == "30 * * * *" and changed.next_at == t0 + timedelta(minutes=30)
    await clock.advance("40m")
    [run] = await engine.list_runs(workflow="job")
    assert run.input == 7 and len(await engine.schedules()) == 1


async def test_resuming_a_schedule_that_is_not_paused_skips_nothing(
    engine: Engine, clock, t0
) -> None:
    @engine.workflow()
    async def job(ctx, input):
        return None

    await engine.add_schedule("j", "job", "0 * * * *")
    info = await engine.resume_schedule("j")
    assert info.next_at == t0 + timedelta(hours=1)


async def test_a_decorator_schedule_declared_on_an_open_engine(engine: Engine, clock, t0) -> None:
    @engine.workflow(schedule="0 0 * * *")
    async def nightly(ctx, input):
        return None

    await clock.advance("1d")
    assert await scheduled_runs(engine, "nightly") == [run_id("nightly", t0 + timedelta(days=1))]


# -- restarts and catch-up -------------------------------------------------------------------


@pytest.mark.requires("persistent")
@pytest.mark.parametrize(
    ("catch_up", "missed"),
    [("latest", [50]), ("all", [20, 30, 40, 50]), ("none", [])],
)
async def test_catch_up_after_a_restart(
    make_engine, clock, t0, catch_up: str, missed: list[int]
) -> None:
    def register(engine: Engine) -> None:
        @engine.workflow(schedule=Schedule("*/10 * * * *", catch_up=catch_up))
        async def tick(ctx, input):
            return ctx.scheduled_at.isoformat()

    first = await make_engine(open=False)
    register(first)
    await first.open()
    await clock.advance("10m")
    await first.close()
    await clock.advance("45m")  # down from 00:10 to 00:55: 00:20 ... 00:50 pass unseen
    second = await make_engine(open=False)
    register(second)
    await second.open()
    await second.idle()
    expected = [run_id("tick", t0 + timedelta(minutes=m)) for m in [10, *missed]]
    assert await scheduled_runs(second, "tick") == expected
    await clock.advance("5m")  # and on time again from then on
    expected.append(run_id("tick", t0 + timedelta(hours=1)))
    assert await scheduled_runs(second, "tick") == sorted(expected)
    for r in await second.list_runs(workflow="tick", limit=100):
        assert r.status is RunStatus.COMPLETED


@pytest.mark.requires("persistent")
async def test_a_restart_keeps_the_first_registration(make_engine, clock, t0) -> None:
    def register(engine: Engine) -> None:
        @engine.workflow(schedule="0 * * * *")
        async def hourly(ctx, input):
            return None

    first = await make_engine(open=False)
    register(first)
    await first.open()
    await first.close()
    await clock.advance("90m")  # the 01:00 tick passed before the second engine came up
    second = await make_engine(open=False)
    register(second)
    await second.open()
    await second.idle()
    assert await scheduled_runs(second, "hourly") == [run_id("hourly", t0 + timedelta(hours=1))]


@pytest.mark.requires("persistent")
async def test_catch_up_all_after_a_long_downtime_starts_every_tick_once(
    make_engine, clock, t0
) -> None:
    def register(engine: Engine) -> None:
        @engine.workflow(schedule=Schedule("* * * * *", catch_up="all"))
        async def minutely(ctx, input):
            return None

    first = await make_engine(open=False)
    register(first)
    await first.open()
    await first.close()
    await clock.advance("12h")  # 720 ticks, more than one firing transaction takes
    second = await make_engine(open=False)
    register(second)
    await second.open()
    await second.idle(timeout=120)
    ids = await scheduled_runs(second, "minutely")
    assert len(ids) == len(set(ids)) == 720
    assert ids[0] == run_id("minutely", t0 + timedelta(minutes=1))
    assert ids[-1] == run_id("minutely", t0 + timedelta(hours=12))


# -- several engines -------------------------------------------------------------------------


@pytest.mark.requires("shared")
async def test_two_engines_on_one_store_start_each_tick_once(make_engine, clock, t0) -> None:
    executions: list[str] = []
    engines = []
    for _ in range(2):
        engine = await make_engine(open=False)

        @engine.workflow(schedule="*/5 * * * *")
        async def shared(ctx, input):
            executions.append(ctx.run_id)
            return None

        engines.append(engine)
    for engine in engines:
        await engine.open()
    await clock.advance("30m")
    for engine in engines:
        await engine.idle()
    expected = [run_id("shared", t0 + timedelta(minutes=m)) for m in range(5, 31, 5)]
    assert await scheduled_runs(engines[0], "shared") == expected
    assert sorted(executions) == expected  # each started, and run, once
    assert len(await engines[1].schedules()) == 1


@pytest.mark.requires("shared")
async def test_a_client_engine_adds_a_schedule_a_worker_fires(make_engine, clock, t0) -> None:
    worker = await make_engine(open=False)

    @worker.workflow()
    async def remote(ctx, input):
        return input

    await worker.open()
    client = await make_engine(worker=False)
    await client.add_schedule("r", "remote", "0 * * * *", input="hi")
    await clock.advance("1h")
    await worker.idle()
    [run] = await worker.list_runs(workflow="remote")
    assert (run.id, run.output) == (run_id("r", t0 + timedelta(hours=1)), "hi")


# -- daylight saving ----------------------------------------------------------------------------


async def _ticks_over(make_engine, start: datetime, cron: str, zone: str, span: str) -> list[str]:
    clock = ManualClock(start=start)
    engine = await make_engine(clock=clock, open=False)

    @engine.workflow()
    async def local(ctx, input):
        return None

    await engine.open()
    await engine.add_schedule("local", "local", cron, timezone=zone)
    await clock.advance(span)
    runs = await engine.list_runs(workflow="local", limit=100)
    return sorted(r.id.removeprefix("sched:local:") for r in runs)


async def test_spring_forward_a_skipped_local_time_runs_at_the_end_of_the_gap(make_engine) -> None:
    # New York, 2030-03-10: 02:00 EST jumps to 03:00 EDT; 02:30 never happens that day.
    ticks = await _ticks_over(
        make_engine, at(2030, 3, 9, 12), "30 2 * * *", "America/New_York", "3d"
    )
    assert ticks == [
        "2030-03-10T07:00:00+00:00",  # 03:00 EDT, the first moment after the gap
        "2030-03-11T06:30:00+00:00",  # 02:30 EDT
        "2030-03-12T06:30:00+00:00",
    ]


async def test_spring_forward_an_hourly_schedule_has_23_ticks_that_day(make_engine) -> None:
    ticks = await _ticks_over(
        make_engine, at(2030, 3, 10, 4, 30), "0 * * * *", "America/New_York", "1d"
    )
    # Local midnight to midnight of 2030-03-10 is 05:00 to 04:00 UTC the next day.
    day = [t for t in ticks if "2030-03-10T05:00" <= t < "2030-03-11T04:00"]
    assert len(day) == 23


async def test_fall_back_a_repeated_local_time_runs_once(make_engine) -> None:
    # New York, 2030-11-03: 02:00 EDT goes back to 01:00 EST; 01:30 happens twice.
    ticks = await _ticks_over(
        make_engine, at(2030, 11, 2, 12), "30 1 * * *", "America/New_York", "3d"
    )
    assert ticks == [
        "2030-11-03T05:30:00+00:00",  # 01:30 EDT, the first of the two
        "2030-11-04T06:30:00+00:00",  # 01:30 EST
        "2030-11-05T06:30:00+00:00",
    ]


async def test_fall_back_an_hourly_schedule_has_25_ticks_that_day(make_engine) -> None:
    ticks = await _ticks_over(
        make_engine, at(2030, 11, 3, 3), "0 * * * *", "America/New_York", "2d"
    )
    # Local midnight to midnight of 2030-11-03 is 04:00 to 05:00 UTC the next day.
    day = [t for t in ticks if "2030-11-03T04:00" <= t < "2030-11-04T05:00"]
    assert len(day) == 25


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cron": "not a cron"}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * * *"}, "cron"),
        ({"cron": ""}, "cron"),
        ({"cron": 5}, "cron"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"timezone": ""}, "timezone"),
        ({"catch_up": "sometimes"}, "catch_up"),
        ({"input": {"when": {1, 2}}}, "input"),
        ({"input": float("nan")}, "input"),
        ({"workflow": "nobody"}, "workflow"),
        ({"id": ""}, "id"),
        ({"id": "a\nb"}, "id"),
    ],
)
async def test_a_bad_schedule_is_refused_naming_its_field(
    engine: Engine, clock, kwargs: dict, field: str
) -> None:
    @engine.workflow()
    async def job(ctx, input):
        return None

    args = {"id": "s", "workflow": "job", "cron": "0 * * * *", **kwargs}
    with pytest.raises(InvalidScheduleError) as caught:
        await engine.add_schedule(args.pop("id"), args.pop("workflow"), args.pop("cron"), **args)
    assert isinstance(caught.value, ParkwayError)
    assert caught.value.field == field
    assert field in str(caught.value)
    assert await engine.schedules() == []
    await clock.advance("2h")
    assert await engine.list_runs(workflow="job") == []


@pytest.mark.parametrize(
    "schedule",
    ["bad cron", Schedule.__new__(Schedule), 42],
    ids=["cron", "unvalidated", "type"],
)
async def test_a_bad_decorator_schedule_is_refused_at_registration(
    engine: Engine, schedule: object
) -> None:
    if isinstance(schedule, Schedule):  # (built without its checks: fields missing)
        object.__setattr__(schedule, "cron", "0 0 31 2 *")
        object.__setattr__(schedule, "timezone", "UTC")
        object.__setattr__(schedule, "catch_up", "latest")
        object.__setattr__(schedule, "input", None)
    with pytest.raises(InvalidScheduleError):

        @engine.workflow(schedule=schedule)
        async def broken(ctx, input):
            return None

    assert engine.workflows() == []
    assert await engine.schedules() == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cron": "60 * * * *"}, "cron"),
        ({"timezone": "Nowhere/Town"}, "timezone"),
        ({"catch_up": "never"}, "catch_up"),
    ],
)
def test_a_bad_schedule_object_is_refused_when_made(kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidScheduleError) as caught:
        Schedule(**{"cron": "0 * * * *", **kwargs})
    assert caught.value.field == field


async def test_steering_an_unknown_schedule_raises(engine: Engine) -> None:
    for call in (engine.pause_schedule, engine.resume_schedule, engine.remove_schedule):
        with pytest.raises(ScheduleNotFoundError):
            await call("missing")


async def test_a_validated_input_is_checked_when_the_schedule_is_added(engine: Engine) -> None:
    def positive(value):
        if not isinstance(value, int) or value <= 0:
            raise ValueError("must be a positive number")
        return value

    @engine.workflow(validate_input=positive)
    async def counted(ctx, input):
        return input

    with pytest.raises(InvalidScheduleError) as caught:
        await engine.add_schedule("c", "counted", "0 * * * *", input=-1)
    assert caught.value.field == "input"
    assert await engine.schedules() == []
