"""Model-based test of message correlation: the engine against a small reference model.

Hypothesis interleaves waiting runs (some with timeouts), correlations with and
without a TTL, the passing of engine time, and an operator's retry or discard
of messages, on a handful of keys. After every step the engine must agree with
the model on which run received which payload, which timed out or was refused,
what is buffered, what expired, and who waits.

Each example drives its own engine on its own event loop (the test itself is
synchronous, so pytest-asyncio leaves it alone).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from parkway import (
    CorrelationError,
    CorrelationResult,
    DuplicateSubscriptionError,
    Engine,
    RunStatus,
    WaitTimeoutError,
)
from parkway.testing import ManualClock
from tests.helpers import examples

T = TypeVar("T")

T0 = datetime(2030, 1, 1, tzinfo=UTC)

NAME = "score"
KEYS = ("K0", "K1", "K2")
DEFAULT_TTL = 3600.0
TIMEOUTS = (None, 300, 1800)
TTLS = (None, 0, 120, 600, 3600)
STEPS = (60, 300, 900, 1800)


@dataclass
class Message:
    seq: int  # creation order; the engine lists messages oldest first
    key: str
    payload: str
    expires_at: float


@dataclass
class Waiter:
    run_id: str
    deadline: float | None


class MessageMachine(RuleBasedStateMachine):
    """Engine under test plus the reference model of what it should hold."""

    url = "memory://"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock(start=T0)
        self.engine = Engine(self.url, clock=self.clock)

        @self.engine.workflow()
        async def waiter(ctx, input):
            try:
                got = await ctx.wait_for_message(NAME, input["key"], timeout=input["timeout"])
            except WaitTimeoutError:
                return {"timeout": True}
            except DuplicateSubscriptionError as exc:
                return {"refused": exc.holder}
            return {"got": got}

        self.run(self.engine.open())
        # The model.
        self.now = 0.0
        self.seq = 0
        self.waiting: dict[str, Waiter] = {}  # key -> the run parked on it
        self.outputs: dict[str, dict[str, Any] | None] = {}  # run id -> output (None: parked)
        self.buffered: list[Message] = []
        self.expired: list[Message] = []

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            self.run(self.engine.close(grace=5))
            self.run(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()

    # -- model helpers -------------------------------------------------------------------------

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def new_payload(self) -> str:
        return f"p{self.next_seq()}"

    def receive(self, key: str, payload: str, ttl: float) -> CorrelationResult:
        """What correlate (or retry) should do with a message for ``key``."""
        waiter = self.waiting.pop(key, None)
        if waiter is not None:
            self.outputs[waiter.run_id] = {"got": payload}
            return CorrelationResult("delivered", waiter.run_id)
        self.buffered.append(Message(self.next_seq(), key, payload, self.now + ttl))
        return CorrelationResult("buffered")

    def all_messages(self) -> list[Message]:
        return sorted(self.buffered + self.expired, key=lambda m: m.seq)

    # -- rules ---------------------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), timeout=st.sampled_from(TIMEOUTS))
    def start_waiter(self, key: str, timeout: int | None) -> None:
        run_id = f"r{self.next_seq()}"
        holder = self.waiting.get(key)
        if holder is not None:
            self.outputs[run_id] = {"refused": holder.run_id}
        else:
            early = next((m for m in self.buffered if m.key == key), None)
            if early is not None:
                self.buffered.remove(early)
                self.outputs[run_id] = {"got": early.payload}
            else:
                deadline = None if timeout is None else self.now + timeout
                self.waiting[key] = Waiter(run_id, deadline)
                self.outputs[run_id] = None

        async def act() -> None:
            await self.engine.start("waiter", {"key": key, "timeout": timeout}, id=run_id)
            await self.engine.idle()

        self.run(act())

    @rule(key=st.sampled_from(KEYS), ttl=st.sampled_from(TTLS))
    def correlate(self, key: str, ttl: int | None) -> None:
        payload = self.new_payload()
        if ttl == 0 and key not in self.waiting:
            with pytest.raises(CorrelationError):
                self.run(self.engine.correlate(NAME, key, payload, ttl=ttl))
            return
        expected = self.receive(key, payload, DEFAULT_TTL if ttl is None else float(ttl))

        async def act() -> CorrelationResult:
            result = await self.engine.correlate(NAME, key, payload, ttl=ttl)
            await self.engine.idle()
            return result

        assert self.run(act()) == expected

    @rule(seconds=st.sampled_from(STEPS))
    def advance(self, seconds: int) -> None:
        self.now += seconds
        for key, waiter in list(self.waiting.items()):
            if waiter.deadline is not None and waiter.deadline <= self.now:
                del self.waiting[key]
                self.outputs[waiter.run_id] = {"timeout": True}
        for message in list(self.buffered):
            if message.expires_at <= self.now:
                self.buffered.remove(message)
                self.expired.append(message)
        self.run(self.clock.advance(seconds))

    @precondition(lambda self: self.expired)
    @rule(data=st.data())
    def retry_dead_letter(self, data: st.DataObject) -> None:
        expired = sorted(self.expired, key=lambda m: m.seq)
        index = data.draw(st.integers(0, len(expired) - 1), label="dead letter")
        message = expired[index]
        self.expired.remove(message)
        expected = self.receive(message.key, message.payload, DEFAULT_TTL)

        async def act() -> CorrelationResult:
            dead = await self.engine.messages(status="expired")
            assert (dead[index].key, dead[index].payload) == (message.key, message.payload)
            result = await self.engine.retry_message(dead[index].id)
            await self.engine.idle()
            return result

        assert self.run(act()) == expected

    @precondition(lambda self: self.buffered or self.expired)
    @rule(data=st.data())
    def discard(self, data: st.DataObject) -> None:
        everything = self.all_messages()
        index = data.draw(st.integers(0, len(everything) - 1), label="message")
        message = everything[index]
        (self.buffered if message in self.buffered else self.expired).remove(message)

        async def act() -> None:
            listed = await self.engine.messages()
            assert (listed[index].key, listed[index].payload) == (message.key, message.payload)
            await self.engine.discard_message(listed[index].id)

        self.run(act())

    # -- what must always agree ----------------------------------------------------------------

    @invariant()
    def engine_agrees_with_the_model(self) -> None:
        async def observe() -> tuple[Any, ...]:
            buffered = await self.engine.messages(status="buffered")
            expired = await self.engine.messages(status="expired")
            subs = await self.engine.subscriptions()
            runs = {r: await self.engine.get_run(r) for r in self.outputs}
            return buffered, expired, subs, runs

        buffered, expired, subs, runs = self.run(observe())
        order = sorted(self.buffered, key=lambda m: m.seq)
        assert [(m.key, m.payload) for m in buffered] == [(m.key, m.payload) for m in order]
        order = sorted(self.expired, key=lambda m: m.seq)
        assert [(m.key, m.payload) for m in expired] == [(m.key, m.payload) for m in order]
        assert all(m.reason for m in expired)
        assert sorted((s.kind, s.key, s.run_id) for s in subs) == sorted(
            ("message", k, w.run_id) for k, w in self.waiting.items()
        )
        for run_id, output in self.outputs.items():
            info = runs[run_id]
            if output is None:
                assert info.status is RunStatus.PARKED, (run_id, info)
            else:
                assert info.status is RunStatus.COMPLETED, (run_id, info)
                assert info.output == output, run_id


MessageMachine.TestCase.settings = settings(
    max_examples=examples(200),
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMessagesOnMemory = MessageMachine.TestCase


class SqliteMessageMachine(MessageMachine):
    """The same model on SQLite (fewer examples: each one creates a database file)."""

    def __init__(self) -> None:
        self.tmp_dir = tempfile.mkdtemp(prefix="parkway-messages-")
        self.url = f"sqlite:///{self.tmp_dir}/parkway.db"
        super().__init__()

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)


SqliteMessageMachine.TestCase.settings = settings(
    max_examples=examples(50),
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMessagesOnSqlite = SqliteMessageMachine.TestCase
