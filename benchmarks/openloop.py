"""The ``openloop`` shape: latency under a fixed offered load, not send-and-wait.

A closed loop (send, wait for the resume, send the next) never lets work queue up:
its sender slows down with the system. Here the send times are fixed in advance
and the latency of each message counts from its *scheduled* time, so a sender that
fell behind (because the process was busy) is counted, not hidden (no coordinated
omission).

In one process, with the engine's in-process worker:

1. N runs (10,000) park on ``wait_for_message("never", key)`` and stay parked: the
   background the load runs against.
2. Capacity: C further runs (``--capacity-n``, 10,000) park on
   ``wait_for_message("ping", key)``; 4 sender tasks correlate them as fast as each
   can (each awaits its ``correlate``); capacity = C / the time until the last one
   has completed.
3. For each rate in ``--rates`` (0.5 and 0.8 of that capacity): ``rate *
   --seconds`` (10) fresh target runs park first (every rate's, before the first
   is measured; each rate starts from a checkpointed WAL); then message k is
   released at ``t0 + k / rate`` to sender ``k % 4``, which correlates it as soon
   as it is free.

The release is timed by one periodic Linux ``timerfd`` on the event loop (its
wake-ups are ~30 µs late; :class:`Metronome`): asyncio's own timers sleep in
whole milliseconds when the loop is idle (``epoll_wait``), which made every
message up to ~0.9 ms late and counted that in its latency; a clock thread
instead contended with the engine for the GIL at every release and raised the
p99 it measured two- to sixfold. Without ``timerfd`` the loop's timers are used
(``"release": "loop"`` in the figures).

A target run, once resumed, runs one async step that records the time it ran
(``resumed``) and returns; its completion (the commit of its resume: the message's
consumption, the step's result and the run's end in one transaction) is the end
of the measurement: the step starts a task that awaits the run's ``result()``,
which for a run this process's worker is advancing waits for the end the worker
announces after its commit, with no read of the store.

4. After them (unless ``--sustained 0``): first the loop's own sustained rate, its
   completion rate when released at 100 % of the capacity (``sat_*``,
   ``sustained_per_s``), then ``--sustained`` (0.8) of it (``s80_*``): the
   same latency, offered as a share of what the loop takes paced rather than of
   the capacity phase's rate (see :func:`paced_capacity`).

Figures per rate ``r50``/``r80`` (the rate's percent): ``offered_per_s``,
``p50_ms``/``p99_ms``/``p999_ms`` from the scheduled send to the completion,
``resumed_p50_ms``/``resumed_p99_ms`` to the step, ``send_lag_p99_ms`` (how late
the senders started sending) and ``n_measured``.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.harness import Bench, db_bytes, latency

SENDERS = 4
# How many runs are started concurrently while parking (starts share commits).
STARTERS = 8


class Probe:
    """When each message's run resumed and when its resume was committed."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.resumed: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self._observers: set[asyncio.Task[None]] = set()
        self._waiting: set[str] = set()
        self._all_done = asyncio.Event()

    async def stamp(self, key: str) -> str:
        """The target's step: the run has resumed and is in this worker's hands."""
        self.resumed[key] = time.perf_counter()
        task = asyncio.create_task(self._observe(key))
        self._observers.add(task)
        task.add_done_callback(self._observers.discard)
        return key

    async def _observe(self, key: str) -> None:
        await self.engine.handle(f"t-{key}").result(timeout=300)
        self.done[key] = time.perf_counter()
        self._waiting.discard(key)
        if not self._waiting:
            self._all_done.set()

    def expect(self, keys: list[str]) -> None:
        """The keys whose completions ``wait_done`` waits for (set before sending)."""
        self._waiting = {k for k in keys if k not in self.done}
        self._all_done = asyncio.Event()
        if not self._waiting:
            self._all_done.set()

    async def wait_done(self, timeout: float) -> None:
        # (an event, not a poll: the runs being waited for are still being measured)
        try:
            await asyncio.wait_for(self._all_done.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"{len(self._waiting)} runs did not complete") from None


async def _park(engine: Any, workflow: str, keys: list[str], prefix: str) -> None:
    pending = iter(keys)

    async def starter() -> None:
        for key in pending:
            await engine.start(workflow, key, id=f"{prefix}{key}")

    await asyncio.gather(*(starter() for _ in range(STARTERS)))
    await engine.idle(timeout=900)


async def _send(engine: Any, key: str) -> None:
    result = await engine.correlate("ping", key, key)
    assert result.outcome == "delivered", result


async def capacity(engine: Any, probe: Probe, count: int) -> float:
    """Messages per second to completion with 4 senders each sending as fast as it can."""
    keys = [f"cap-{i}" for i in range(count)]
    await _park(engine, "target", keys, "t-")
    pending = iter(keys)

    async def sender() -> None:
        for key in pending:
            await _send(engine, key)

    probe.expect(keys)
    t0 = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(SENDERS)))
    await probe.wait_done(300)
    return count / (max(probe.done[k] for k in keys) - t0)


class Metronome:
    """Releases message k at ``start_ns + k * period_ns`` (``time.perf_counter_ns``),
    for k below ``count``, by calling ``release(k)`` on the event loop.

    One periodic ``timerfd``, armed once: each wake-up reads how many periods have
    passed and releases that many messages, in the fd's callback. Arming a
    one-shot timer for each message instead (a ``ctypes`` call, a future and a
    task's wake-up each) cost the loop ~41 µs a message, ~7 µs more than this,
    all of it counted against the engine it shares the loop with. Without
    ``timerfd``, the loop's own timers (``kind`` "loop").
    """

    def __init__(
        self, start_ns: int, period_ns: int, count: int, release: Callable[[int], None]
    ) -> None:
        self.start_ns, self.period_ns, self.count = start_ns, period_ns, count
        self._release = release
        self._released = 0
        self._loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = self._loop.create_future()
        self._fd = -1
        try:
            self._libc = ctypes.CDLL(None, use_errno=True)
            fd = self._libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        except (OSError, AttributeError):
            fd = -1
        if fd >= 0 and time.get_clock_info("perf_counter").implementation.endswith(
            "(CLOCK_MONOTONIC)"
        ):
            self._fd = fd
        elif fd >= 0:
            os.close(fd)

    @property
    def kind(self) -> str:
        return "timerfd" if self._fd >= 0 else "loop"

    def times(self) -> list[float]:
        """Each message's scheduled time, in ``time.perf_counter`` seconds."""
        return [(self.start_ns + k * self.period_ns) / 1e9 for k in range(self.count)]

    async def run(self) -> None:
        """Release every message on time; return once the last is released."""
        if self.count == 0:
            return
        if self._fd < 0:
            for k, due in enumerate(self.times()):
                if due > time.perf_counter():
                    await asyncio.sleep(due - time.perf_counter())
                self._release(k)
            return
        first = _Timespec(self.start_ns // 10**9, self.start_ns % 10**9)
        spec = _Itimerspec(_Timespec(0, self.period_ns), first)
        if self._libc.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None):
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        self._loop.add_reader(self._fd, self._fired)
        try:
            await self.done
        finally:
            self.close()

    def _fired(self) -> None:
        try:
            periods = int.from_bytes(os.read(self._fd, 8), "little")
        except BlockingIOError:
            return
        # (the first expiry is message 0's time: n expiries so far release n messages)
        upto = min(self.count, self._released + periods)
        for k in range(self._released, upto):
            self._release(k)
        self._released = upto
        if upto >= self.count and not self.done.done():
            self.done.set_result(None)

    def close(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


_CLOCK_MONOTONIC, _TFD_TIMER_ABSTIME = 1, 1
_TFD_NONBLOCK, _TFD_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC


async def offered(
    engine: Any, probe: Probe, rate: float, seconds: float, keys: list[str]
) -> dict[str, Any]:
    """Messages at a fixed rate for ``seconds``; latency from each scheduled send."""
    count = len(keys)
    queues: list[asyncio.Queue[int | None]] = [asyncio.Queue() for _ in range(SENDERS)]
    metronome = Metronome(
        time.perf_counter_ns() + 50_000_000,
        max(1, round(1e9 / rate)),
        count,
        lambda k: queues[k % SENDERS].put_nowait(k),
    )
    times = metronome.times()
    start = times[0]
    began: dict[int, float] = {}
    kind = metronome.kind

    async def release() -> None:
        await metronome.run()
        for q in queues:
            q.put_nowait(None)

    async def sender(q: asyncio.Queue[int | None]) -> None:
        while (k := await q.get()) is not None:
            began[k] = time.perf_counter()
            await _send(engine, keys[k])

    probe.expect(keys)
    try:
        await asyncio.gather(release(), *(sender(q) for q in queues))
        await probe.wait_done(300)
    finally:
        metronome.close()
    await engine.idle(timeout=300)
    out: dict[str, Any] = {"offered_per_s": round(count / seconds, 1), "release": kind}
    out.update(latency([probe.done[key] - times[k] for k, key in enumerate(keys)]))
    resumed = latency([probe.resumed[key] - times[k] for k, key in enumerate(keys)])
    out.update(resumed_p50_ms=resumed["p50_ms"], resumed_p99_ms=resumed["p99_ms"])
    out["send_lag_p99_ms"] = latency([began[k] - times[k] for k in range(count)])["p99_ms"]
    out["completed_per_s"] = round(count / (max(probe.done.values()) - start), 1)
    return out


async def paced_capacity(
    bench: Bench, engine: Any, probe: Probe, cap: float, seconds: float, fraction: float
) -> dict[str, Any]:
    """The loop's own sustained rate, and latency at ``fraction`` of it (``sat_*``, ``s80_*``).

    Messages released at 100 % of the capacity phase's rate for ``seconds``: their
    completion rate is what this loop sustains when its messages come paced (the
    capacity phase's four senders never let a message arrive alone, so its
    transactions batch in a way paced arrivals do not build). Then ``fraction`` of
    that rate, as the rates above are of the capacity. Measured after those
    rates, so that their runs' background is the same as before this phase existed.
    """
    saturated = list(_keys("sat", max(1, round(cap * seconds))))
    # As many as the fraction needs if the loop sustains all it is offered (it
    # sustains less: the rest stay parked, part of the background).
    spare = list(_keys("sus", max(1, round(cap * fraction * seconds))))
    await _park(engine, "target", saturated + spare, "t-")
    settle(bench)
    figures = await offered(engine, probe, cap, seconds, saturated)
    rate = figures["completed_per_s"]
    out: dict[str, Any] = {f"sat_{k}": v for k, v in figures.items()}
    out["sustained_per_s"] = rate
    keys = spare[: max(1, round(rate * fraction * seconds))]
    settle(bench)
    figures = await offered(engine, probe, rate * fraction, len(keys) / (rate * fraction), keys)
    out.update({f"s{round(fraction * 100)}_{k}": v for k, v in figures.items()})
    return out


def settle(bench: Bench) -> None:
    """Start a measured rate from a checkpointed WAL (SQLite), as every rate alike."""
    if bench.url.startswith("sqlite"):
        db_bytes(bench.path)


def _keys(prefix: str, count: int) -> Iterator[str]:
    return (f"{prefix}-{i}" for i in range(count))


async def shape_openloop(bench: Bench, n: int) -> dict[str, Any]:
    seconds: float = bench.options.seconds
    fractions = [float(x) for x in str(bench.options.rates).split(",") if x.strip()]
    engine = bench.engine()
    probe = Probe(engine)

    @engine.workflow("target")
    async def target(ctx: Any, key: str) -> Any:
        await ctx.wait_for_message("ping", key)
        return await ctx.step(probe.stamp, key, name="resumed")

    @engine.workflow("background")
    async def background(ctx: Any, key: str) -> Any:
        return await ctx.wait_for_message("never", key)

    async with engine:
        t0 = time.perf_counter()
        await _park(engine, "background", list(_keys("bg", n)), "b-")
        park_s = time.perf_counter() - t0
        cap = await capacity(engine, probe, bench.options.capacity_n)
        out: dict[str, Any] = {
            "background": n,
            "park_runs_per_s": round(n / park_s, 1),
            "capacity_per_s": round(cap, 1),
            "seconds_per_rate": seconds,
            "senders": SENDERS,
        }
        # Every rate's runs park before the first is measured: parking the next
        # one's would leave its WAL (SQLite) to be checkpointed during the next.
        targets = {}
        for fraction in fractions:
            tag = f"r{round(fraction * 100)}"
            targets[tag] = list(_keys(tag, max(1, round(cap * fraction * seconds))))
            await _park(engine, "target", targets[tag], "t-")
        for fraction, (tag, keys) in zip(fractions, targets.items(), strict=True):
            settle(bench)
            figures = await offered(engine, probe, cap * fraction, seconds, keys)
            out.update({f"{tag}_{k}": v for k, v in figures.items()})
        parked = len(await engine.list_runs(status="parked", limit=n + 1))
        if bench.options.sustained > 0:
            fraction = bench.options.sustained
            out.update(await paced_capacity(bench, engine, probe, cap, seconds, fraction))
    out["parked_after"] = parked
    return out
