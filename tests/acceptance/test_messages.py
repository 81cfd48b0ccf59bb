"""Messages: point-to-point correlation by ``(name, key)`` (BPMN message events).

A message wakes exactly one run: the one parked on ``wait_for_message(name,
key)``, else a new run of the ``on_message`` workflow, else it is buffered for
its TTL and then kept as a dead letter. Zero receivers is surfaced, never
dropped; a second waiter on the same ``(name, key)`` is refused.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest

from parkway import (
    CorrelationError,
    CorrelationResult,
    DuplicateSubscriptionError,
    Engine,
    InvalidDurationError,
    MessageInfo,
    MessageNotFoundError,
    ParkwayError,
    RunStatus,
    SubscriptionInfo,
    WaitTimeoutError,
    WorkflowFailedError,
)
from parkway.core.housekeeping import SWEEP_INTERVAL

SCORE = "credit.score"


def register_loan(engine: Engine, *, timeout: Any = None) -> None:
    """``loan(app_id)`` waits for its credit score, keyed by the application id."""

    @engine.workflow()
    async def loan(ctx, app_id):
        score = await ctx.wait_for_message(SCORE, app_id, timeout=timeout)
        return {"app": app_id, "score": score}


async def parked(engine: Engine, *run_ids: str) -> None:
    await engine.idle()
    for run_id in run_ids:
        assert (await engine.get_run(run_id)).status is RunStatus.PARKED, run_id


# -- delivery to the one waiting run -----------------------------------------------------------


async def test_two_loans_answered_out_of_order_each_get_their_own_score(engine: Engine) -> None:
    register_loan(engine)
    first = await engine.start("loan", "APP-001", id="loan-1")
    second = await engine.start("loan", "APP-002", id="loan-2")
    await parked(engine, "loan-1", "loan-2")

    # APP-002 answers first and wakes loan-2, not the run that subscribed first.
    result = await engine.correlate(SCORE, "APP-002", {"score": 731})
    assert result == CorrelationResult(outcome="delivered", run_id="loan-2")
    assert await second.result(timeout=5) == {"app": "APP-002", "score": {"score": 731}}
    await engine.idle()
    assert (await first.info()).status is RunStatus.PARKED

    result = await engine.correlate(SCORE, "APP-001", {"score": 688})
    assert result.outcome == "delivered"
    assert result.run_id == "loan-1"
    assert await first.result(timeout=5) == {"app": "APP-001", "score": {"score": 688}}
    assert await engine.messages() == []
    assert await engine.subscriptions() == []


async def test_a_waiting_run_is_listed_as_a_message_subscription(engine: Engine, t0) -> None:
    register_loan(engine)
    await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")

    subs = await engine.subscriptions()
    assert len(subs) == 1
    sub = subs[0]
    assert isinstance(sub, SubscriptionInfo)
    assert (sub.run_id, sub.kind, sub.name, sub.key) == ("loan-1", "message", SCORE, "APP-001")
    assert sub.expires_at > t0
    assert await engine.subscriptions(run_id="loan-1") == subs
    assert await engine.subscriptions(name=SCORE) == subs
    assert await engine.subscriptions(name="other") == []


async def test_ttl_zero_is_fine_when_a_receiver_waits(engine: Engine) -> None:
    register_loan(engine)
    h = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    result = await engine.correlate(SCORE, "APP-001", 700, ttl=0)
    assert result == CorrelationResult("delivered", "loan-1")
    assert await h.result(timeout=5) == {"app": "APP-001", "score": 700}


async def test_payload_defaults_to_none(engine: Engine) -> None:
    register_loan(engine)
    h = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    assert (await engine.correlate(SCORE, "APP-001")).outcome == "delivered"
    assert await h.result(timeout=5) == {"app": "APP-001", "score": None}


async def test_correlation_matches_name_and_key_exactly(engine: Engine) -> None:
    @engine.workflow()
    async def esign(ctx, app_id):
        return await ctx.wait_for_message("esign.done", app_id)

    register_loan(engine)
    loan = await engine.start("loan", "APP-001", id="loan-1")
    sign = await engine.start("esign", "APP-001", id="esign-1")
    # Same key, another name: not a duplicate subscription.
    await parked(engine, "loan-1", "esign-1")

    # Near misses are buffered, not delivered to a run that waits for something else.
    for name, key in (
        ("credit.score", "app-001"),
        ("credit.score", "APP-001 "),
        ("credit", "APP-001"),
    ):
        assert (await engine.correlate(name, key, "miss")).outcome == "buffered", (name, key)
    await parked(engine, "loan-1", "esign-1")

    assert await engine.correlate("esign.done", "APP-001", "signed") == CorrelationResult(
        "delivered", "esign-1"
    )
    assert await sign.result(timeout=5) == "signed"
    await parked(engine, "loan-1")
    assert (await engine.correlate(SCORE, "APP-001", 700)).run_id == "loan-1"
    assert await loan.result(timeout=5) == {"app": "APP-001", "score": 700}
    assert len(await engine.messages()) == 3


# -- a second waiter on the same (name, key) is refused ----------------------------------------


async def test_a_second_waiter_on_the_same_key_gets_duplicate_subscription_error(
    engine: Engine,
) -> None:
    register_loan(engine)

    @engine.workflow()
    async def careful(ctx, app_id):
        try:
            return await ctx.wait_for_message(SCORE, app_id)
        except DuplicateSubscriptionError as exc:
            return {"refused": str(exc), "holder": exc.holder}

    holder = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    second = await engine.start("careful", "APP-001", id="careful-1")
    out = await second.result(timeout=5)
    assert out["holder"] == "loan-1"
    assert "loan-1" in out["refused"]
    assert SCORE in out["refused"]
    assert "APP-001" in out["refused"]

    # The holder keeps its subscription and gets the message; nothing is ambiguous.
    subs = await engine.subscriptions()
    assert [(s.run_id, s.key) for s in subs] == [("loan-1", "APP-001")]
    assert await engine.correlate(SCORE, "APP-001", 688) == CorrelationResult("delivered", "loan-1")
    assert await holder.result(timeout=5) == {"app": "APP-001", "score": 688}


async def test_an_uncaught_duplicate_subscription_fails_the_second_run(engine: Engine) -> None:
    register_loan(engine)
    await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    second = await engine.start("loan", "APP-001", id="loan-1-again")

    with pytest.raises(WorkflowFailedError) as exc_info:
        await second.result(timeout=5)
    err = exc_info.value
    assert err.type == "DuplicateSubscriptionError"
    assert "loan-1" in err.error_message
    assert "APP-001" in err.error_message
    info = await engine.get_run("loan-1-again")
    assert info.status is RunStatus.FAILED
    assert info.error.type == "DuplicateSubscriptionError"
    # The first run is untouched.
    assert (await engine.get_run("loan-1")).status is RunStatus.PARKED
    assert [s.run_id for s in await engine.subscriptions()] == ["loan-1"]


async def test_the_key_is_free_again_once_the_holder_got_its_message(engine: Engine) -> None:
    register_loan(engine)
    first = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    await engine.correlate(SCORE, "APP-001", 1)
    assert (await first.result(timeout=5))["score"] == 1

    again = await engine.start("loan", "APP-001", id="loan-1b")
    await parked(engine, "loan-1b")
    assert await engine.correlate(SCORE, "APP-001", 2) == CorrelationResult("delivered", "loan-1b")
    assert (await again.result(timeout=5))["score"] == 2


async def test_a_cancelled_waiter_frees_its_key(engine: Engine) -> None:
    register_loan(engine)
    h = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    await h.cancel()
    await engine.idle()
    assert await engine.subscriptions() == []
    assert (await engine.correlate(SCORE, "APP-001", 5)).outcome == "buffered"


# -- nobody waiting: refused with ttl=0, else buffered -----------------------------------------


async def test_correlating_again_after_delivery(engine: Engine) -> None:
    register_loan(engine)
    h = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    assert (await engine.correlate(SCORE, "APP-001", 688)).outcome == "delivered"
    await h.result(timeout=5)

    with pytest.raises(CorrelationError) as exc_info:
        await engine.correlate(SCORE, "APP-001", 688, ttl=0)
    assert isinstance(exc_info.value, ParkwayError)
    text = str(exc_info.value)
    assert SCORE in text
    assert "APP-001" in text
    # It suggests why nobody received it: not waiting yet, finished already, wrong key.
    assert "completed" in text
    assert "key" in text
    assert await engine.messages() == []  # a refused message leaves nothing behind

    again = await engine.correlate(SCORE, "APP-001", 689)
    assert again == CorrelationResult(outcome="buffered", run_id=None)
    [message] = await engine.messages()
    assert (message.name, message.key, message.payload) == (SCORE, "APP-001", 689)
    assert message.status == "buffered"


async def test_ttl_zero_refuses_in_every_spelling(engine: Engine) -> None:
    for ttl in (0, 0.0, "0s", "0ms", timedelta(0)):
        with pytest.raises(CorrelationError):
            await engine.correlate(SCORE, "NOBODY", 1, ttl=ttl)
    assert await engine.messages() == []


async def test_a_buffered_message_is_listed_with_its_fields(engine: Engine, clock, t0) -> None:
    result = await engine.correlate(SCORE, "APP-009", {"score": 500}, message_id="cb-1", ttl="2h")
    assert result == CorrelationResult("buffered", None)
    [m] = await engine.messages()
    assert isinstance(m, MessageInfo)
    assert (m.name, m.key, m.payload, m.message_id) == (SCORE, "APP-009", {"score": 500}, "cb-1")
    assert m.status == "buffered"
    assert m.reason is None
    assert m.received_at == t0
    assert m.expires_at == t0 + timedelta(hours=2)
    assert await engine.messages(status="buffered") == [m]
    assert await engine.messages(status="expired") == []


async def test_the_default_ttl_is_the_engines_message_ttl(make_engine, t0) -> None:
    engine = await make_engine(message_ttl="15m")
    await engine.correlate(SCORE, "APP-1", 1)
    [m] = await engine.messages()
    assert m.expires_at == t0 + timedelta(minutes=15)


async def test_unknown_message_status_filter_is_refused(engine: Engine) -> None:
    with pytest.raises(ParkwayError, match="bogus"):
        await engine.messages(status="bogus")


# -- early messages are consumed by later waits ------------------------------------------------


async def test_an_early_message_is_consumed_by_a_later_wait(engine: Engine) -> None:
    register_loan(engine)
    assert (await engine.correlate(SCORE, "APP-001", 688)).outcome == "buffered"
    h = await engine.start("loan", "APP-001", id="loan-1")
    assert await h.result(timeout=5) == {"app": "APP-001", "score": 688}
    assert await engine.messages() == []
    assert await engine.subscriptions() == []


async def test_several_early_messages_are_consumed_oldest_first(engine: Engine, clock) -> None:
    @engine.workflow()
    async def collector(ctx, key):
        return [await ctx.wait_for_message("reading", key) for _ in range(3)]

    for payload in ("a", "b", "c", "d"):
        assert (await engine.correlate("reading", "S1", payload)).outcome == "buffered"
        await clock.advance("1s")
    await engine.correlate("reading", "S2", "other key")

    h = await engine.start("collector", "S1", id="c-1")
    assert await h.result(timeout=5) == ["a", "b", "c"]
    left = await engine.messages()
    assert [(m.key, m.payload) for m in left] == [("S1", "d"), ("S2", "other key")]


async def test_a_run_waiting_for_several_messages_gets_them_in_order(engine: Engine) -> None:
    @engine.workflow()
    async def collector(ctx, key):
        return [await ctx.wait_for_message("reading", key) for _ in range(3)]

    h = await engine.start("collector", "S1", id="c-1")
    await engine.correlate("reading", "S1", 1)  # buffered or delivered: either is fine
    await parked(engine, "c-1")
    await engine.correlate("reading", "S1", 2)
    await engine.correlate("reading", "S1", 3)
    assert await h.result(timeout=5) == [1, 2, 3]
    assert await engine.messages() == []


# -- expiry, dead letters, retry and discard ---------------------------------------------------


async def test_an_expired_message_is_a_dead_letter_and_is_not_delivered(
    engine: Engine, clock, t0
) -> None:
    register_loan(engine, timeout="1h")
    await engine.correlate(SCORE, "APP-001", {"score": 640}, ttl="10m")
    await clock.advance("11m")

    assert await engine.messages(status="buffered") == []
    [dead] = await engine.messages(status="expired")
    assert (dead.name, dead.key, dead.payload) == (SCORE, "APP-001", {"score": 640})
    assert dead.status == "expired"
    assert dead.reason  # says why it is a dead letter
    assert "ttl" in dead.reason
    assert dead.received_at == t0
    assert dead.expires_at == t0 + timedelta(minutes=10)
    assert await engine.messages() == [dead]

    # A later waiter does not get the dead letter.
    h = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    assert [s.run_id for s in await engine.subscriptions()] == ["loan-1"]

    # An operator re-correlates it: the waiting run gets it now.
    result = await engine.retry_message(dead.id)
    assert result == CorrelationResult("delivered", "loan-1")
    assert await h.result(timeout=5) == {"app": "APP-001", "score": {"score": 640}}
    assert await engine.messages() == []


async def test_an_expired_message_never_reaches_a_waiter_that_times_out(
    engine: Engine, clock
) -> None:
    register_loan(engine, timeout="30m")
    await engine.correlate(SCORE, "APP-001", 1, ttl="5m")
    await clock.advance("6m")
    h = await engine.start("loan", "APP-001", id="loan-1")
    await clock.advance("31m")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert exc_info.value.type == "WaitTimeoutError"
    assert [m.status for m in await engine.messages()] == ["expired"]


async def test_a_message_expiring_exactly_at_its_ttl(engine: Engine, clock) -> None:
    await engine.correlate(SCORE, "APP-001", 1, ttl="10m")
    await clock.advance("599s")
    assert [m.status for m in await engine.messages()] == ["buffered"]
    await clock.advance("1s")
    assert [m.status for m in await engine.messages()] == ["expired"]


async def test_retrying_a_dead_letter_without_receiver_buffers_it_again(
    engine: Engine, clock, t0
) -> None:
    register_loan(engine)
    await engine.correlate(SCORE, "APP-001", "late", ttl="1m")
    await clock.advance("2m")
    [dead] = await engine.messages(status="expired")

    result = await engine.retry_message(dead.id, ttl="1h")
    assert result == CorrelationResult("buffered", None)
    assert await engine.messages(status="expired") == []
    [again] = await engine.messages(status="buffered")
    assert (again.key, again.payload, again.reason) == ("APP-001", "late", None)
    assert again.expires_at == t0 + timedelta(minutes=2, hours=1)

    # Buffered again, it is consumed by the next waiter.
    h = await engine.start("loan", "APP-001", id="loan-1")
    assert await h.result(timeout=5) == {"app": "APP-001", "score": "late"}
    assert await engine.messages() == []


async def test_retrying_a_dead_letter_with_ttl_zero_and_no_receiver_keeps_it(
    engine: Engine, clock
) -> None:
    await engine.correlate(SCORE, "APP-001", "late", ttl="1m")
    await clock.advance("2m")
    [dead] = await engine.messages(status="expired")
    with pytest.raises(CorrelationError):
        await engine.retry_message(dead.id, ttl=0)
    assert await engine.messages() == [dead]


async def test_retrying_a_dead_letter_can_start_a_message_run(engine: Engine, clock) -> None:
    await engine.correlate("application.received", "APP-7", {"n": 1}, ttl="1m")
    await clock.advance("2m")
    [dead] = await engine.messages(status="expired")

    @engine.workflow(on_message="application.received")
    async def onboarding(ctx, input):
        return input

    result = await engine.retry_message(dead.id)
    assert result == CorrelationResult("started", "msg:application.received:APP-7")
    h = engine.handle("msg:application.received:APP-7")
    assert await h.result(timeout=5) == {"n": 1}
    assert await engine.messages() == []


async def test_discarding_a_message_removes_it(engine: Engine, clock) -> None:
    register_loan(engine, timeout="1m")
    await engine.correlate(SCORE, "APP-001", "dead", ttl="1m")
    await engine.correlate(SCORE, "APP-002", "alive")
    await clock.advance("2m")
    dead, alive = await engine.messages()
    assert (dead.status, alive.status) == ("expired", "buffered")

    await engine.discard_message(dead.id)
    assert await engine.messages() == [alive]
    await engine.discard_message(alive.id)
    assert await engine.messages() == []

    # A discarded message is gone for good: the next waiter does not get it.
    h = await engine.start("loan", "APP-002", id="loan-2")
    await clock.advance("1m")
    with pytest.raises(WorkflowFailedError, match="WaitTimeoutError"):
        await h.result(timeout=5)


async def test_unknown_message_ids_are_refused(engine: Engine) -> None:
    await engine.correlate(SCORE, "APP-001", 1)
    [m] = await engine.messages()
    unknown = m.id + 1000
    with pytest.raises(MessageNotFoundError) as exc_info:
        await engine.retry_message(unknown)
    assert isinstance(exc_info.value, ParkwayError)
    assert str(unknown) in str(exc_info.value)
    with pytest.raises(MessageNotFoundError):
        await engine.discard_message(unknown)
    assert await engine.messages() == [m]

    await engine.discard_message(m.id)
    with pytest.raises(MessageNotFoundError):
        await engine.discard_message(m.id)
    with pytest.raises(MessageNotFoundError):
        await engine.retry_message(m.id)


async def test_dead_letters_are_logged_as_warnings(engine: Engine, clock, caplog) -> None:
    await engine.correlate(SCORE, "APP-404", 1, ttl="1m")
    with caplog.at_level("WARNING", logger="parkway"):
        await clock.advance("2m")
        await engine.messages()
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert any("APP-404" in r.getMessage() for r in warnings), caplog.text


# -- message start -----------------------------------------------------------------------------

APPLIED = "application.received"


def register_onboarding(engine: Engine) -> None:
    """One run per application key; it stays active until signalled ``finish``."""

    @engine.workflow(on_message=APPLIED)
    async def onboarding(ctx, input):
        await ctx.wait_for_signal("finish")
        return {"run": ctx.run_id, "subject": ctx.subject, "input": input}


async def test_a_message_starts_one_run_per_key(engine: Engine) -> None:
    register_onboarding(engine)
    first = await engine.correlate(APPLIED, "APP-001", {"n": 1})
    assert first == CorrelationResult("started", f"msg:{APPLIED}:APP-001")
    other = await engine.correlate(APPLIED, "APP-002", {"n": 1})
    assert other == CorrelationResult("started", f"msg:{APPLIED}:APP-002")
    await engine.idle()

    info = await engine.get_run(f"msg:{APPLIED}:APP-001")
    assert info.workflow == "onboarding"
    assert info.subject == "APP-001"
    assert info.input == {"n": 1}
    assert info.status is RunStatus.PARKED

    await engine.signal(f"msg:{APPLIED}:APP-001", "finish")
    assert await engine.handle(f"msg:{APPLIED}:APP-001").result(timeout=5) == {
        "run": f"msg:{APPLIED}:APP-001",
        "subject": "APP-001",
        "input": {"n": 1},
    }
    assert await engine.messages() == []


async def test_messages_for_an_active_key_wait_their_turn(engine: Engine) -> None:
    register_onboarding(engine)
    base = f"msg:{APPLIED}:APP-001"
    assert (await engine.correlate(APPLIED, "APP-001", {"n": 1})).outcome == "started"
    await engine.idle()
    # The key's run is active: later messages for it are buffered, in order.
    assert await engine.correlate(APPLIED, "APP-001", {"n": 2}) == CorrelationResult("buffered")
    assert await engine.correlate(APPLIED, "APP-001", {"n": 3}) == CorrelationResult("buffered")
    assert [m.payload for m in await engine.messages()] == [{"n": 2}, {"n": 3}]
    assert [r.id for r in await engine.list_runs(workflow="onboarding")] == [base]

    # When it ends, the oldest buffered message starts the next run.
    await engine.signal(base, "finish")
    await engine.handle(base).result(timeout=5)
    await engine.idle()
    second = await engine.get_run(f"{base}:2")
    assert (second.input, second.subject) == ({"n": 2}, "APP-001")
    assert [m.payload for m in await engine.messages()] == [{"n": 3}]

    await engine.signal(f"{base}:2", "finish")
    await engine.idle()
    third = await engine.get_run(f"{base}:3")
    assert third.input == {"n": 3}
    assert await engine.messages() == []

    await engine.signal(f"{base}:3", "finish")
    await engine.idle()
    runs = await engine.list_runs(workflow="onboarding")
    assert sorted(r.id for r in runs) == [base, f"{base}:2", f"{base}:3"]
    assert all(r.status is RunStatus.COMPLETED for r in runs)

    # Nothing active and nothing buffered: the next message starts run 4 at once.
    assert await engine.correlate(APPLIED, "APP-001", {"n": 4}) == CorrelationResult(
        "started", f"{base}:4"
    )


async def test_a_failed_or_cancelled_message_run_also_hands_over(engine: Engine) -> None:
    @engine.workflow(on_message="job")
    async def job(ctx, input):
        await ctx.wait_for_signal("go")
        if input == "bad":
            raise RuntimeError("boom")
        return input

    assert (await engine.correlate("job", "J", "bad")).outcome == "started"
    assert (await engine.correlate("job", "J", "next")).outcome == "buffered"
    assert (await engine.correlate("job", "J", "last")).outcome == "buffered"
    await engine.idle()
    await engine.signal("msg:job:J", "go")
    with pytest.raises(WorkflowFailedError):
        await engine.handle("msg:job:J").result(timeout=5)
    await engine.idle()
    assert (await engine.get_run("msg:job:J:2")).input == "next"

    await engine.cancel("msg:job:J:2")
    await engine.idle()
    assert (await engine.get_run("msg:job:J:3")).input == "last"
    assert await engine.messages() == []


async def test_a_message_run_can_wait_for_more_messages_of_its_key(engine: Engine) -> None:
    @engine.workflow(on_message="order.line")
    async def order(ctx, first):
        lines = [first]
        while lines[-1] != "end":
            lines.append(await ctx.wait_for_message("order.line", ctx.subject))
        return lines

    assert (await engine.correlate("order.line", "O1", "a")).outcome == "started"
    await engine.idle()
    assert await engine.correlate("order.line", "O1", "b") == CorrelationResult(
        "delivered", "msg:order.line:O1"
    )
    await engine.idle()
    await engine.correlate("order.line", "O1", "end")
    assert await engine.handle("msg:order.line:O1").result(timeout=5) == ["a", "b", "end"]
    assert [r.id for r in await engine.list_runs(workflow="order")] == ["msg:order.line:O1"]


async def test_a_waiting_run_takes_precedence_over_message_start(engine: Engine) -> None:
    register_onboarding(engine)

    @engine.workflow()
    async def watcher(ctx, key):
        return await ctx.wait_for_message(APPLIED, key)

    h = await engine.start("watcher", "APP-001", id="w-1")
    await parked(engine, "w-1")
    assert await engine.correlate(APPLIED, "APP-001", 1) == CorrelationResult("delivered", "w-1")
    assert await h.result(timeout=5) == 1
    assert await engine.list_runs(workflow="onboarding") == []


# -- message_id de-duplication -----------------------------------------------------------------


# -- one sender, many messages in flight -------------------------------------------------------


async def test_messages_sent_at_once_each_reach_their_own_receiver(engine: Engine) -> None:
    # Sent together, messages share commits where the store batches them; each
    # still gets its own outcome: delivered to its run, a duplicate, or buffered
    # (nobody waits, or its key's waiter was taken by a message just before it).
    register_loan(engine)
    handles = [await engine.start("loan", f"APP-{i}", id=f"loan-{i}") for i in range(12)]
    await parked(engine, *(h.id for h in handles))
    sends = [engine.correlate(SCORE, f"APP-{i}", i, message_id=f"m-{i}") for i in range(12)]
    sends.append(engine.correlate(SCORE, "APP-3", 99, message_id="m-3"))  # id seen: duplicate
    sends.append(engine.correlate(SCORE, "APP-5", 55, message_id="second-5"))  # key taken
    sends.append(engine.correlate(SCORE, "APP-NOBODY", 0))
    results = await asyncio.gather(*sends)
    assert results[:12] == [CorrelationResult("delivered", f"loan-{i}") for i in range(12)]
    assert [r.outcome for r in results[12:]] == ["duplicate", "buffered", "buffered"]
    for i, handle in enumerate(handles):
        assert await handle.result(timeout=10) == {"app": f"APP-{i}", "score": i}
    buffered = sorted((m.key, m.payload) for m in await engine.messages())
    assert buffered == [("APP-5", 55), ("APP-NOBODY", 0)]


async def test_a_repeated_message_id_while_buffered_is_a_duplicate(engine: Engine) -> None:
    first = await engine.correlate(SCORE, "APP-001", 1, message_id="cb-1")
    assert first == CorrelationResult("buffered")
    again = await engine.correlate(SCORE, "APP-001", 1, message_id="cb-1")
    assert again == CorrelationResult(outcome="duplicate", run_id=None)
    # The id is global, not per key.
    assert (await engine.correlate(SCORE, "APP-002", 2, message_id="cb-1")).outcome == "duplicate"
    [m] = await engine.messages()
    assert (m.key, m.payload, m.message_id) == ("APP-001", 1, "cb-1")
    assert (await engine.correlate(SCORE, "APP-001", 3, message_id="cb-2")).outcome == "buffered"
    assert len(await engine.messages()) == 2


async def test_a_repeated_message_id_after_delivery_is_a_duplicate(engine: Engine, clock) -> None:
    register_loan(engine)
    h = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    assert (await engine.correlate(SCORE, "APP-001", 1, message_id="cb-9")).outcome == "delivered"
    await h.result(timeout=5)

    await clock.advance("23h")  # still within event_retention (24h)
    later = await engine.start("loan", "APP-001", id="loan-2")
    await parked(engine, "loan-2")
    assert await engine.correlate(SCORE, "APP-001", 1, message_id="cb-9") == CorrelationResult(
        "duplicate"
    )
    # The duplicate was not handed to the new waiter, nor buffered.
    await parked(engine, "loan-2")
    assert await engine.messages() == []
    # A new id reaches the new waiter.
    assert await engine.correlate(SCORE, "APP-001", 2, message_id="cb-10") == CorrelationResult(
        "delivered", "loan-2"
    )
    assert (await later.result(timeout=5))["score"] == 2


async def test_a_repeated_message_id_of_a_started_run_is_a_duplicate(engine: Engine) -> None:
    register_onboarding(engine)
    assert (await engine.correlate(APPLIED, "APP-1", 1, message_id="a-1")).outcome == "started"
    assert (await engine.correlate(APPLIED, "APP-1", 1, message_id="a-1")).outcome == "duplicate"
    assert await engine.messages() == []
    assert len(await engine.list_runs(workflow="onboarding")) == 1


async def test_a_refused_message_does_not_burn_its_id(engine: Engine) -> None:
    with pytest.raises(CorrelationError):
        await engine.correlate(SCORE, "APP-001", 1, message_id="cb-5", ttl=0)
    assert (await engine.correlate(SCORE, "APP-001", 1, message_id="cb-5")).outcome == "buffered"


async def test_a_message_id_is_forgotten_after_event_retention(make_engine, clock) -> None:
    engine = await make_engine(event_retention="1h")
    register_loan(engine)
    h = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    assert (await engine.correlate(SCORE, "APP-001", 1, message_id="cb-1")).outcome == "delivered"
    await h.result(timeout=5)
    await clock.advance("2h")
    assert (await engine.correlate(SCORE, "APP-001", 1, message_id="cb-1")).outcome == "buffered"


async def test_a_message_id_stays_a_duplicate_while_buffered_past_event_retention(
    make_engine, clock
) -> None:
    # The contract: "A repeated message_id while the first is buffered -> duplicate", whatever
    # the retention: the first copy is still there to be consumed.
    engine = await make_engine(event_retention="1h")
    await engine.correlate(SCORE, "APP-001", 1, message_id="cb-1", ttl="1d")
    await clock.advance("2h")
    assert [m.status for m in await engine.messages()] == ["buffered"]
    assert (await engine.correlate(SCORE, "APP-001", 1, message_id="cb-1")).outcome == "duplicate"
    assert len(await engine.messages()) == 1


# -- continue_as_new keeps the run's place -----------------------------------------------------


class Gates:
    """Lets a test hold a run inside a step: ``entered[i]`` is set when generation ``i``
    reaches its step, which then waits for ``release[i]``."""

    def __init__(self, n: int) -> None:
        self.entered = [asyncio.Event() for _ in range(n)]
        self.release = [asyncio.Event() for _ in range(n)]

    async def hold(self, i: int) -> int:
        self.entered[i].set()
        await self.release[i].wait()
        return i

    async def reached(self, i: int) -> None:
        await asyncio.wait_for(self.entered[i].wait(), 5)


async def test_continue_as_new_consumes_a_message_sent_during_the_hand_over(
    engine: Engine,
) -> None:
    gates = Gates(3)

    @engine.workflow()
    async def ticker(ctx, input):
        seen = input["seen"]
        await ctx.step(gates.hold, len(seen), name="hold")
        seen = [*seen, await ctx.wait_for_message("tick", "T1")]
        if len(seen) == 2:
            return seen
        ctx.continue_as_new({"seen": seen})

    h = await engine.start("ticker", {"seen": []}, id="ticker-1")
    await gates.reached(0)
    gates.release[0].set()
    await parked(engine, "ticker-1")
    assert await engine.correlate("tick", "T1", "one") == CorrelationResult("delivered", "ticker-1")

    # Generation 1 is starting and has not reached its wait: the message is kept for it.
    await gates.reached(1)
    assert await engine.subscriptions() == []
    assert await engine.correlate("tick", "T1", "two") == CorrelationResult("buffered")
    gates.release[1].set()
    assert await h.result(timeout=5) == ["one", "two"]
    assert await engine.messages() == []
    runs = await engine.list_runs(workflow="ticker")
    assert [(r.id, r.input) for r in runs] == [("ticker-1", {"seen": ["one"]})]


async def test_a_buffered_message_survives_continue_as_new(engine: Engine) -> None:
    @engine.workflow()
    async def looper(ctx, n):
        if n < 2:
            ctx.continue_as_new(n + 1)
        return await ctx.wait_for_message("late", "L1")

    await engine.correlate("late", "L1", "kept")
    h = await engine.start("looper", 0, id="looper-1")
    assert await h.result(timeout=5) == "kept"
    assert await engine.messages() == []


async def test_a_message_started_run_keeps_its_key_across_continue_as_new(
    engine: Engine,
) -> None:
    gates = Gates(3)

    @engine.workflow(on_message="cart.item")
    async def cart(ctx, input):
        items = input["items"]
        await ctx.step(gates.hold, len(items) - 1, name="hold")
        items = [*items, *(await ctx.wait_for_message("cart.item", ctx.subject))["items"]]
        if len(items) >= 3:
            return items
        ctx.continue_as_new({"items": items})

    run_id = "msg:cart.item:C1"
    assert await engine.correlate("cart.item", "C1", {"items": ["a"]}) == CorrelationResult(
        "started", run_id
    )
    await gates.reached(0)
    gates.release[0].set()
    await parked(engine, run_id)
    assert await engine.correlate("cart.item", "C1", {"items": ["b"]}) == CorrelationResult(
        "delivered", run_id
    )

    # During the hand-over the run is still the key's active run: no second run starts.
    await gates.reached(1)
    assert await engine.correlate("cart.item", "C1", {"items": ["c"]}) == CorrelationResult(
        "buffered"
    )
    gates.release[1].set()
    assert await engine.handle(run_id).result(timeout=5) == ["a", "b", "c"]
    await engine.idle()
    assert [r.id for r in await engine.list_runs(workflow="cart")] == [run_id]
    assert await engine.messages() == []


class Hold:
    """Holds a workflow inside its replay (a plain, non-journaled await) while ``on``:
    the worker has claimed the run and not committed yet."""

    def __init__(self) -> None:
        self.on = False
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self) -> None:
        if self.on:
            self.entered.set()
            await self.release.wait()

    async def reached(self) -> None:
        await asyncio.wait_for(self.entered.wait(), 5)


async def test_a_message_sent_while_the_waiter_is_about_to_park_is_not_lost(
    engine: Engine,
) -> None:
    hold = Hold()
    hold.on = True

    @engine.workflow()
    async def waiter(ctx, key):
        await hold()
        return await ctx.wait_for_message(SCORE, key)

    h = await engine.start("waiter", "APP-001", id="w-1")
    await hold.reached()
    # The run is about to register its wait: nobody waits yet, so the message is buffered...
    assert await engine.correlate(SCORE, "APP-001", 1) == CorrelationResult("buffered")
    hold.release.set()
    # ...and consumed atomically with the registration.
    assert await h.result(timeout=5) == 1
    assert await engine.messages() == []
    assert await engine.subscriptions() == []


async def test_a_message_sent_while_the_keys_run_is_ending_starts_the_next_run(
    engine: Engine,
) -> None:
    hold = Hold()

    @engine.workflow(on_message="job")
    async def job(ctx, input):
        await ctx.wait_for_signal("go")
        await hold()
        return input

    assert (await engine.correlate("job", "J", "first")).outcome == "started"
    await engine.idle()
    hold.on = True
    await engine.signal("msg:job:J", "go")
    await hold.reached()
    # The run has decided to end but has not committed: it is still the key's active run.
    assert await engine.correlate("job", "J", "second") == CorrelationResult("buffered")
    hold.on = False
    hold.release.set()
    assert await engine.handle("msg:job:J").result(timeout=5) == "first"
    await engine.idle()
    second = await engine.get_run("msg:job:J:2")
    assert second.input == "second"
    assert await engine.messages() == []


# -- timeouts ----------------------------------------------------------------------------------


async def test_a_wait_timeout_raises_and_removes_the_subscription(
    engine: Engine, clock, t0
) -> None:
    @engine.workflow()
    async def patient(ctx, key):
        try:
            return await ctx.wait_for_message(SCORE, key, timeout="10m")
        except WaitTimeoutError as exc:
            return {"timed_out": str(exc)}

    h = await engine.start("patient", "APP-001", id="p-1")
    await parked(engine, "p-1")
    [sub] = await engine.subscriptions()
    assert (sub.kind, sub.key, sub.name, sub.run_id) == ("message", "APP-001", SCORE, "p-1")
    assert sub.expires_at >= t0 + timedelta(minutes=10)

    await clock.advance("9m")
    await parked(engine, "p-1")
    await clock.advance("1m")
    out = await h.result(timeout=5)
    assert "APP-001" in out["timed_out"]
    assert SCORE in out["timed_out"]
    assert await engine.subscriptions() == []

    # The run that timed out no longer receives: the message is buffered.
    assert (await engine.correlate(SCORE, "APP-001", 1)).outcome == "buffered"
    # And the key is free for another waiter, which consumes it.
    register_loan(engine)
    h2 = await engine.start("loan", "APP-001", id="loan-1")
    assert await h2.result(timeout=5) == {"app": "APP-001", "score": 1}


async def test_an_uncaught_wait_timeout_fails_the_run(engine: Engine, clock) -> None:
    register_loan(engine, timeout=60)
    h = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    await clock.advance("1m")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert exc_info.value.type == "WaitTimeoutError"
    assert await engine.subscriptions() == []


async def test_a_message_before_the_timeout_wins(engine: Engine, clock) -> None:
    register_loan(engine, timeout="10m")
    h = await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    await clock.advance("9m")
    assert (await engine.correlate(SCORE, "APP-001", 7)).outcome == "delivered"
    assert await h.result(timeout=5) == {"app": "APP-001", "score": 7}
    await clock.advance("1h")  # the old timer fires into nothing
    assert (await h.info()).status is RunStatus.COMPLETED


# -- bad input ---------------------------------------------------------------------------------

BAD_CORRELATIONS: list[tuple[str, tuple[Any, ...], dict[str, Any], str]] = [
    ("empty name", ("", "K"), {}, "name"),
    ("blank name", ("   ", "K"), {}, "name"),
    ("name not a string", (5, "K"), {}, "name"),
    ("empty key", ("n", ""), {}, "key"),
    ("blank key", ("n", "  "), {}, "key"),
    ("int key", ("n", 5), {}, "key"),
    ("None key", ("n", None), {}, "key"),
    ("negative ttl string", ("n", "K"), {"ttl": "-1s"}, "ttl"),
    ("negative ttl number", ("n", "K"), {"ttl": -1}, "ttl"),
    ("negative ttl timedelta", ("n", "K"), {"ttl": timedelta(seconds=-1)}, "ttl"),
    ("ttl gibberish", ("n", "K"), {"ttl": "soon"}, "ttl"),
    ("ttl bool", ("n", "K"), {"ttl": True}, "ttl"),
    ("empty message_id", ("n", "K"), {"message_id": ""}, "message_id"),
    ("message_id not a string", ("n", "K"), {"message_id": 7}, "message_id"),
]


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [pytest.param(a, k, f, id=label) for label, a, k, f in BAD_CORRELATIONS],
)
async def test_bad_correlations_are_refused_and_write_nothing(
    engine: Engine, args, kwargs, field
) -> None:
    @engine.workflow(on_message="n")
    async def starter(ctx, input):
        return input

    with pytest.raises(ParkwayError) as exc_info:
        await engine.correlate(*args, {"payload": 1}, **kwargs)
    assert field in str(exc_info.value)
    await engine.idle()
    assert await engine.messages() == []
    assert await engine.list_runs() == []


async def test_a_negative_ttl_is_an_invalid_duration(engine: Engine) -> None:
    with pytest.raises(InvalidDurationError):
        await engine.correlate("n", "K", 1, ttl="-1s")
    with pytest.raises(InvalidDurationError):
        await engine.correlate("n", "K", 1, ttl=-1)


async def test_bad_correlations_do_not_touch_a_waiting_run(engine: Engine) -> None:
    register_loan(engine)
    await engine.start("loan", "APP-001", id="loan-1")
    await parked(engine, "loan-1")
    for ttl in ("-1s", -1):
        with pytest.raises(ParkwayError):
            await engine.correlate(SCORE, "APP-001", 1, ttl=ttl)
    with pytest.raises(ParkwayError):
        await engine.correlate(SCORE, 1, 1)
    await parked(engine, "loan-1")
    assert [s.run_id for s in await engine.subscriptions()] == ["loan-1"]
    assert await engine.messages() == []


async def test_a_non_json_payload_is_refused_and_writes_nothing(engine: Engine) -> None:
    with pytest.raises(ParkwayError):
        await engine.correlate(SCORE, "APP-001", {"when": {1, 2}})
    assert await engine.messages() == []


async def test_retry_with_a_negative_ttl_is_refused_and_keeps_the_message(
    engine: Engine, clock
) -> None:
    await engine.correlate(SCORE, "APP-001", 1, ttl="1m")
    await clock.advance("2m")
    [dead] = await engine.messages()
    with pytest.raises(ParkwayError):
        await engine.retry_message(dead.id, ttl=-1)
    assert await engine.messages() == [dead]


async def test_a_bad_key_inside_a_workflow_fails_the_run_clearly(engine: Engine) -> None:
    @engine.workflow()
    async def sloppy(ctx, input):
        return await ctx.wait_for_message(SCORE, 12345)

    h = await engine.start("sloppy", id="s-1")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert "key" in exc_info.value.error_message
    assert "12345" in exc_info.value.error_message
    assert await engine.subscriptions() == []


# -- found bugs --------------------------------------------------------------------------------


async def test_a_rejected_buffered_message_does_not_block_the_keys_run(engine: Engine) -> None:
    def check(value):
        if value.get("bad"):
            raise ValueError("application is incomplete")
        return value

    @engine.workflow(on_message=APPLIED, validate_input=check)
    async def onboarding(ctx, input):
        await ctx.wait_for_signal("finish")
        return input

    base = f"msg:{APPLIED}:APP-001"
    assert (await engine.correlate(APPLIED, "APP-001", {"n": 1})).outcome == "started"
    # Sent straight away it is refused at the edge...
    with pytest.raises(ParkwayError, match="incomplete"):
        await engine.correlate(APPLIED, "APP-002", {"bad": True})
    # ...but while the key's run is active it is buffered unchecked.
    assert (await engine.correlate(APPLIED, "APP-001", {"bad": True})).outcome == "buffered"
    await engine.idle()

    await engine.signal(base, "finish")
    # The first run must be able to end; the rejected message starts nothing and blocks nobody.
    assert await engine.handle(base).result(timeout=2) == {"n": 1}
    await engine.idle()
    runs = await engine.list_runs(workflow="onboarding")
    assert all(r.input != {"bad": True} or r.status is RunStatus.FAILED for r in runs)
    # Nothing is dropped silently: the rejected message is still listed (or a failed run says
    # why), and the key goes on working.
    listed = any(m.payload == {"bad": True} for m in await engine.messages())
    assert listed or any(r.input == {"bad": True} for r in runs)
    out = await engine.correlate(APPLIED, "APP-001", {"n": 3})
    assert out.outcome in ("started", "buffered")


@pytest.mark.replays
async def test_a_message_delivered_while_the_timeout_is_processed_is_not_lost(
    engine: Engine, clock
) -> None:
    hold = Hold()

    @engine.workflow()
    async def slow(ctx, key):
        await hold()  # a slow replay: the worker has claimed the timer and not decided yet
        try:
            return await ctx.wait_for_message(SCORE, key, timeout="10m")
        except WaitTimeoutError:
            return "timed out"

    h = await engine.start("slow", "APP-001", id="slow-1")
    await parked(engine, "slow-1")
    hold.on = True
    advancing = asyncio.create_task(clock.advance("10m"))
    await hold.reached()
    result = await engine.correlate(SCORE, "APP-001", {"score": 700})
    hold.release.set()
    await advancing
    out = await h.result(timeout=5)
    # Either the run got it, or (its timeout won the race) the message is buffered
    # again for a retry: never reported delivered and then dropped.
    assert result.outcome in ("delivered", "buffered")
    if out != {"score": 700}:
        assert out == "timed out"
        assert [m.payload for m in await engine.messages()] == [{"score": 700}]


# -- who dead-letters ----------------------------------------------------------------------------


def expiry_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "expired unconsumed" in r.getMessage()]


async def test_listing_shows_a_dead_letter_but_only_the_housekeeping_makes_and_logs_it(
    make_engine: Any, clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="parkway")
    client = await make_engine(worker=False)  # as `parkway messages` is
    await client.correlate(SCORE, "APP-001", 1, ttl="1m")
    await clock.advance("2m")
    [dead] = await client.messages()
    assert (dead.status, dead.reason) == ("expired", "its ttl passed before any run waited for it")
    assert await client.messages(status="expired") == [dead]
    assert await client.messages(status="buffered") == []
    assert expiry_warnings(caplog) == []  # a listing writes and logs nothing

    # The worker's housekeeping marks it, and logs it once, with the CLI's commands.
    await client.close()
    if client.url.startswith("memory:"):  # (nothing shared: a message of its own)
        engine = await make_engine()
        await engine.correlate(SCORE, "APP-001", 1, ttl="1m")
    else:
        engine = await make_engine(url=client.url)
    await clock.advance(f"{SWEEP_INTERVAL + 120}s")
    for _ in range(200):
        if expiry_warnings(caplog):
            break
        await asyncio.sleep(0.02)
    [warning] = expiry_warnings(caplog)
    [dead] = await engine.messages(status="expired")
    assert f"`parkway messages retry {dead.id}`" in warning
    assert f"`parkway messages discard {dead.id}`" in warning
    assert "engine." not in warning
    await engine.messages()
    assert len(expiry_warnings(caplog)) == 1
