"""Hostile input through the Python API, on every backend: each is refused with a
``ParkwayError`` naming what is wrong (never a bare Python or driver error), the
same way on every backend, nothing is written, and the engine works on after it.

The limits are those of :mod:`parkway.limits` (the README's table): values just
at a limit are taken everywhere, values just past it refused everywhere.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from parkway import (
    Engine,
    InvalidDurationError,
    InvalidInputError,
    MessageNotFoundError,
    ParkwayError,
    RunNotFoundError,
    RunStatus,
    SerializationError,
    UnknownWorkflowError,
    WorkflowFailedError,
)
from parkway.limits import (
    MAX_DEPTH,
    MAX_DOMAIN_LENGTH,
    MAX_DURATION_SECONDS,
    MAX_ID_LENGTH,
    MAX_KEY_LENGTH,
    MAX_MATCH_KEYS_LENGTH,
    MAX_NAME_LENGTH,
    MAX_SUBJECT_LENGTH,
)
from parkway.testing import ManualClock

# -- values --------------------------------------------------------------------------------------


def nested(depth: int, *, kind: str = "list") -> Any:
    """A JSON value ``depth`` containers deep (``[]`` is 1), built without recursion."""
    value: Any = 0
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


def depth_of(value: Any) -> int:
    depth = 0
    while isinstance(value, list | dict):
        value = value[0] if isinstance(value, list) else value["a"]
        depth += 1
    return depth


def self_referencing() -> list[Any]:
    loop: list[Any] = [1]
    loop.append({"again": loop})
    return loop


TOO_DEEP = [MAX_DEPTH + 1, 253, 254, 255, 256, 1_000, 100_000]
# Characters no id, name, key, subject or domain may hold.
BAD_CHARACTERS = {
    "nul": "a\x00b",
    "newline": "a\nb",
    "tab": "a\tb",
    "del": "a\x7fb",
    "c1": "a\x85b",
    "lone surrogate": "bad\ud800id",
    "low surrogate": "\udfff",
}
# Characters they may hold (ids with "/" are reachable over HTTP too).
GOOD_CHARACTERS = ["a/b", "a%2Fb", "100%", "a b", "ünïcødé", "🦜", "a:b", "a?b#c", "..", "a\\b"]
MAX_YEARS = MAX_DURATION_SECONDS / 86400 / 365.25


async def works(engine: Engine) -> None:
    """The engine still starts, parks, signals and completes a run."""

    async def ping(ctx, input):
        return [input, await ctx.wait_for_signal("go")]

    if "ping" not in engine.workflows():
        engine.workflow("ping")(ping)
    handle = await engine.start("ping", "in")
    await engine.idle()
    await handle.signal("go", "out")
    assert await handle.result(timeout=10) == ["in", "out"]


def register(engine: Engine) -> None:
    """Workflows the tests below start, signal and message."""

    @engine.workflow()
    async def echo(ctx, input):
        return input

    @engine.workflow()
    async def waiter(ctx, input):
        return await ctx.wait_for_signal("go")

    @engine.workflow(on_event="order.created")
    async def on_order(ctx, payload):
        return payload

    @engine.workflow(on_message="signup")
    async def onboarding(ctx, payload):
        return payload


async def nothing_written(engine: Engine, runs: int = 0) -> None:
    await engine.idle()
    assert len(await engine.list_runs(limit=1000)) == runs
    assert await engine.messages() == []


# -- nesting -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["list", "dict"])
async def test_payloads_at_the_depth_limit_go_through_every_envelope(
    engine: Engine, kind: str
) -> None:
    register(engine)
    deepest = nested(MAX_DEPTH, kind=kind)

    @engine.workflow(on_event="deep")
    async def deep_start(ctx, payload):
        got = await ctx.wait_for_event("deeper")
        message = await ctx.wait_for_message("deepest", "k")
        signal = await ctx.wait_for_signal("go")
        same = payload == got == message == signal
        return [depth_of(payload), depth_of(got), depth_of(message), depth_of(signal), same]

    result = await engine.publish("deep", deepest, subject="s")
    await engine.idle()
    await engine.publish("deeper", deepest, subject="s")
    await engine.correlate("deepest", "k", deepest)
    [run_id] = result.started
    await engine.signal(run_id, "go", deepest)
    output = await engine.handle(run_id).result(timeout=10)
    assert output == [MAX_DEPTH] * 4 + [True]
    assert [e.status for e in await engine.history(run_id)] == ["done", "done", "done"]
    started = await engine.start("echo", deepest)
    assert await started.result(timeout=10) == deepest


@pytest.mark.parametrize("depth", TOO_DEEP)
async def test_payloads_past_the_depth_limit_are_refused_naming_it(
    engine: Engine, depth: int
) -> None:
    register(engine)
    parked = await engine.start("waiter", id="w")
    await engine.idle()
    value = nested(depth)
    for call in (
        lambda: engine.publish("order.created", value),
        lambda: engine.signal("w", "go", value),
        lambda: engine.correlate("signup", "k", value),
        lambda: engine.signal_with_start("waiter", "w2", "go", value),
        lambda: engine.correlate("nobody.waits", "k", {"deep": value}),
    ):
        with pytest.raises(SerializationError, match=f"nested deeper than {MAX_DEPTH} levels"):
            await call()
    for call in (
        lambda: engine.start("echo", value),
        lambda: engine.signal_with_start("waiter", "w3", "go", input=value),
    ):
        with pytest.raises(InvalidInputError, match=f"nested deeper than {MAX_DEPTH} levels"):
            await call()
    await nothing_written(engine, runs=1)
    assert (await parked.info()).status is RunStatus.PARKED
    await works(engine)


async def test_a_payload_that_contains_itself_is_refused(engine: Engine) -> None:
    register(engine)
    for value in (self_referencing(), {"me": self_referencing()}):
        with pytest.raises(SerializationError, match="contains itself") as exc_info:
            await engine.publish("order.created", value)
        assert exc_info.value.path.endswith(".again")
        with pytest.raises(SerializationError, match="contains itself"):
            await engine.correlate("signup", "k", value)
        with pytest.raises(InvalidInputError, match="contains itself"):
            await engine.start("echo", value)
    await nothing_written(engine)
    await works(engine)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 100_000])
async def test_a_match_too_deep_is_an_error_the_workflow_sees(engine: Engine, depth: int) -> None:
    match = {"order": nested(depth - 1)}

    @engine.workflow()
    async def catches(ctx, input):
        try:
            await ctx.wait_for_event("paid", match=match)
        except ParkwayError as exc:
            return type(exc).__name__
        return "waited"

    @engine.workflow()
    async def lets_it_fail(ctx, input):
        return await ctx.wait_for_event("paid", match=match)

    assert await (await engine.start("catches")).result(timeout=10) == "SerializationError"
    with pytest.raises(WorkflowFailedError) as exc_info:
        await (await engine.start("lets_it_fail")).result(timeout=10)
    assert exc_info.value.type == "SerializationError"
    assert f"nested deeper than {MAX_DEPTH} levels" in exc_info.value.error_message
    assert await engine.subscriptions() == []
    await works(engine)


# -- values the JSON encoder refuses ------------------------------------------------------------

BAD_VALUES = [
    pytest.param({"n": math.nan}, "$.n", "not a finite number", id="nan"),
    pytest.param({"n": [math.inf]}, "$.n[0]", "not a finite number", id="infinity"),
    pytest.param({"n": -math.inf}, "$.n", "not a finite number", id="-infinity"),
    pytest.param({"n": 2**64}, "$.n", "64-bit", id="2**64"),
    pytest.param({"n": -(2**63) - 1}, "$.n", "64-bit", id="-2**63-1"),
    pytest.param({"n": 10**400}, "$.n", "64-bit", id="10**400"),
    pytest.param({1: "x"}, "$", "not a string", id="int-key"),
    pytest.param({"a": {(1, 2): "x"}}, "$.a", "not a string", id="tuple-key"),
    pytest.param({"a": {None: "x"}}, "$.a", "not a string", id="none-key"),
    pytest.param({"s": "bad\ud800"}, "$.s", "surrogate", id="surrogate-value"),
    pytest.param({"bad\udfffkey": 1}, "$", "surrogate", id="surrogate-key"),
    pytest.param({"tags": {"a"}}, "$.tags", "set", id="set"),
    pytest.param({"b": b"bytes"}, "$.b", "bytes", id="bytes"),
]


@pytest.mark.parametrize(("value", "path", "detail"), BAD_VALUES)
async def test_values_json_cannot_hold_are_refused_naming_the_path(
    engine: Engine, value: Any, path: str, detail: str
) -> None:
    register(engine)
    await engine.start("waiter", id="w")
    await engine.idle()
    for call in (
        lambda: engine.publish("order.created", value),
        lambda: engine.signal("w", "go", value),
        lambda: engine.correlate("signup", "k", value),
    ):
        with pytest.raises(SerializationError, match=detail) as exc_info:
            await call()
        assert exc_info.value.path == path
    with pytest.raises(InvalidInputError, match=detail) as input_info:
        await engine.start("echo", value)
    assert input_info.value.field == path
    await nothing_written(engine, runs=1)
    await works(engine)


GOOD_VALUES = [
    pytest.param({"n": 2**64 - 1, "m": -(2**63)}, id="64-bit-ends"),
    pytest.param({"n": -1, "m": -1.5e308, "z": 0.0}, id="negative"),
    pytest.param({"s": "a\x00b\nc"}, id="nul-and-newline-in-strings"),
    pytest.param({"s": "🦜" * 1000, "ünï": "cødé"}, id="unicode"),
    pytest.param([None, True, False, "", [], {}], id="empties"),
]


@pytest.mark.parametrize("value", GOOD_VALUES)
async def test_values_at_the_edges_of_json_are_kept_exactly(engine: Engine, value: Any) -> None:
    register(engine)
    assert await (await engine.start("echo", value)).result(timeout=10) == value
    [run_id] = (await engine.publish("order.created", value)).started
    assert await engine.handle(run_id).result(timeout=10) == value
    assert (await engine.correlate("buffered", "k", value)).outcome == "buffered"
    [message] = await engine.messages()
    assert message.payload == value


# -- durations -----------------------------------------------------------------------------------

LONGEST = [
    MAX_DURATION_SECONDS,
    float(MAX_DURATION_SECONDS),
    "36525d",
    f"{MAX_DURATION_SECONDS}s",
    timedelta(days=36525),
]
TOO_LONG = [
    MAX_DURATION_SECONDS + 1,
    MAX_DURATION_SECONDS + 0.5,
    "36526d",
    "5219w",
    "99999999d",
    "9" * 400 + "s",
    1e20,
    1e308,
    10**400,
    math.inf,
    timedelta.max,
]
NOT_DURATIONS = ["٣s", "3٣s", "1e20", "1e3s", "", " ", "+3s", "3 s s", "0x10s", "3S"]


@pytest.mark.parametrize("duration", LONGEST, ids=repr)
async def test_the_longest_duration_is_taken_everywhere(engine: Engine, duration: Any) -> None:
    @engine.workflow()
    async def patient(ctx, input):
        return await ctx.wait_for_event("e", timeout=duration, ttl=duration)

    assert (await engine.correlate("m", "k", 1, ttl=duration)).outcome == "buffered"
    await engine.start("patient", id="p")
    await engine.idle()
    [message] = await engine.messages()
    [sub] = await engine.subscriptions()
    years = (message.expires_at - message.received_at).days / 365.25
    assert math.isclose(years, MAX_YEARS, abs_tol=0.01)
    assert sub.expires_at > datetime(2129, 1, 1, tzinfo=UTC)
    Engine("memory://", message_ttl=duration, event_retention=duration, lease=duration)


@pytest.mark.parametrize("duration", TOO_LONG, ids=lambda d: repr(d)[:30])
async def test_durations_past_100_years_are_refused_naming_the_field(
    engine: Engine, clock: ManualClock, duration: Any
) -> None:
    with pytest.raises(InvalidDurationError, match="100 years") as exc_info:
        await engine.correlate("m", "k", 1, ttl=duration)
    assert exc_info.value.field == "ttl"
    with pytest.raises(InvalidDurationError, match="message_ttl"):
        Engine("memory://", message_ttl=duration)
    with pytest.raises(InvalidDurationError):
        await clock.advance(duration)

    @engine.workflow()
    async def sleeper(ctx, input):
        waits = [
            lambda: ctx.sleep(duration),
            lambda: ctx.wait_for_signal("s", timeout=duration),
            lambda: ctx.wait_for_event("e", timeout=duration),
            lambda: ctx.wait_for_event("e", ttl=duration),
            lambda: ctx.wait_for_message("m", "k", timeout=duration),
        ]
        refused = []
        for wait in waits:
            try:
                await wait()
            except InvalidDurationError as exc:
                refused.append(exc.field)
        return refused

    assert await (await engine.start("sleeper")).result(timeout=10) == [
        "ctx.sleep duration",
        "timeout",
        "timeout",
        "ttl",
        "timeout",
    ]
    await nothing_written(engine, runs=1)
    assert await engine.subscriptions() == []
    await works(engine)


@pytest.mark.parametrize("duration", NOT_DURATIONS, ids=repr)
async def test_durations_take_ascii_digits_only(engine: Engine, duration: str) -> None:
    with pytest.raises(InvalidDurationError, match="not a duration"):
        await engine.correlate("m", "k", 1, ttl=duration)
    assert await engine.messages() == []


async def test_listings_never_fail_on_a_time_past_year_9999(make_engine) -> None:
    # Engine time near the end of the calendar plus the longest ttl: the deadlines
    # stored lie past what a datetime can show, and every listing still answers.
    clock = ManualClock(start=datetime(9990, 1, 1, tzinfo=UTC))
    engine = await make_engine(clock=clock)

    @engine.workflow()
    async def patient(ctx, input):
        return await ctx.wait_for_event("e", timeout="36525d")

    await engine.correlate("m", "k", {"late": True}, ttl="36525d")
    await engine.start("patient", id="p")
    await engine.idle()
    [message] = await engine.messages()
    assert message.expires_at == datetime.max.replace(tzinfo=UTC)
    assert message.to_dict()["expires_at"].startswith("9999-12-31")
    [sub] = await engine.subscriptions()
    assert sub.expires_at == datetime.max.replace(tzinfo=UTC)
    [run] = await engine.list_runs()
    assert run.created_at.year == 9990
    await engine.discard_message(message.id)
    await engine.publish("e", "now")
    assert await engine.handle("p").result(timeout=10) == "now"


# -- lengths -------------------------------------------------------------------------------------


async def test_ids_names_keys_subjects_and_domains_at_their_limits_work(engine: Engine) -> None:
    # 4-byte characters: the widest index entries PostgreSQL must hold.
    name, key = "🦜" * MAX_NAME_LENGTH, "🔑" * MAX_KEY_LENGTH
    subject, domain = "🐚" * MAX_SUBJECT_LENGTH, "🌍" * MAX_DOMAIN_LENGTH
    run_id, event_id = "🆔" * MAX_ID_LENGTH, "e" * MAX_ID_LENGTH
    keys = {f"{c}": i for i, c in enumerate("🅰🅱🅲🅳")}
    keys["🅴" * (MAX_MATCH_KEYS_LENGTH - len(keys))] = 5
    assert sum(map(len, keys)) == MAX_MATCH_KEYS_LENGTH

    @engine.workflow(name=name, on_message=name)
    async def widest(ctx, input):
        event = await ctx.wait_for_event(name, match=keys, subject=subject)
        message = await ctx.wait_for_message(name, key)
        signal = await ctx.wait_for_signal(name)
        published = await ctx.publish(name, {"from": ctx.run_id}, subject=subject)
        return [event, message, signal, published.event_id]

    handle = await engine.start(name, {}, id=run_id, subject=subject, domain=domain)
    await engine.idle()
    [sub] = await engine.subscriptions()
    assert (sub.name, sub.subject, sub.domain) == (name, subject, domain)
    await engine.publish(name, {**keys, "x": 1}, id=event_id, domain=domain, subject=subject)
    await engine.idle()
    await engine.correlate(name, key, "m", message_id="m" * MAX_ID_LENGTH)
    await engine.idle()
    await engine.signal(run_id, name, "s")
    out = await handle.result(timeout=10)
    assert out[:3] == [{**keys, "x": 1}, "m", "s"]
    assert out[3] == f"{run_id}:0:3"  # an id the run composes may be longer than 255
    assert len(out[3]) > MAX_ID_LENGTH
    # A message start composes msg:<name>:<key>, longer than an id a caller may give.
    started = await engine.correlate(name, "🗝" * MAX_KEY_LENGTH, {})
    assert started.outcome == "started" and started.run_id is not None
    assert len(started.run_id) > MAX_ID_LENGTH
    assert (await engine.get_run(started.run_id)).workflow == name


def _one_too_long(engine: Engine) -> list[tuple[str, Any]]:
    long_id, long_name = "i" * (MAX_ID_LENGTH + 1), "n" * (MAX_NAME_LENGTH + 1)
    long_key, long_subject = "k" * (MAX_KEY_LENGTH + 1), "s" * (MAX_SUBJECT_LENGTH + 1)
    long_domain = "d" * (MAX_DOMAIN_LENGTH + 1)
    return [
        ("id", lambda: engine.start("echo", id=long_id)),
        ("subject", lambda: engine.start("echo", subject=long_subject)),
        ("domain", lambda: engine.start("echo", domain=long_domain)),
        ("workflow", lambda: engine.start(long_name)),
        ("id", lambda: engine.signal_with_start("waiter", long_id, "go")),
        ("signal", lambda: engine.signal_with_start("waiter", "w2", long_name)),
        ("name", lambda: engine.signal("w", long_name)),
        ("name", lambda: engine.publish(long_name)),
        ("id", lambda: engine.publish("x", id=long_id)),
        ("subject", lambda: engine.publish("x", subject=long_subject)),
        ("domain", lambda: engine.publish("x", domain=long_domain)),
        ("name", lambda: engine.correlate(long_name, "k")),
        ("key", lambda: engine.correlate("signup", long_key)),
        ("message_id", lambda: engine.correlate("signup", "k", message_id=long_id)),
    ]


async def test_one_character_past_each_limit_is_refused_naming_the_field(engine: Engine) -> None:
    register(engine)
    await engine.start("waiter", id="w")
    await engine.idle()
    for field, call in _one_too_long(engine):
        with pytest.raises(InvalidInputError, match="characters long; at most") as exc_info:
            await call()
        assert exc_info.value.field == field
    await nothing_written(engine, runs=1)
    await works(engine)


async def test_ten_thousand_characters_are_refused_on_every_backend(engine: Engine) -> None:
    register(engine)
    huge = "x" * 10_000
    for call in (
        lambda: engine.start("echo", id=huge),
        lambda: engine.start("echo", subject=huge),
        lambda: engine.publish(huge),
        lambda: engine.publish("x", domain=huge),
        lambda: engine.correlate("signup", huge),
    ):
        with pytest.raises(InvalidInputError, match="10000 characters long"):
            await call()
    # A lookup of such an id finds nothing (ids the engine composes may be long).
    with pytest.raises(RunNotFoundError):
        await engine.get_run(huge)
    with pytest.raises(RunNotFoundError):
        await engine.cancel(huge)
    assert await engine.list_runs(subject=huge) == []
    assert await engine.subscriptions(run_id=huge, name=huge) == []
    await nothing_written(engine)
    await works(engine)


# -- characters ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", list(BAD_CHARACTERS.values()), ids=list(BAD_CHARACTERS))
async def test_control_characters_and_lone_surrogates_are_refused_everywhere(
    engine: Engine, bad: str
) -> None:
    register(engine)
    await engine.start("waiter", id="w")
    await engine.idle()
    calls = [
        ("id", lambda: engine.start("echo", id=bad)),
        ("subject", lambda: engine.start("echo", subject=bad)),
        ("domain", lambda: engine.start("echo", domain=bad)),
        ("workflow", lambda: engine.start(bad)),
        ("id", lambda: engine.signal_with_start("waiter", bad, "go")),
        ("name", lambda: engine.signal("w", bad)),
        ("name", lambda: engine.publish(bad)),
        ("id", lambda: engine.publish("x", id=bad)),
        ("subject", lambda: engine.publish("x", subject=bad)),
        ("domain", lambda: engine.publish("x", domain=bad)),
        ("name", lambda: engine.correlate(bad, "k")),
        ("key", lambda: engine.correlate("signup", bad)),
        ("message_id", lambda: engine.correlate("signup", "k", message_id=bad)),
        # Lookups and filters too: PostgreSQL cannot even be asked about a NUL.
        ("run_id", lambda: engine.get_run(bad)),
        ("run_id", lambda: engine.history(bad)),
        ("run_id", lambda: engine.cancel(bad)),
        ("run_id", lambda: engine.signal(bad, "go")),
        ("run_id", lambda: engine.handle(bad).result(timeout=1)),
        ("subject", lambda: engine.list_runs(subject=bad)),
        ("workflow", lambda: engine.list_runs(workflow=bad)),
        ("domain", lambda: engine.list_runs(domain=bad)),
        ("run_id", lambda: engine.subscriptions(run_id=bad)),
        ("name", lambda: engine.subscriptions(name=bad)),
    ]
    for field, call in calls:
        with pytest.raises(InvalidInputError, match="holds a") as exc_info:
            await call()
        assert exc_info.value.field == field, field
    await nothing_written(engine, runs=1)
    await works(engine)


@pytest.mark.parametrize("bad", list(BAD_CHARACTERS.values()), ids=list(BAD_CHARACTERS))
async def test_ctx_operations_refuse_them_too(engine: Engine, bad: str) -> None:
    @engine.workflow()
    async def child(ctx, input):
        return input

    @engine.workflow()
    async def sloppy(ctx, input):
        attempts = [
            lambda: ctx.wait_for_signal(bad),
            lambda: ctx.wait_for_event(bad),
            lambda: ctx.wait_for_event("e", subject=bad),
            lambda: ctx.wait_for_event("e", match={bad: 1}),
            lambda: ctx.wait_for_message(bad, "k"),
            lambda: ctx.wait_for_message("m", bad),
            lambda: ctx.publish(bad),
            lambda: ctx.publish("e", id=bad),
            lambda: ctx.publish("e", subject=bad),
            lambda: ctx.start_child("child", id=bad),
            lambda: ctx.start_child(bad),
        ]
        refused = []
        for attempt in attempts:
            try:
                await attempt()
            except InvalidInputError as exc:
                refused.append(exc.field)
        return refused

    assert await (await engine.start("sloppy")).result(timeout=10) == [
        "name",
        "name",
        "subject",
        "match",
        "name",
        "key",
        "name",
        "id",
        "subject",
        "id",
        "workflow",
    ]
    assert await engine.subscriptions() == []
    assert [r.workflow for r in await engine.list_runs()] == ["sloppy"]


@pytest.mark.parametrize("good", GOOD_CHARACTERS)
async def test_ids_and_names_with_slashes_percents_and_unicode_are_taken(
    engine: Engine, good: str
) -> None:
    register(engine)
    handle = await engine.start("waiter", id=good, subject=good, domain=good)
    await engine.idle()
    await engine.signal(good, good, "ignored")  # a signal nobody waits for is kept
    await handle.signal("go", good)
    assert await handle.result(timeout=10) == good
    info = await engine.get_run(good)
    assert (info.id, info.subject, info.domain) == (good, good, good)
    assert [r.id for r in await engine.list_runs(subject=good, domain=good)] == [good]
    result = await engine.publish(good, {"k": good}, id=good, subject=good, domain=good)
    assert result.event_id == good
    assert (await engine.correlate(good, good, 1, message_id=good)).outcome == "buffered"


@pytest.mark.parametrize("blank", [" ", "   ", "\u3000", "\u2003 "])
async def test_blank_names_and_keys_are_refused(engine: Engine, blank: str) -> None:
    register(engine)
    for field, call in [
        ("name", lambda: engine.publish(blank)),
        ("name", lambda: engine.correlate(blank, "k")),
        ("key", lambda: engine.correlate("m", blank)),
        ("workflow", lambda: engine.start(blank)),
    ]:
        with pytest.raises(InvalidInputError, match=r"blank|empty") as exc_info:
            await call()
        assert exc_info.value.field == field
    await nothing_written(engine)


@pytest.mark.parametrize("not_a_string", [7, 7.5, b"id", ["id"], True])
async def test_ids_and_names_must_be_strings(engine: Engine, not_a_string: Any) -> None:
    register(engine)
    for call in (
        lambda: engine.start("echo", id=not_a_string),
        lambda: engine.publish(not_a_string),
        lambda: engine.correlate("m", not_a_string),
        lambda: engine.get_run(not_a_string),
        lambda: engine.signal(not_a_string, "go"),
    ):
        with pytest.raises(InvalidInputError, match="must be a string"):
            await call()
    await nothing_written(engine)


# -- message ids ---------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", [2**63 - 1, 2**63, 2**64, 10**30, -1, -(2**63) - 1, 0])
async def test_a_message_id_no_message_has_is_not_found_on_every_backend(
    engine: Engine, missing: int
) -> None:
    await engine.correlate("m", "k", 1)
    [kept] = await engine.messages()
    with pytest.raises(MessageNotFoundError):
        await engine.retry_message(missing)
    with pytest.raises(MessageNotFoundError):
        await engine.discard_message(missing)
    assert await engine.messages() == [kept]


@pytest.mark.parametrize("not_an_id", ["1", "٣", 1.0, True, None])
async def test_a_message_id_must_be_a_whole_number(engine: Engine, not_an_id: Any) -> None:
    await engine.correlate("m", "k", 1)
    with pytest.raises(InvalidInputError, match="whole number"):
        await engine.retry_message(not_an_id)
    with pytest.raises(InvalidInputError, match="whole number"):
        await engine.discard_message(not_an_id)
    assert len(await engine.messages()) == 1


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "10"])
async def test_a_listing_limit_must_be_a_whole_number(engine: Engine, limit: Any) -> None:
    with pytest.raises(InvalidInputError, match="limit"):
        await engine.list_runs(limit=limit)


async def test_a_huge_listing_limit_lists_everything(engine: Engine) -> None:
    register(engine)
    await engine.start("echo", id="a")
    assert [r.id for r in await engine.list_runs(limit=10**30)] == ["a"]


# -- a client that does not register what it starts ---------------------------------------------


@pytest.mark.requires("shared")
async def test_a_client_only_engine_starts_a_workflow_it_does_not_register(
    make_engine, engine_url: str
) -> None:
    client = await make_engine(url=engine_url, worker=False)
    handle = await client.start("five", {"n": 2}, id="f1", subject="s", domain="d")
    signalled = await client.signal_with_start("five", "f2", "bump", 10, input={"n": 3})
    assert signalled.id == "f2"
    pending = await client.get_run("f1")
    assert (pending.status, pending.version, pending.workflow) == (RunStatus.PENDING, "", "five")

    worker = await make_engine(url=engine_url)

    @worker.workflow(version="7")
    async def five(ctx, input):
        bump = await ctx.wait_for_signal("bump") if ctx.run_id == "f2" else 0
        return input["n"] * 5 + bump

    assert await handle.result(timeout=10) == 10
    assert await client.handle("f2").result(timeout=10) == 25
    done = await client.get_run("f1")
    assert (done.version, done.subject, done.domain) == ("7", "s", "d")


@pytest.mark.requires("shared")
async def test_the_worker_validates_the_input_of_a_run_started_by_name(
    make_engine, engine_url: str
) -> None:
    client = await make_engine(url=engine_url, worker=False)
    handle = await client.start("checked", {"n": "not a number"})
    worker = await make_engine(url=engine_url)

    def positive(value: Any) -> Any:
        if not isinstance(value.get("n"), int):
            raise ValueError("n must be a whole number")
        return value

    @worker.workflow(validate_input=positive)
    async def checked(ctx, input):
        return input

    with pytest.raises(WorkflowFailedError) as exc_info:
        await handle.result(timeout=10)
    assert exc_info.value.type == "InvalidInputError"
    assert "n must be a whole number" in exc_info.value.error_message


@pytest.mark.requires("shared")
async def test_a_client_that_registers_the_name_checks_the_input_itself(
    make_engine, engine_url: str
) -> None:
    client = await make_engine(url=engine_url, worker=False)

    def whole(value: Any) -> int:
        if not isinstance(value, int):
            raise ValueError("a whole number, please")
        return value

    @client.workflow(validate_input=whole)
    async def typed(ctx, n):
        return n

    with pytest.raises(InvalidInputError):
        await client.start("typed", "not a number")
    # Edge checks hold for names started by name, too.
    with pytest.raises(InvalidInputError, match="characters long"):
        await client.start("x" * (MAX_NAME_LENGTH + 1))
    with pytest.raises(SerializationError, match="nested deeper"):
        await client.start("unknown", nested(MAX_DEPTH + 1))
    with pytest.raises(SerializationError, match="not a finite number"):
        await client.signal_with_start("unknown", "u", "go", input=math.nan)
    assert await client.list_runs() == []


async def test_an_engine_that_works_still_refuses_a_name_it_does_not_know(
    engine: Engine,
) -> None:
    with pytest.raises(UnknownWorkflowError, match="ghost"):
        await engine.start("ghost")
    with pytest.raises(UnknownWorkflowError, match="ghost"):
        await engine.signal_with_start("ghost", "g", "go")
    assert await engine.list_runs() == []


# -- the command line ----------------------------------------------------------------------------
