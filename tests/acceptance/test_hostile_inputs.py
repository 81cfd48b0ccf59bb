"""Hostile input at every edge (the Python API, the command line, HTTP), on every
backend: each call answers within its timeout with a result or a ``ParkwayError``
naming what is wrong (a 4xx over HTTP, a clean error and a non-zero exit from the
CLI), never another exception, a hang or a 5xx; what is taken comes back
unchanged; the store works on afterwards.

The families: ids and names (types, NUL, lengths, values whose ``repr`` raises
or is 5,000 digits long), numbers (64-bit bounds, in admission options and
over HTTP), durations and timeouts, flow files, workflow options, and the HTTP
edge itself (bodies cut short or too large, query strings held to the schema).
Hypothesis draws the values where a family has many.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx

from parkway import (
    Concurrency,
    Engine,
    FlowDefinitionError,
    InvalidDurationError,
    ParkwayError,
    RateLimit,
    Retry,
    RunStatus,
    WorkflowFailedError,
)
from parkway.cli import cli
from parkway.errors import shown
from parkway.http import create_app
from parkway.limits import (
    MAX_DURATION_SECONDS,
    MAX_ID_LENGTH,
    MAX_INT,
    MAX_JSON_INT,
    MAX_NAME_LENGTH,
    MAX_RETRY_FACTOR,
    MAX_STEP_NAME_LENGTH,
    MIN_INT,
)
from parkway.testing import ManualClock
from tests.helpers import examples

from ..conftest import MakeEngine
from .test_hostile import works
from .test_http_errors import refused

# Every call here answers within this (a hostile value must never make one wait).
ANSWER_WITHIN = 10.0
SETTINGS = settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


# -- hostile values ------------------------------------------------------------------------------


class RaisingRepr:
    """An object whose repr() and str() raise."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")

    def __str__(self) -> str:
        raise RuntimeError("no str for you")


class RaisingReprText(str):
    """A str whose repr() raises."""

    __slots__ = ()

    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


WIDE_INTS = [2**63, 2**64, -(2**63) - 1, 10**81, -(10**81), 10**5000, -(10**5000)]
ODD_OBJECTS: list[Any] = [
    RaisingRepr(),
    RaisingReprText("x"),
    RaisingReprText("a\x00b"),
    b"bytes",
    None,
    True,
    [],
    {},
    object(),
    1.5,
    math.nan,
    math.inf,
]
hostile = st.one_of(
    st.sampled_from(WIDE_INTS + ODD_OBJECTS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=20),  # control characters and lone surrogates included
    st.text(min_size=MAX_NAME_LENGTH - 1, max_size=MAX_ID_LENGTH + 2, alphabet="ab\x00"),
)
# None of them a duration one would wait for: each is refused, or shorter than 50 ms.
hostile_durations = st.one_of(
    st.sampled_from(
        [
            "abc",
            "1e400s",
            "-1s",
            "99999999999999999999999999s",
            10**400,
            -(10**400),
            math.nan,
            math.inf,
            -math.inf,
            -1,
            True,
            timedelta.max,
            timedelta(days=-1),
            RaisingRepr(),
            RaisingReprText("1s"),
            [],
            # (Not None: it is "no limit", and result() would wait for the parked run.)
        ]
    ),
    st.floats(max_value=-1e-300) | st.floats(min_value=MAX_DURATION_SECONDS * 1.01),
    st.floats(min_value=0, max_value=0.05),
    st.integers(max_value=-1) | st.integers(min_value=MAX_DURATION_SECONDS + 1),
    st.text(alphabet="msh.-_ \x00", max_size=8),  # (no digit: never a duration)
)
# JSON values parkway stores: what goes in comes out (ints within 64 bits, finite floats).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=MIN_INT, max_value=MAX_JSON_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


async def answers(call: Callable[[], Awaitable[Any]]) -> Any:
    """The call's result, or the ParkwayError it raised (any other error fails the test,
    and so does a call that takes longer than ``ANSWER_WITHIN``)."""
    try:
        return await asyncio.wait_for(call(), ANSWER_WITHIN)
    except ParkwayError as exc:
        assert str(exc), "an error with no message"
        return exc


def answers_now(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ParkwayError as exc:
        assert str(exc)
        return exc


def register(engine: Engine) -> None:
    if "parked" in engine.workflows():
        return

    @engine.workflow()
    async def parked(ctx, input):
        ctx.on_update("add", lambda payload: payload)
        return [input, await ctx.wait_for_signal("go")]

    @engine.workflow(on_event="thing.happened")
    async def on_thing(ctx, payload):
        return payload

    @engine.workflow(on_message="note")
    async def on_note(ctx, payload):
        return payload


async def healthy(engine: Engine) -> None:
    """Nothing is left half done, and the engine still runs a run end to end."""
    await engine.idle(timeout=ANSWER_WITHIN)
    for run in await engine.list_runs(limit=1000):
        assert run.status is not RunStatus.RUNNING, run  # (none left retrying for ever)
    await works(engine)


# -- ids and names through the Python API --------------------------------------------------------


def name_calls(engine: Engine, value: Any) -> list[Callable[[], Awaitable[Any]]]:
    """Every client call, with ``value`` in one of its id, name or key slots."""
    return [
        lambda: engine.start(value),
        lambda: engine.start("parked", id=value),
        lambda: engine.start("parked", subject=value),
        lambda: engine.start("parked", domain=value),
        lambda: engine.start("parked", priority=value),
        lambda: engine.get_run(value),
        lambda: engine.history(value),
        lambda: engine.handle(value).result(timeout=0),
        lambda: engine.signal(value, "go"),
        lambda: engine.signal("r", value),
        lambda: engine.signal_with_start("parked", value, "zz"),
        lambda: engine.signal_with_start("parked", "r2", value),
        lambda: engine.publish(value),
        lambda: engine.publish("thing.none", id=value),
        lambda: engine.publish("thing.none", subject=value),
        lambda: engine.publish("thing.none", domain=value),
        lambda: engine.correlate(value, "k", ttl=0),
        lambda: engine.correlate("nobody", value, ttl=0),
        lambda: engine.correlate("nobody", "k", message_id=value, ttl=0),
        lambda: engine.messages(status=value),
        lambda: engine.retry_message(value),
        lambda: engine.discard_message(value),
        lambda: engine.update("r", value, timeout=0.01),
        lambda: engine.update("r", "add", id=value, timeout=0.01),
        lambda: engine.value("r", value),
        lambda: engine.list_runs(workflow=value),
        lambda: engine.list_runs(limit=value),
        lambda: engine.list_runs(status=value),
        lambda: engine.list_runs(created_after=value),
        lambda: engine.cancel_runs(subject=value),
        lambda: engine.cancel_runs(created_before=value),
        lambda: engine.subscriptions(run_id=value),
        lambda: engine.pause(value),
        lambda: engine.add_schedule(value, "parked", "0 0 1 1 *"),
        lambda: engine.add_schedule("s", "parked", value),
        lambda: engine.add_schedule("s", "parked", "0 0 1 1 *", timezone=value),
        lambda: engine.pause_schedule(value),
        lambda: engine.complete_callback(value, 1),
        lambda: engine.fail_callback("no-such-token", value),
        lambda: engine.tasks(status=value),
        lambda: engine.tasks(assignee=value),
        lambda: engine.tasks(workflow=value),
        lambda: engine.tasks(limit=value),
        lambda: engine.get_task(value),
        lambda: engine.complete_task(value, 1),
        lambda: engine.complete_task("no-such-task", 1, by=value),
    ]


@SETTINGS
@given(value=hostile)
async def test_hostile_ids_and_names_get_a_parkway_error_or_an_answer(
    engine: Engine, value: Any
) -> None:
    register(engine)
    await engine.start("parked", id="r")
    for call in name_calls(engine, value):
        await answers(call)
    for option in ("name", "version", "on_event", "on_message", "unique_per_subject"):

        async def flow(ctx, input):
            return input

        answers_now(lambda o=option: engine.workflow(**{"name": "opt", o: value})(flow))


async def test_the_store_is_healthy_after_hostile_names(engine: Engine) -> None:
    register(engine)
    await engine.start("parked", id="r")
    for value in [*WIDE_INTS, *ODD_OBJECTS, "a\x00b", "\ud800", "x" * 100_000]:
        for call in name_calls(engine, value):
            await answers(call)
    await healthy(engine)


async def test_error_messages_are_built_safely(engine: Engine) -> None:
    register(engine)
    for value, shows in [
        (10**81, "<an int of about 82 digits>"),
        (10**5000, "<an int of about 5,001 digits>"),
        (RaisingRepr(), "<RaisingRepr object>"),
    ]:
        error = await answers(lambda value=value: engine.start("parked", id=value))
        assert isinstance(error, ParkwayError) and shows in str(error), error
        assert len(str(error)) < 300
    error = await answers(lambda: engine.start("parked", id=RaisingReprText("a\x00b")))
    assert isinstance(error, ParkwayError) and "'a\\x00b' holds a NUL" in str(error)
    assert shown("x" * 10_000).endswith("(10000 characters)")


async def test_a_nul_version_is_refused_the_same_on_every_backend(engine: Engine) -> None:
    async def flow(ctx, input):
        return input

    for version in ("\x00", "1\x00", "", " ", 1, None, "v" * (MAX_NAME_LENGTH + 1)):
        error = answers_now(lambda version=version: engine.workflow("v", version=version)(flow))
        assert isinstance(error, ParkwayError) and getattr(error, "field", None) == "version"
    engine.workflow("v", version="v" * MAX_NAME_LENGTH)(flow)
    assert await (await engine.start("v", 7)).result(timeout=ANSWER_WITHIN) == 7


BAD_STEP_NAMES = ["a\x00b", "\x00", "", "   ", 7, 2**64, "s" * (MAX_STEP_NAME_LENGTH + 1), "\ud800"]


async def test_a_bad_step_name_fails_at_the_call_the_same_on_every_backend(
    engine: Engine,
) -> None:
    ran: list[int] = []

    def side_effect() -> int:
        ran.append(1)
        return 1

    # (By index: a name of 2**64 or with a lone surrogate could be no run's input.)
    @engine.workflow()
    async def caught(ctx, index):
        try:
            await ctx.step(side_effect, name=BAD_STEP_NAMES[index])
        except ParkwayError as exc:
            return [type(exc).__name__, getattr(exc, "field", None)]
        return "taken"

    @engine.workflow()
    async def uncaught(ctx, index):
        return await ctx.step(side_effect, name=BAD_STEP_NAMES[index])

    for index, name in enumerate(BAD_STEP_NAMES):
        caught_it = await (await engine.start("caught", index)).result(timeout=ANSWER_WITHIN)
        assert caught_it == ["InvalidArgumentError", "name"], name
        with pytest.raises(WorkflowFailedError) as failed:
            await (await engine.start("uncaught", index)).result(timeout=ANSWER_WITHIN)
        assert failed.value.type == "InvalidArgumentError"
        assert "step name" in failed.value.error_message
    assert ran == []
    await healthy(engine)


async def test_hostile_values_given_to_ctx_are_parkway_errors_in_the_run(
    make_engine: MakeEngine,
) -> None:
    engine = await make_engine(clock=None)  # (real time: its few valid waits end by themselves)

    @engine.workflow()
    async def leaf(ctx, input):
        return input

    # (Module-level values, not the run's input: most could be no run's input.)
    @engine.workflow()
    async def inside(ctx, input):
        others = []
        for value in [*WIDE_INTS, *ODD_OBJECTS, "a\x00b", "\ud800", -(10**400)]:
            # (None waits for ever, a float like 1.5 is a fine wait: each kept short.)
            short = value is None or (isinstance(value, float) and math.isfinite(value))
            timeout = 0.001 if short else value
            for label, call in [
                ("sleep", lambda v=timeout: ctx.sleep(v)),
                ("sleep_until", lambda v=value: ctx.sleep_until(v)),
                ("signal", lambda v=value: ctx.wait_for_signal(v, timeout=0.001)),
                ("signal timeout", lambda v=timeout: ctx.wait_for_signal("s", timeout=v)),
                ("event", lambda v=value: ctx.wait_for_event(v, timeout=0.001)),
                (
                    "event subject",
                    lambda v=value: ctx.wait_for_event("e", subject=v, timeout=0.001),
                ),
                (
                    "event match",
                    lambda v=value: ctx.wait_for_event("e", match={"a": v}, timeout=0.001),
                ),
                ("message", lambda v=value: ctx.wait_for_message(v, "k", timeout=0.001)),
                ("message key", lambda v=value: ctx.wait_for_message("m", v, timeout=0.001)),
                ("publish", lambda v=value: ctx.publish(v)),
                ("publish id", lambda v=value: ctx.publish("e", id=v)),
                ("child id", lambda v=value: ctx.start_child("leaf", id=v)),
                ("step retry", lambda v=value: ctx.step(len, "x", retry=v)),
                ("human task", lambda v=value: ctx.human_task(v, timeout=0.001)),
                ("human task title", lambda v=value: ctx.human_task("t", title=v, timeout=0.001)),
                ("human task form", lambda v=value: ctx.human_task("t", form=v, timeout=0.001)),
                (
                    "human task assignees",
                    lambda v=value: ctx.human_task("t", assignees=[v], timeout=0.001),
                ),
                ("human task timeout", lambda v=timeout: ctx.human_task("t", timeout=v)),
            ]:
                try:
                    await call()
                except ParkwayError:
                    pass
                except Exception as exc:
                    others.append(f"{label}: {type(exc).__name__}")
            for label, plain in [
                ("set_value", lambda v=value: ctx.set_value(v, 1)),
                ("on_update", lambda v=value: ctx.on_update(v, len)),
                ("callback", lambda v=timeout: ctx.callback(timeout=v)),
            ]:
                try:
                    plain()
                except ParkwayError:
                    pass
                except Exception as exc:
                    others.append(f"{label}: {type(exc).__name__}")
        return others

    assert await (await engine.start("inside")).result(timeout=60) == []
    await healthy(engine)


async def test_step_names_at_their_limit_are_taken(engine: Engine) -> None:
    name = "s" * MAX_STEP_NAME_LENGTH

    @engine.workflow()
    async def long_step(ctx, input):
        return await ctx.step(lambda: 5, name=name)

    assert await (await engine.start("long_step")).result(timeout=ANSWER_WITHIN) == 5
    [entry] = await engine.history((await engine.list_runs())[0].id)
    assert entry.name == name


async def test_workflow_options_of_the_wrong_type_name_the_option(engine: Engine) -> None:
    async def flow(ctx, input):
        return input

    for option, value in [
        ("on_event", 5),
        ("on_event", [5]),
        ("on_event", ["ok", "a\x00b"]),
        ("on_message", 5),
        ("on_message", ""),
        ("unique_per_subject", "yes"),
        ("validate_input", 5),
        ("concurrency", 5),
        ("rate_limit", 5),
        ("priority", 5),
        ("version", 1),
    ]:
        error = answers_now(lambda o=option, v=value: engine.workflow("w", **{o: v})(flow))
        assert isinstance(error, ParkwayError), (option, value)
        assert error.field == option, (option, error)  # type: ignore[attr-defined]
        assert option in str(error)
    assert "w" not in engine.workflows()


async def test_a_store_url_with_a_nul_is_a_parkway_error() -> None:
    for url in ("sqlite:///\x00", "sqlite:///a\x00b.db", "memory://\n", 5, b"memory://"):
        error = answers_now(lambda url=url: Engine(url))
        assert isinstance(error, ParkwayError) and error.field == "url", url  # type: ignore[attr-defined]
    secret = "postgresql://user:hunter2@localhost/db\x00"
    error = answers_now(lambda: Engine(secret))
    assert isinstance(error, ParkwayError) and "hunter2" not in str(error)


# -- numbers -------------------------------------------------------------------------------------


@SETTINGS
@given(value=hostile)
def test_admission_and_retry_bounds_are_checked_at_construction(value: Any) -> None:
    for make in (
        lambda: Concurrency(value),
        lambda: Concurrency(1, key=value),
        lambda: Concurrency(1, when_full=value),
        lambda: RateLimit(value, "1s"),
        lambda: RateLimit(1, value),
        lambda: Retry(max_attempts=value),
        lambda: Retry(backoff=value),
        lambda: Retry(factor=value),
        lambda: Retry(max_backoff=value),
    ):
        made = answers_now(make)
        if isinstance(made, Retry):
            # Whatever it took, a delay is a finite number of seconds at any attempt.
            for attempt in (1, 2, 64, 10_000, 2**62):
                assert 0 <= made.delay(attempt) < math.inf


@pytest.mark.parametrize(
    "make",
    [
        lambda: Concurrency(2**63),
        lambda: Concurrency(-1),
        lambda: RateLimit(2**63, "1s"),
        lambda: RateLimit(1, 0),
        lambda: Retry(factor=10**400),
        lambda: Retry(factor=math.nan),
        lambda: Retry(factor=math.inf),
        lambda: Retry(factor=MAX_RETRY_FACTOR + 1),
        lambda: Retry(factor=True),
        lambda: Retry(backoff=-1),
        lambda: Retry(backoff=math.nan),
        lambda: Retry(max_backoff=math.inf),
        lambda: Retry(max_attempts=2**63),
        lambda: Retry(max_attempts=True),
    ],
)
def test_out_of_range_options_are_refused_at_construction(make: Callable[[], Any]) -> None:
    with pytest.raises(ParkwayError):
        make()


async def test_limits_at_64_bits_work_on_every_backend(engine: Engine) -> None:
    @engine.workflow(
        concurrency=Concurrency(MAX_INT),
        rate_limit=RateLimit(MAX_INT, "1s"),
    )
    async def wide(ctx, input):
        return await ctx.step(
            lambda: input, retry=Retry(max_attempts=MAX_INT, factor=MAX_RETRY_FACTOR)
        )

    handle = await engine.start("wide", {"n": MAX_JSON_INT, "m": MIN_INT}, priority=MAX_INT)
    assert await handle.result(timeout=ANSWER_WITHIN) == {"n": MAX_JSON_INT, "m": MIN_INT}
    for value in (MAX_INT + 1, MIN_INT - 1):
        with pytest.raises(ParkwayError, match="priority"):
            await engine.start("wide", priority=value)


async def test_a_retry_whose_delay_would_overflow_waits_its_cap(
    engine: Engine, clock: ManualClock
) -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 4:
            raise ValueError("not yet")
        return "done"

    retry = Retry(max_attempts=5, backoff="1ms", factor=MAX_RETRY_FACTOR, max_backoff="5ms")
    assert retry.delay(10**6) == 0.005

    @engine.workflow()
    async def retried(ctx, input):
        return await ctx.step(flaky, retry=retry)

    handle = await engine.start("retried")
    for _ in range(200):
        if (await handle.info()).status is RunStatus.COMPLETED:
            break
        await clock.advance("10ms")
        await engine.idle(timeout=ANSWER_WITHIN)
    assert await handle.result(timeout=ANSWER_WITHIN) == "done"


# -- durations and timeouts ----------------------------------------------------------------------


@SETTINGS
@given(timeout=hostile_durations)
async def test_hostile_timeouts_answer_at_once_or_within_them(engine: Engine, timeout: Any) -> None:
    register(engine)
    await engine.start("parked", id="r")
    for call in (
        lambda: engine.handle("r").result(timeout=timeout),
        lambda: engine.idle(timeout=timeout),
        lambda: engine.value("r", "k", timeout=timeout),
        lambda: engine.update("r", "add", 1, timeout=timeout),
        lambda: engine.correlate("nobody", "k", ttl=timeout),
        lambda: engine.retry_message(1, ttl=timeout),
    ):
        try:
            # (A valid timeout of hours would be waited for: none is given.)
            await asyncio.wait_for(call(), ANSWER_WITHIN)
        except (ParkwayError, TimeoutError) as exc:
            assert str(exc)


async def test_result_idle_value_update_refuse_a_bad_timeout(engine: Engine) -> None:
    register(engine)
    handle = await engine.start("parked", id="r")
    await engine.idle()
    for timeout in ("abc", 10**400, -(10**400), math.nan, -1, math.inf, RaisingRepr()):
        for call in (
            lambda t=timeout: handle.result(timeout=t),
            lambda t=timeout: engine.idle(timeout=t),
            lambda t=timeout: handle.value("k", timeout=t),
            lambda t=timeout: handle.update("add", 1, timeout=t),
        ):
            with pytest.raises(InvalidDurationError, match="timeout"):
                await asyncio.wait_for(call(), ANSWER_WITHIN)
    await healthy(engine)


async def test_result_takes_a_duration_and_times_out_within_it(engine: Engine) -> None:
    register(engine)
    handle = await engine.start("parked", id="r")
    for timeout in ("50ms", timedelta(milliseconds=50), 0.05, 0):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(handle.result(timeout=timeout), 5)


# -- flow files ----------------------------------------------------------------------------------

NOT_UTF8 = [b'{"id": "\xff"}', b"\xfe\xff\x00{", '{"id": "é"}'.encode("latin-1"), b'{"id": "\xc3']


def test_a_flow_file_that_is_not_utf8_is_a_flow_definition_error(tmp_path: Path) -> None:
    # (The flow loader reads no store: one engine stands for every backend.)
    engine = Engine("memory://")
    for index, raw in enumerate(NOT_UTF8):
        path = tmp_path / f"flow{index}.json"
        path.write_bytes(raw)
        for source in (path, str(path), raw):
            with pytest.raises(FlowDefinitionError, match="UTF-8"):
                engine.add_flow(source)
        result = CliRunner().invoke(cli, ["flows", "validate", str(path)])
        assert result.exit_code != 0
        assert isinstance(result.exception, SystemExit), result.exception
        assert "UTF-8" in result.output


def test_a_flow_source_that_names_no_file_is_a_flow_definition_error() -> None:
    engine = Engine("memory://")
    for source in ("a\x00b.json", "\ud800.json", "x" * 5000, 5, None, RaisingRepr()):
        with pytest.raises(FlowDefinitionError):
            engine.add_flow(source)


# -- the command line ----------------------------------------------------------------------------


@pytest.fixture
async def cli_url(engine: Engine, engine_url: str, tmp_path: Path) -> str:
    """The test's store, as the CLI reaches it (the engine made its schema)."""
    if engine_url != "memory://":
        return engine_url
    # (memory:// in the CLI would be a store of its own: a file stands in for it.)
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    async with Engine(url, worker=False):
        pass
    return url


def run_cli(url: str, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--url", url, *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args,
        result.output,
        result.exception,
    )
    assert "Traceback" not in result.output
    return result


HOSTILE_CLI_ARGS = [
    ["publish", "thing", '{"a": 12345678901234567890123}'],
    ["publish", "thing", "[1, -9223372036854775809]"],
    ["correlate", "note", "k", '{"big": 1' + "0" * 5000 + "}"],
    ["start", "parked", "184467440737095516150"],
    ["signal", "r", "go", '{"x": [99999999999999999999]}'],
    ["publish", "a\x01b", "{}"],
    ["publish", "thing", "{}", "--id", "a\x00b"],
    ["correlate", "note", "x" * 1000, "{}"],
    ["signal", "r" * 10_000, "go", "{}"],
    ["start", "parked", "{}", "--id", "\t"],
]


def test_the_cli_refuses_hostile_input_cleanly(cli_url: str) -> None:
    for args in HOSTILE_CLI_ARGS:
        result = run_cli(cli_url, *args)
        assert result.exit_code != 0, (args, result.output)


def test_the_cli_keeps_integers_at_64_bits(cli_url: str) -> None:
    payload = {"max": MAX_JSON_INT, "min": MIN_INT, "float": 1.5e300}
    result = run_cli(cli_url, "correlate", "kept", "k", json.dumps(payload))
    assert result.exit_code == 0, result.output
    listed = run_cli(cli_url, "messages", "--json")
    assert listed.exit_code == 0, listed.output
    [message] = json.loads(listed.output)
    assert message["payload"] == payload


# -- HTTP ----------------------------------------------------------------------------------------


@pytest.fixture
async def client(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    register(engine)
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as c:
        yield c


WIDE_LITERALS = [
    "12345678901234567890123",
    "18446744073709551616",
    "-9223372036854775809",
    "1" + "0" * 5000,
]


def post_json(text: str) -> dict[str, Any]:
    return {"content": text, "headers": {"content-type": "application/json"}}


async def test_an_integer_outside_64_bits_is_422_naming_its_field_in_every_body(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    await client.post("/runs", json={"workflow": "parked", "id": "r"})
    await engine.idle()
    cases = [
        ("/events", '{"name": "thing.happened", "payload": {"n": LIT}}', ["body", "payload", "n"]),
        ("/messages", '{"name": "note", "key": "k", "payload": [0, LIT]}', ["body", "payload", 1]),
        (
            "/runs",
            '{"workflow": "parked", "input": {"a": {"b": LIT}}}',
            ["body", "input", "a", "b"],
        ),
        ("/runs/r/signals/go", "LIT", ["body"]),
        ("/runs/r/signals/go", '{"deep": [[LIT]]}', ["body", "deep", 0, 0]),
        ("/runs/r/updates/add", '{"payload": LIT, "timeout": 1}', ["body", "payload"]),
        ("/runs", '{"workflow": "parked", "priority": LIT}', ["body", "priority"]),
    ]
    for literal, (path, template, loc) in itertools.product(WIDE_LITERALS, cases):
        text = template.replace("LIT", literal)
        response = await client.post(path, **post_json(text))
        [error] = refused(response, 422)["detail"]
        assert error["loc"] == loc, (path, error)
        if error["type"] == "int_range":
            assert "64-bit" in error["msg"]
    # Nothing was written but the parked run, which still waits, unsignalled.
    await engine.idle()
    assert [r.id for r in await engine.list_runs()] == ["r"]
    assert (await engine.get_run("r")).status is RunStatus.PARKED
    assert await engine.messages() == []


async def test_digits_in_strings_and_floats_are_not_integers(client: httpx.AsyncClient) -> None:
    data = {"s": "12345678901234567890123", "f": 1.2345678901234568e22, "max": MAX_JSON_INT}
    created = await client.post("/runs", json={"workflow": "parked", "id": "n", "input": data})
    assert created.status_code == 201, created.text
    assert (await client.get("/runs/n")).json()["input"] == data


@SETTINGS
@given(payload=json_values)
async def test_http_payloads_come_back_unchanged(
    client: httpx.AsyncClient, engine: Engine, payload: Any
) -> None:
    start = json.dumps({"workflow": "parked", "input": payload})
    created = await client.post("/runs", **post_json(start))
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    await engine.idle()
    signalled = await client.post(f"/runs/{run_id}/signals/go", **post_json(json.dumps(payload)))
    assert signalled.status_code == 202, signalled.text
    await engine.idle()
    run = (await client.get(f"/runs/{run_id}")).json()
    assert run["output"] == [payload, payload], run
    message = await client.post(
        "/messages", json={"name": "kept", "key": run_id, "payload": payload}
    )
    assert message.json()["outcome"] == "buffered"
    listed = [m for m in (await client.get("/messages")).json() if m["key"] == run_id]
    assert listed[0]["payload"] == payload


hostile_json_text = st.one_of(
    st.sampled_from(
        [
            "1" * 30,
            "-" + "9" * 25,
            "1e400",
            "NaN",
            '"\\ud800"',
            "[" * 2000 + "]" * 2000,
            '{"a": 1, "a": 2}',
            "\x00",
            "{",
            '{"name": "\\u0000"}',
            "true",
            '"' + "x" * 1000 + '"',
        ]
    ),
    st.text(max_size=40),
    json_values.map(json.dumps),
)


@SETTINGS
@given(text=hostile_json_text)
async def test_hostile_bodies_get_a_4xx_or_an_answer_never_a_5xx(
    client: httpx.AsyncClient, engine: Engine, text: str
) -> None:
    await client.post("/runs", json={"workflow": "parked", "id": "r"})
    for path in (
        "/events",
        "/messages",
        "/runs",
        "/runs/r/signals/go",
        "/runs/r/updates/add",
        "/messages/1/retry",
        "/runs/cancel",
    ):
        for body in (
            text,
            f'{{"name": "thing", "key": "k", "workflow": "parked", "payload": {text}}}',
        ):
            response = await asyncio.wait_for(
                client.post(
                    path,
                    content=body.encode("utf-8", "surrogatepass"),
                    headers={"content-type": "application/json"},
                ),
                ANSWER_WITHIN,
            )
            assert response.status_code < 500, (path, body[:100], response.text)
            if response.status_code >= 400:
                refused(response, response.status_code)


BAD_QUERIES = [
    "created_before=0.5",
    "created_after=1700000000",
    "created_before=2026-01-01",
    "created_before=2026-01-01T00:00:00",
    "limit=5_0",
    "limit=1e2",
    "limit=%D9%A3",
    "limit=0",
    "limit=99999999999999999999999",
    "status=nope",
    "workflow=a%00b",
]


async def test_query_parameters_are_held_to_the_schema(client: httpx.AsyncClient) -> None:
    for query in BAD_QUERIES:
        response = await client.get(f"/runs?{query}")
        [error] = refused(response, 422)["detail"]
        assert error["loc"] == ["query", query.split("=")[0]], query


async def test_query_parameters_the_schema_takes_are_taken(client: httpx.AsyncClient) -> None:
    for query in (
        "created_before=2026-01-31T12:00:00Z",
        "created_after=2026-01-31T12:00:00%2B02:00",
        "limit=1",
        "limit=1000",
    ):
        assert (await client.get(f"/runs?{query}")).status_code == 200, query
    value = await client.get("/runs/r/values/k?timeout=nan")
    assert refused(value, 422)["detail"][0]["loc"] == ["query", "timeout"]


async def test_the_store_is_healthy_after_hostile_http(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    for literal in WIDE_LITERALS:
        await client.post("/runs", **post_json(f'{{"workflow": "parked", "input": {literal}}}'))
        await client.post("/events", **post_json(f'{{"name": "x", "payload": {literal}}}'))
    await healthy(engine)


# -- the real server: its log and its connections ------------------------------------------------


# (The fixture stops the server and finds no "Traceback" in its log.)
