"""Callbacks: ``ctx.callback()``, ``cb.wait()``, ``engine.complete_callback`` /
``fail_callback``.

Every test runs on every backend (the ``engine`` fixture), through the public API.
The HTTP routes (``POST /callbacks/{token}``, ``.../fail``) are at the end.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest

from parkway import (
    CallbackFailedError,
    CallbackNotFoundError,
    Engine,
    InvalidArgumentError,
    InvalidInputError,
    RunClosedError,
    RunStatus,
    SerializationError,
    WaitTimeoutError,
)
from parkway.http import create_app
from parkway.http.access import AccessLog
from parkway.testing import ManualClock


def register_payment(engine: Engine, handed: list[str], **callback: Any) -> None:
    """A workflow that hands its callback's token to a 'provider' (a step) and waits."""

    def hand_over(token: str) -> None:
        handed.append(token)

    @engine.workflow()
    async def payment(ctx, _input):
        cb = ctx.callback(**callback)
        await ctx.step(hand_over, cb.token)
        return {"paid": await cb.wait(), "url": cb.url}


@pytest.mark.replays
async def test_a_callback_completed_resumes_its_run_with_the_value(engine: Engine) -> None:
    handed: list[str] = []
    register_payment(engine, handed)
    handle = await engine.start("payment")
    await engine.idle()
    assert (await handle.info()).status == RunStatus.PARKED
    [token] = handed
    assert len(token) >= 22  # at least 128 bits, URL-safe base64

    done = await engine.complete_callback(token, {"amount": 12})

    assert (done.status, done.value, done.duplicate) == ("completed", {"amount": 12}, False)
    assert done.run_id == handle.id
    # (Without a public URL, no URL; replayed, the token is the one handed over.)
    assert await handle.result(timeout=10) == {"paid": {"amount": 12}, "url": None}


async def test_tokens_differ_between_callbacks(engine: Engine) -> None:
    handed: list[str] = []
    register_payment(engine, handed)
    first, second = await engine.start("payment"), await engine.start("payment")
    await engine.idle()
    assert len(set(handed)) == 2
    for token in handed:
        await engine.complete_callback(token)
    assert (await first.result(timeout=10))["paid"] is None
    assert (await second.result(timeout=10))["paid"] is None


async def test_a_completion_before_the_wait_is_kept(engine: Engine) -> None:
    handed: list[str] = []

    def hand_over(token: str) -> None:
        handed.append(token)

    @engine.workflow()
    async def early(ctx, _input):
        cb = ctx.callback()
        await ctx.step(hand_over, cb.token)
        await ctx.wait_for_signal("go")  # the provider answers meanwhile
        return await cb.wait()

    handle = await engine.start("early")
    await engine.idle()
    result = await engine.complete_callback(handed[0], "ok")
    assert not result.duplicate
    await handle.signal("go")
    assert await handle.result(timeout=10) == "ok"


async def test_a_failed_callback_raises_callback_failed_error_in_the_run(engine: Engine) -> None:
    handed: list[str] = []

    def hand_over(token: str) -> None:
        handed.append(token)

    @engine.workflow()
    async def declined(ctx, _input):
        cb = ctx.callback()
        await ctx.step(hand_over, cb.token)
        try:
            await cb.wait()
        except CallbackFailedError as exc:
            return f"declined: {exc.message}"
        return "paid"

    handle = await engine.start("declined")
    await engine.idle()
    failed = await engine.fail_callback(handed[0], "card expired")
    assert (failed.status, failed.message, failed.value) == ("failed", "card expired", None)
    assert await handle.result(timeout=10) == "declined: card expired"


async def test_an_uncaught_callback_failure_fails_the_run(engine: Engine) -> None:
    handed: list[str] = []
    register_payment(engine, handed)
    handle = await engine.start("payment")
    await engine.idle()
    await engine.fail_callback(handed[0], "refused")
    with pytest.raises(Exception, match="CallbackFailedError: refused"):
        await handle.result(timeout=10)


async def test_completing_twice_returns_the_first_outcome_and_changes_nothing(
    engine: Engine,
) -> None:
    handed: list[str] = []

    def hand_over(token: str) -> None:
        handed.append(token)

    @engine.workflow()
    async def twice(ctx, _input):
        cb = ctx.callback()
        await ctx.step(hand_over, cb.token)
        await ctx.wait_for_signal("go")
        return await cb.wait()

    handle = await engine.start("twice")
    await engine.idle()
    [token] = handed
    first = await engine.complete_callback(token, 1)
    again = await engine.complete_callback(token, 2)
    failed = await engine.fail_callback(token, "too late")
    assert (first.value, first.duplicate) == (1, False)
    assert (again.status, again.value, again.duplicate) == ("completed", 1, True)
    assert (failed.status, failed.value, failed.duplicate) == ("completed", 1, True)
    await handle.signal("go")
    assert await handle.result(timeout=10) == 1
    # After the run took it, still the first outcome, still nothing changed.
    assert (await engine.complete_callback(token, 3)).value == 1


async def test_a_failure_first_is_the_outcome_a_later_completion_gets(engine: Engine) -> None:
    handed: list[str] = []
    register_payment(engine, handed)
    handle = await engine.start("payment")
    await engine.idle()
    await engine.fail_callback(handed[0], "no")
    later = await engine.complete_callback(handed[0], 5)
    assert (later.status, later.message, later.duplicate) == ("failed", "no", True)
    with pytest.raises(Exception, match="CallbackFailedError"):
        await handle.result(timeout=10)


async def test_an_unknown_token_is_callback_not_found(engine: Engine) -> None:
    handed: list[str] = []
    register_payment(engine, handed)
    await engine.start("payment")
    await engine.idle()
    token = handed[0]
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    for bad in (forged, "x", "", "é" * 10, "a" * 10_000):
        with pytest.raises(CallbackNotFoundError) as caught:
            await engine.complete_callback(bad, 1)
        assert bad not in str(caught.value) or not bad
    with pytest.raises(CallbackNotFoundError):
        await engine.fail_callback(forged, "no")


async def test_bad_arguments_are_refused_naming_the_field(engine: Engine) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        await engine.complete_callback(123, 1)  # type: ignore[arg-type]
    assert caught.value.field == "token"
    handed: list[str] = []
    register_payment(engine, handed)
    await engine.start("payment")
    await engine.idle()
    with pytest.raises(InvalidInputError) as caught:
        await engine.fail_callback(handed[0], 42)  # type: ignore[arg-type]
    assert caught.value.field == "message"
    with pytest.raises(SerializationError):
        await engine.complete_callback(handed[0], object())
    with pytest.raises(InvalidArgumentError) as caught:
        Engine("memory://", public_url="ftp://example.com")
    assert caught.value.field == "public_url"


async def test_a_callback_of_an_ended_run_cannot_be_completed(engine: Engine) -> None:
    handed: list[str] = []
    register_payment(engine, handed)
    handle = await engine.start("payment")
    await engine.idle()
    await handle.cancel()
    with pytest.raises(RunClosedError):
        await engine.complete_callback(handed[0], 1)
    # Refused, not recorded: the callback is still open (and its run still ended).
    with pytest.raises(RunClosedError):
        await engine.complete_callback(handed[0], 1)


async def test_the_url_is_built_on_the_public_url(
    make_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = await make_engine(public_url="https://flows.example.com/")
    handed: list[str] = []
    register_payment(engine, handed)
    handle = await engine.start("payment")
    await engine.idle()
    await engine.complete_callback(handed[0], "x")
    result = await handle.result(timeout=10)
    assert result["url"] == f"https://flows.example.com/callbacks/{handed[0]}"

    monkeypatch.setenv("PARKWAY_PUBLIC_URL", "http://localhost:8080")
    other = await make_engine()
    register_payment(other, handed)
    handle = await other.start("payment")
    await other.idle()
    await other.complete_callback(handed[1], "y")
    result = await handle.result(timeout=10)
    assert result["url"] == f"http://localhost:8080/callbacks/{handed[1]}"


async def test_the_callback_timeout_raises_wait_timeout_error(
    engine: Engine, clock: ManualClock
) -> None:
    handed: list[str] = []
    register_payment(engine, handed, timeout="1h")
    handle = await engine.start("payment")
    await engine.idle()
    await clock.advance("61m")
    with pytest.raises(Exception, match="WaitTimeoutError"):
        await handle.result(timeout=10)


async def test_the_timeout_counts_from_the_callback_not_the_wait(
    engine: Engine, clock: ManualClock
) -> None:
    @engine.workflow()
    async def slow_to_wait(ctx, _input):
        cb = ctx.callback(timeout="1h")
        await ctx.sleep("50m")
        try:
            return await cb.wait()
        except WaitTimeoutError:
            return "timed out"

    handle = await engine.start("slow_to_wait")
    await engine.idle()
    await clock.advance("50m")
    await engine.idle()
    await clock.advance("11m")
    assert await handle.result(timeout=10) == "timed out"


async def test_wait_in_first_the_callback_wins(engine: Engine, clock: ManualClock) -> None:
    handed: list[str] = []

    def hand_over(token: str) -> None:
        handed.append(token)

    @engine.workflow()
    async def approve_or_late(ctx, _input):
        cb = ctx.callback()
        await ctx.step(hand_over, cb.token)
        which, value = await ctx.first(
            approved=cb.wait(), late=ctx.sleep("1d"), cancelled=ctx.wait_for_signal("cancel")
        )
        return [which, value]

    handle = await engine.start("approve_or_late")
    await engine.idle()
    await engine.complete_callback(handed[0], {"ok": True})
    assert await handle.result(timeout=10) == ["approved", {"ok": True}]
    await clock.advance("2d")  # the withdrawn timer does nothing
    assert (await handle.info()).status == RunStatus.COMPLETED


async def test_wait_in_first_the_timer_wins(engine: Engine, clock: ManualClock) -> None:
    handed: list[str] = []

    def hand_over(token: str) -> None:
        handed.append(token)

    @engine.workflow()
    async def approve_or_late(ctx, _input):
        cb = ctx.callback()
        await ctx.step(hand_over, cb.token)
        which, value = await ctx.first(approved=cb.wait(), late=ctx.sleep("1d"))
        return [which, value]

    handle = await engine.start("approve_or_late")
    await engine.idle()
    await clock.advance("1d")
    assert await handle.result(timeout=10) == ["late", None]


async def test_wait_in_first_a_failure_raises_out_of_first(engine: Engine) -> None:
    handed: list[str] = []

    def hand_over(token: str) -> None:
        handed.append(token)

    @engine.workflow()
    async def approve_or_late(ctx, _input):
        cb = ctx.callback()
        await ctx.step(hand_over, cb.token)
        try:
            await ctx.first(approved=cb.wait(), late=ctx.sleep("1d"))
        except CallbackFailedError as exc:
            return exc.message
        return "no"

    handle = await engine.start("approve_or_late")
    await engine.idle()
    await engine.fail_callback(handed[0], "rejected")
    assert await handle.result(timeout=10) == "rejected"


async def test_wait_in_first_a_cancel_signal_wins(engine: Engine) -> None:
    handed: list[str] = []

    def hand_over(token: str) -> None:
        handed.append(token)

    @engine.workflow()
    async def approve_or_cancel(ctx, _input):
        cb = ctx.callback()
        await ctx.step(hand_over, cb.token)
        which, _ = await ctx.first(approved=cb.wait(), cancelled=ctx.wait_for_signal("cancel"))
        return which

    handle = await engine.start("approve_or_cancel")
    await engine.idle()
    await handle.signal("cancel")
    assert await handle.result(timeout=10) == "cancelled"


async def test_the_token_is_never_listed(engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="parkway")
    handed: list[str] = []
    register_payment(engine, handed)
    handle = await engine.start("payment")
    await engine.idle()
    token = handed[0]
    await engine.complete_callback(token, "done")
    await handle.result(timeout=10)

    seen = [
        repr(await engine.list_runs()),
        repr(await engine.get_run(handle.id)),
        repr(await engine.history(handle.id)),
        repr(await handle.info()),
        caplog.text,
    ]
    assert all(token not in text for text in seen)
    # The history still shows that a callback was made.
    assert any(e.kind == "value" and e.name == "callback" for e in await engine.history(handle.id))


async def test_a_signal_of_the_callbacks_name_cannot_be_sent(engine: Engine) -> None:
    handed: list[str] = []
    register_payment(engine, handed)
    handle = await engine.start("payment")
    await engine.idle()
    entries = await engine.history(handle.id)
    made = next(e for e in entries if e.name == "callback")
    with pytest.raises(InvalidInputError):
        await handle.signal(made.result["signal"], "forged")
    assert (await handle.info()).status == RunStatus.PARKED


# -- over HTTP ---------------------------------------------------------------------------------

API_TOKEN = "operator-secret"


def http_client(app: Any, **headers: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 4000))
    return httpx.AsyncClient(transport=transport, base_url="http://parkway.test", headers=headers)


async def test_a_callback_is_completed_over_http_without_the_api_token(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    handed: list[str] = []
    register_payment(engine, handed)
    app = AccessLog(create_app(engine, api_token=API_TOKEN, allowed_hosts=["parkway.test"]))
    async with http_client(app) as anonymous:
        # Every other route still needs the API token.
        assert (await anonymous.post("/runs", json={"workflow": "payment"})).status_code == 401
        assert (await anonymous.get("/runs")).status_code == 401
        assert (await anonymous.get("/tasks")).status_code == 401
        handle = await engine.start("payment")
        await engine.idle()
        token = handed[0]
        # (Called by the public name the provider was given: any Host.)
        response = await anonymous.post(
            f"/callbacks/{token}", json={"amount": 12}, headers={"host": "flows.example.com"}
        )
        assert response.status_code == 200, response.text
        assert response.json() == {
            "status": "completed",
            "value": {"amount": 12},
            "message": None,
            "duplicate": False,
        }
        assert (await handle.result(timeout=10))["paid"] == {"amount": 12}

        again = await anonymous.post(f"/callbacks/{token}", json={"amount": 99})
        assert again.status_code == 200
        assert again.json()["duplicate"] is True and again.json()["value"] == {"amount": 12}

    async with http_client(app, Authorization=f"Bearer {API_TOKEN}") as operator:
        for path in ("/runs", f"/runs/{handle.id}", f"/runs/{handle.id}/history"):
            response = await operator.get(path)
            assert response.status_code == 200 and token not in response.text
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("parkway"))
    assert "/callbacks/<token>" in ours
    assert token not in ours


async def test_a_callback_is_failed_over_http(engine: Engine) -> None:
    handed: list[str] = []
    register_payment(engine, handed)
    handle = await engine.start("payment")
    await engine.idle()
    async with http_client(create_app(engine, api_token=API_TOKEN)) as anonymous:
        bad = await anonymous.post(f"/callbacks/{handed[0]}/fail", json={"msg": "x"})
        assert bad.status_code == 422
        response = await anonymous.post(f"/callbacks/{handed[0]}/fail", json={"message": "no"})
        assert response.status_code == 200, response.text
        assert response.json() == {
            "status": "failed",
            "value": None,
            "message": "no",
            "duplicate": False,
        }
    with pytest.raises(Exception, match="CallbackFailedError: no"):
        await handle.result(timeout=10)


async def test_an_unknown_token_over_http_is_404(engine: Engine) -> None:
    async with http_client(create_app(engine, api_token=API_TOKEN)) as anonymous:
        for path in ("/callbacks/nope", "/callbacks/nope/fail", "/callbacks/" + "a" * 300):
            body = {"message": "x"} if path.endswith("/fail") else 1
            response = await anonymous.post(path, json=body)
            assert response.status_code == 404, (path, response.text)
            assert response.json()["error"] == "CallbackNotFoundError"
            assert "nope" not in response.json()["detail"]


async def test_callback_requests_are_rate_limited_per_client_address(engine: Engine) -> None:
    app = create_app(engine, callback_rate=0.5, callback_burst=3)
    async with http_client(app) as client:
        statuses = [(await client.post("/callbacks/guess", json=1)).status_code for _ in range(3)]
        assert statuses == [404, 404, 404]
        limited = await client.post("/callbacks/guess", json=1)
        assert limited.status_code == 429
        assert 1 <= int(limited.headers["retry-after"]) <= 2
        assert "too many" in limited.json()["detail"]
        # Only the callback routes are limited, and only for this address.
        assert (await client.get("/runs")).status_code == 200
    other = httpx.ASGITransport(app=app, client=("198.51.100.1", 4000))
    async with httpx.AsyncClient(transport=other, base_url="http://parkway.test") as client:
        assert (await client.post("/callbacks/guess", json=1)).status_code == 404


async def test_race_two_completions_of_one_callback_decide_once(engine: Engine) -> None:
    handed: list[str] = []
    register_payment(engine, handed)
    handle = await engine.start("payment")
    await engine.idle()
    token = handed[0]
    results = await asyncio.gather(
        engine.complete_callback(token, "a"),
        engine.complete_callback(token, "b"),
        engine.fail_callback(token, "c"),
    )
    firsts = [r for r in results if not r.duplicate]
    assert len(firsts) == 1
    first = firsts[0]
    for other in results:  # every answer is the one outcome
        assert (other.status, other.value, other.message) == (
            first.status,
            first.value,
            first.message,
        )
    if first.status == "completed":
        assert (await handle.result(timeout=10))["paid"] == first.value
    else:
        with pytest.raises(Exception, match="CallbackFailedError"):
            await handle.result(timeout=10)
