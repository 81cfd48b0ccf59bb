"""Restate's side of each shape (``steps3``, ``park``, ``wake``) on a running stack.

Part of the Restate adapter (``benchmarks.peers.restate_bench``, whose docstring says
what each figure means).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchmarks.harness import latency
from benchmarks.peers.restate_client import Announcements, IngressClient, dumps, loads
from benchmarks.peers.restate_server import Stack
from benchmarks.procs import dir_bytes, logger

if TYPE_CHECKING:
    import httpx

ANNOUNCE_POLL_S = 0.01
SQL_POLL_S = 0.05
SERVICE = {"awakeable": "BenchAwake", "promise": "BenchPromise"}

log = logger("restate_bench")


def expected_steps3(i: int) -> int:
    return (i + 1) * 2


@dataclass
class Bench:
    args: argparse.Namespace
    stack: Stack
    ingress: IngressClient
    admin: httpx.AsyncClient
    partial: dict[str, Any]
    announcements: Announcements
    invocations: dict[str, str] = field(default_factory=dict)  # key -> invocation id

    @property
    def service(self) -> str:
        return SERVICE[self.args.wait]

    # ----------------------------------------------------------------- helpers

    async def retry_until(
        self, what: str, attempt: Callable[[], Awaitable[bool]], timeout_s: float
    ) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            self.stack.check_alive()
            try:
                if await attempt():
                    return
            except httpx.HTTPError as e:
                last = repr(e)
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{what}: not ready after {timeout_s:.0f}s {last}")

    async def sql(self, query: str) -> list[dict[str, Any]]:
        r = await self.admin.post(
            "/query", json={"query": query}, headers={"accept": "application/json"}
        )
        if r.status_code != 200:
            raise RuntimeError(f"admin query failed ({r.status_code}): {r.text[:300]}")
        rows: list[dict[str, Any]] = r.json()["rows"]
        return rows

    async def count_status(self, status: str) -> int:
        rows = await self.sql(
            "SELECT count(*) AS n FROM sys_invocation_status"
            f" WHERE target_service_name = '{self.service}' AND target_handler_name = 'run'"
            f" AND status = '{status}'"
        )
        return int(rows[0]["n"]) if rows else 0

    async def for_each(self, items: Sequence[Any], fn: Callable[[Any], Awaitable[None]]) -> None:
        """Run fn over items with --inflight calls in flight."""
        it = iter(items)

        async def worker() -> None:
            for item in it:
                await fn(item)

        await asyncio.gather(*(worker() for _ in range(min(self.args.inflight, len(items)))))

    # ----------------------------------------------------------------- set-up

    async def setup(self) -> None:
        import httpx

        args = self.args

        async def admin_up() -> bool:
            return (await self.admin.get("/health")).status_code == 200

        async def sdk_up() -> bool:
            # hypercorn answers the SDK's discovery endpoint once the app is loaded.
            async with httpx.AsyncClient(timeout=5) as c:
                r = await c.get(f"{self.stack.sdk_url}/discover")
                return r.status_code in (200, 415)

        await self.retry_until("admin API", admin_up, args.startup_timeout)
        await self.retry_until("SDK app", sdk_up, args.startup_timeout)
        r = await self.admin.post(
            "/deployments",
            json={"uri": self.stack.sdk_url, "use_http_11": self.stack.variant == "rr"},
        )
        if r.status_code not in (200, 201):
            raise RuntimeError(f"registering the deployment failed ({r.status_code}): {r.text}")
        deployment = r.json()
        self.stack.deployment = {"id": deployment.get("id")}
        r = await self.admin.get("/deployments")
        for d in r.json().get("deployments", []):
            if d.get("id") == deployment.get("id"):
                self.stack.deployment.update(
                    protocol_type=d.get("protocol_type"),
                    http_version=d.get("http_version"),
                    sdk_version=d.get("sdk_version"),
                )
        log(f"[{self.stack.variant}] registered {self.stack.deployment}")

        async def ingress_up() -> bool:
            try:
                status, _ = await self.ingress.request("POST", "/BenchSteps/run", b"0", 5.0)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                return False
            return status == 200

        await self.retry_until("ingress", ingress_up, args.startup_timeout)
        listening = self.stack.listening()
        outside = [a for a in listening if not a.startswith(("127.", "::1", "[::1]"))]
        if outside:
            raise RuntimeError(f"refusing to run: listening beyond loopback on {outside}")
        self.partial["listening"] = listening
        await self.warmup()

    async def warmup(self) -> None:
        """Calls that are not measured: first requests, connections, partition leaders."""
        for i in range(self.args.warmup):
            await self.call_steps3(i)
        keys = [f"warm-{i}" for i in range(min(self.args.warmup, 20))]
        await self.for_each(keys, self.start_parker)
        await self.wait_announced(keys, 60.0)
        for i, key in enumerate(keys):
            await self.resolve(key, i)
            await self.attach(key, i)

    # ----------------------------------------------------------------- primitives

    async def call_steps3(self, i: int) -> None:
        status, data = await self.ingress.request("POST", "/BenchSteps/run", dumps(i))
        if status != 200 or loads(data) != expected_steps3(i):
            raise RuntimeError(f"steps3({i}) answered {status}: {data[:300]!r}")

    async def start_parker(self, key: str) -> None:
        if self.args.wait == "awakeable":
            status, data = await self.ingress.request("POST", "/BenchAwake/run/send", dumps(key))
        else:
            status, data = await self.ingress.request("POST", f"/BenchPromise/{key}/run/send")
        answer = loads(data)
        if status not in (200, 202) or not isinstance(answer, dict):
            raise RuntimeError(f"send {key} answered {status}: {data[:300]!r}")
        self.invocations[key] = answer["invocationId"]

    async def resolve(self, key: str, value: int) -> None:
        if self.args.wait == "awakeable":
            path = f"/restate/awakeables/{self.announcements.ids[key]}/resolve"
        else:
            path = f"/BenchPromise/{key}/signal"
        status, data = await self.ingress.request("POST", path, dumps(value))
        if status not in (200, 202):
            raise RuntimeError(f"resolve {key} answered {status}: {data[:300]!r}")

    async def attach(self, key: str, value: int, timeout_s: float | None = None) -> None:
        if self.args.wait == "awakeable":
            url = f"/restate/invocation/{self.invocations[key]}/attach"
        else:
            url = f"/restate/workflow/BenchPromise/{key}/attach"
        status, data = await self.ingress.request("GET", url, timeout_s=timeout_s)
        if status != 200 or loads(data) != value:
            raise RuntimeError(f"attach {key} answered {status}: {data[:300]!r}")

    async def wait_announced(self, keys: Sequence[str], timeout_s: float) -> float:
        """Wait until every key's handler has announced that it waits; returns the time."""
        deadline = time.perf_counter() + timeout_s
        wanted = set(keys)
        while True:
            self.announcements.poll()
            now = time.perf_counter()
            missing = len(wanted - self.announcements.ids.keys())
            if not missing:
                return now
            if now > deadline:
                raise TimeoutError(f"{missing}/{len(keys)} runs not parked after {timeout_s:.0f}s")
            self.stack.check_alive()
            await asyncio.sleep(ANNOUNCE_POLL_S)

    async def wait_count(self, status: str, n: int, timeout_s: float, poll_s: float) -> float:
        deadline = time.perf_counter() + timeout_s
        while True:
            count = await self.count_status(status)
            now = time.perf_counter()
            if count >= n:
                return now
            if now > deadline:
                raise TimeoutError(f"only {count}/{n} runs {status} after {timeout_s:.0f}s")
            self.stack.check_alive()
            await asyncio.sleep(poll_s)

    # ----------------------------------------------------------------- shapes

    async def steps3(self) -> dict[str, Any]:
        n = self.args.n
        latencies: list[float] = []
        t0 = time.perf_counter()
        for i in range(n):
            t = time.perf_counter()
            await self.call_steps3(i)
            latencies.append(time.perf_counter() - t)
        seq = time.perf_counter() - t0
        stats = latency(latencies, extremes=True)
        figures: dict[str, Any] = {
            "sequential_wf_per_s": round(n / seq, 1),
            "sequential_seconds": round(seq, 4),
            "sequential_p50_ms": stats.get("p50_ms"),
            "sequential_p99_ms": stats.get("p99_ms"),
        }
        self.partial.update(figures)
        log(f"[{self.stack.variant}] steps3 sequential: {figures}")

        async def one(i: int) -> None:
            await self.call_steps3(n + i)

        t0 = time.perf_counter()
        await self.for_each(range(n), one)
        conc = time.perf_counter() - t0
        figures.update(
            concurrent_wf_per_s=round(n / conc, 1),
            concurrent_seconds=round(conc, 4),
        )
        mode = "concurrent" if conc < seq else "sequential"
        figures.update(
            mode=mode,
            wf_per_s=figures[f"{mode}_wf_per_s"],
            seconds=figures[f"{mode}_seconds"],
        )
        return figures

    async def park_runs(self, keys: list[str]) -> dict[str, Any]:
        """Start one run per key and wait until all are parked; the parking figures."""
        args = self.args
        t0 = time.perf_counter()
        await self.for_each(keys, self.start_parker)
        sent = time.perf_counter() - t0
        announced = await self.wait_announced(keys, args.park_timeout) - t0
        figures: dict[str, Any] = {
            "send_seconds": round(sent, 4),
            "announced_seconds": round(announced, 4),
        }
        if self.stack.variant == "rr":
            # Parked = durably suspended, as the server's own status table says.
            parked = await self.wait_count(
                "suspended", len(keys), max(1.0, args.park_timeout - announced), SQL_POLL_S
            )
            seconds = parked - t0
            figures["park_point"] = "suspended"
        else:
            seconds = announced
            figures["park_point"] = "waiting on an open stream"
        figures.update(seconds=round(seconds, 4), runs_per_s=round(len(keys) / seconds, 1))
        rows = await self.sql(
            "SELECT status, count(*) AS n FROM sys_invocation_status"
            f" WHERE target_service_name = '{self.service}' AND target_handler_name = 'run'"
            " GROUP BY status"
        )
        figures["statuses_when_parked"] = {str(r["status"]): int(r["n"]) for r in rows}
        return figures

    async def finish(self, keys: list[str], first_value: int = 0) -> dict[str, Any]:
        """Resolve every key and wait until all the service's runs have completed."""
        args = self.args
        t0 = time.perf_counter()
        values = {key: first_value + i for i, key in enumerate(keys)}

        async def go(key: str) -> None:
            await self.resolve(key, values[key])

        await self.for_each(keys, go)
        total = len(self.invocations)
        try:
            await self.wait_count("completed", total, args.finish_timeout, 0.1)
        except TimeoutError as e:
            log(str(e))
        return {
            "finish_s": round(time.perf_counter() - t0, 3),
            "finished_ok": await self.count_status("completed") - args.warmup_parkers,
        }

    async def park(self) -> dict[str, Any]:
        args = self.args
        baseline, _ = dir_bytes(self.stack.data_dir)
        keys = [f"p{i}" for i in range(args.n)]
        figures = await self.park_runs(keys)
        figures.update(self.stack.figures())
        figures.update(
            data_dir_baseline_bytes=baseline,
            bytes_per_run=round((figures["data_dir_bytes"] - baseline) / args.n, 1),
        )
        self.partial.update(figures)
        log(f"[{self.stack.variant}] parked {args.n}: {figures}")
        if args.finish == "send":
            figures.update(await self.finish(keys))
        return figures

    async def wake(self) -> dict[str, Any]:
        args = self.args
        keys = [f"w{i}" for i in range(args.n)]
        parked = await self.park_runs(keys)
        suspended = await self.count_status("suspended")
        self.partial.update(park_seconds=parked["seconds"], suspended_at_wake_start=suspended)
        latencies: list[float] = []
        self.partial["latencies"] = latencies
        start = time.perf_counter()
        for i, key in enumerate(keys):
            remaining = args.max_seconds - (time.perf_counter() - start)
            if remaining <= 0:
                break
            t = time.perf_counter()
            await self.resolve(key, i)
            await self.attach(key, i, timeout_s=min(args.request_timeout, remaining + 5))
            latencies.append(time.perf_counter() - t)
        seconds = time.perf_counter() - start
        figures: dict[str, Any] = {
            "park_seconds": parked["seconds"],
            "park_point": parked["park_point"],
            "suspended_at_wake_start": suspended,
            **latency(latencies, extremes=True),
            "wake_loop_seconds": round(seconds, 3),
            "budget_exhausted": len(latencies) < args.n,
        }
        self.partial.pop("latencies", None)
        self.partial.update(figures)
        rest = keys[len(latencies) :]
        if args.finish == "send" and rest:
            figures.update(await self.finish(rest, len(latencies)))
        return figures
