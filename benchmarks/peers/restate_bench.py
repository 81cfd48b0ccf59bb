"""Restate peer harness: measures Restate on the shapes parkway is measured on.

Run from the project root, one shape per invocation::

    python -m benchmarks.peers.restate_bench --shape steps3|park|wake [--n N] [--inflight K]

Needs the ``restate`` extra (``pip install -e '.[restate]'``: restate-sdk, hypercorn, httpx,
psutil) and npm: on first use the server is installed with
``npm install --prefix benchmarks/.peers @restatedev/restate-server@SERVER_VERSION`` (that
folder is gitignored), and its native binary is run directly. ``--server-bin`` (or
``RESTATE_SERVER_BIN``) points at another restate-server binary instead.

Exactly one line of JSON goes to stdout; every log line goes to stderr. If something needed
cannot be had (a Python package, npm, the registry, the binary), the line is
``{"available": false, "reason": ...}`` and the exit code is 0.

Set-up, fresh for each variant
------------------------------
A new temporary folder holds the server's data dir, the logs, the hypercorn config and the
announcement file; it is removed at the end. ``restate-server`` (single node, all roles,
its default configuration otherwise) listens on TCP only, on three free ports of
127.0.0.1 (node-to-node, admin, ingress), with telemetry off; after start-up the harness
checks that every socket it listens on is a loopback one, or gives up. The SDK app
(``benchmarks.peers.restate_app``) is served by hypercorn on 127.0.0.1 with the settings
the Restate Python SDK ships for it (unbounded HTTP/2 streams and keep-alive), in one
process (``--workers 1``; more are hypercorn worker processes). It is registered through
the admin API (``POST /deployments``), and warmed up (``--warmup`` steps3 calls and a few
awakeables) before any clock starts. The two processes run in their own process groups,
killed at the end (SIGTERM for the server, SIGINT for hypercorn, whose SIGTERM the SDK takes
over, then SIGKILL after 5 s), on error, on SIGTERM/SIGINT and by the watchdog; they also
get SIGKILL if the harness dies (Linux ``PR_SET_PDEATHSIG``). Every run is started, resolved
and awaited through the ingress HTTP API, by a minimal HTTP/1.1 keep-alive client
(``IngressClient``: httpx was the bottleneck, see there); httpx does the admin calls. Every
request is bounded by ``--request-timeout``. The result also has ``listening`` (the sockets
found), ``deployment`` (as the server registered it) and the load average before and after,
since the server, the SDK and this client share the machine's cores.

Variants: how the server talks to the SDK
-----------------------------------------
``bidi`` (the default a Restate user gets from hypercorn): HTTP/2, one bidirectional stream
per invocation attempt; a handler waiting on an awakeable keeps its stream and its coroutine
(the server reports it ``invoked``) until the server's inactivity timeout (1 min by default)
asks it to suspend. ``rr`` (request/response, the deployment registered with
``use_http_11``): HTTP/1.1, one request per attempt; a handler that waits on something not
yet completed suspends at once, ending its request, and resumes in a new request that
replays its journal. Each variant runs on its own fresh server; the best is reported at top
level (``variant``), every variant's figures under ``variants``. Pin one with ``--variant``.

Shapes
------
``steps3`` (default N=1000)
    N invocations of ``BenchSteps/run``, a service handler of 3 trivial ``ctx.run`` steps
    (int -> int -> dict -> int), each one a POST to the ingress that returns the result.
    ``sequential``: one at a time; ``concurrent``: ``--inflight`` (default 100) requests in
    flight. Both are reported (``sequential_wf_per_s``, ``concurrent_wf_per_s`` and their
    ``*_seconds``); ``wf_per_s`` is the better of the two (``mode`` says which).
``park`` (default N=10000)
    N invocations of ``BenchAwake/run`` (``--wait awakeable``: creates an awakeable and
    awaits it) or of the workflow ``BenchPromise`` (``--wait promise``: awaits the durable
    promise ``go``), each started with a ``/send`` POST, ``--inflight`` at a time. The clock
    runs from the first send until all N are parked: for ``rr``, until the server's
    ``sys_invocation_status`` (admin SQL API) shows N suspended; for ``bidi``, whose waiting
    handlers do not suspend for a minute, until all N handlers have announced their
    awakeable (a line each on a side file, written outside the journal, just before they
    wait): ``runs_per_s``. At that point: ``server_rss_mb`` / ``server_peak_rss_mb`` (the
    restate-server process: psutil RSS and VmHWM), ``sdk_rss_mb`` / ``sdk_peak_rss_mb`` (the
    hypercorn process tree), ``rss_mb`` and ``peak_rss_mb`` (their sums), ``server_threads``,
    ``sdk_threads`` and ``threads`` (OS threads, summed), ``data_dir_bytes`` (apparent size of
    every file under the data dir) and ``bytes_per_run`` = (``data_dir_bytes`` - the size
    after warm-up) / N; ``statuses_when_parked`` counts the service's invocations by status
    (the warm-up's completed ones included). Then every run is resolved and awaited
    (``--finish send``, bounded by ``--finish-timeout``), or everything is just shut down.
``wake`` (default N=1000)
    N runs parked as above; then, one run at a time: t0, resolve its awakeable (``POST
    /restate/awakeables/{id}/resolve``) or its promise (``POST /BenchPromise/{key}/signal``,
    itself an invocation of a shared handler), then attach to the invocation (``GET
    .../attach``) and read its result. ``p50_ms``/``p99_ms``/``mean_ms`` (linear interpolation
    between closest ranks). Stops after ``--max-seconds`` of resolving (``n_measured``).
    ``suspended_at_wake_start`` says how many of the runs had suspended by then.

Everything is bounded: ``--park-timeout``, ``--max-seconds``, ``--finish-timeout``,
``--request-timeout``, ``--startup-timeout``, and a ``--timeout`` watchdog that prints what
was measured with ``"error"`` set, kills the processes and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks.harness import latency
from benchmarks.peers.restate_client import Announcements, IngressClient
from benchmarks.peers.restate_server import (
    LIVE,
    LIVE_LOCK,
    WATCHDOG_FIRED,
    Stack,
    Unavailable,
    binary_version,
    install_server,
    stop_all,
    sweep_stale_tmpdirs,
)
from benchmarks.peers.restate_shapes import SERVICE, Bench
from benchmarks.procs import LOOPBACK, Output, best_variant, logger, watchdog

SHAPES = ("steps3", "park", "wake")
DEFAULT_N = {"steps3": 1000, "park": 10000, "wake": 1000}
VARIANTS = ("bidi", "rr")
PRIMARY: dict[str, tuple[str, bool]] = {
    "steps3": ("wf_per_s", True),
    "park": ("runs_per_s", True),
    "wake": ("p50_ms", False),
}
SERVER_VERSION = "1.7.12"

log = logger("restate_bench")


def versions(binary: Path) -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "peer_version": binary_version(binary),
        "sdk_version": version("restate-sdk"),
        "hypercorn_version": version("hypercorn"),
        "httpx_version": version("httpx"),
    }


async def measure(
    args: argparse.Namespace, binary: Path, variant: str, partial: dict[str, Any]
) -> dict[str, Any]:
    import httpx

    stack = Stack(binary, variant, args.workers)
    with LIVE_LOCK:
        LIVE.append(stack)
    try:
        stack.start()
        ingress = IngressClient(LOOPBACK, stack.ports["ingress"], args.request_timeout)
        async with httpx.AsyncClient(base_url=stack.admin_url, timeout=args.request_timeout) as adm:
            bench = Bench(args, stack, ingress, adm, partial, Announcements(stack.announce_path))
            try:
                await bench.setup()
                runner = {"steps3": bench.steps3, "park": bench.park, "wake": bench.wake}
                figures = await runner[args.shape]()
            finally:
                await ingress.close()
            figures["deployment"] = stack.deployment
            figures["listening"] = partial.get("listening")
            return figures
    except Exception:
        if stack.server is not None:
            log(f"server log: {stack.log_tail('restate-server')}")
            log(f"sdk log: {stack.log_tail('hypercorn')}")
        raise
    finally:
        stack.stop()
        with LIVE_LOCK:
            if stack in LIVE:
                LIVE.remove(stack)


def base_result(args: argparse.Namespace, info: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "available": True,
        "peer": "restate",
        **info,
        "shape": args.shape,
        "n": args.n,
        "inflight": args.inflight,
        "workers": args.workers,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "loadavg_1m_before": round(os.getloadavg()[0], 2),
    }
    if args.shape in ("park", "wake"):
        result.update(wait=args.wait, finish=args.finish)
    return result


def run_variant(
    args: argparse.Namespace, binary: Path, variant: str, partial: dict[str, Any]
) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        figures = asyncio.run(measure(args, binary, variant, partial))
    except Exception as e:
        log(f"[{variant}] failed: {e!r}")
        latencies = partial.pop("latencies", None)
        figures = {**partial, "error": f"{type(e).__name__}: {e}"}
        if latencies:
            figures.update(latency(latencies, extremes=True))
    figures["variant"] = variant
    figures["variant_wall_s"] = round(time.perf_counter() - t0, 3)
    figures["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    log(f"[{variant}] {figures}")
    return figures


def run(args: argparse.Namespace, out: Output) -> int:
    wall0 = time.perf_counter()
    try:
        binary = Path(args.server_bin) if args.server_bin else install_server(args.server_version)
        info = versions(binary)
    except Unavailable as e:
        out.emit({"available": False, "reason": str(e)})
        return 0
    result = base_result(args, info)
    sweep_stale_tmpdirs()
    partial: dict[str, Any] = {}
    current: dict[str, str] = {}

    def gave_up() -> None:
        WATCHDOG_FIRED.set()
        latencies = partial.pop("latencies", None)
        final = {**result, **partial, "variant": current.get("variant")}
        if latencies:
            final.update(latency(latencies, extremes=True))
        final["error"] = f"watchdog: gave up after {args.timeout:.0f}s"
        final["wall_s"] = round(time.perf_counter() - wall0, 3)
        out.emit(final)
        try:
            stop_all()
        finally:
            sys.stderr.flush()
            os._exit(1)

    timer = watchdog(args.timeout, gave_up)
    metric, higher = PRIMARY[args.shape]
    chosen = VARIANTS if args.variant == "best" else (args.variant,)
    variants: dict[str, dict[str, Any]] = {}
    try:
        for variant in chosen:
            if WATCHDOG_FIRED.is_set():
                break
            current["variant"] = variant
            partial.clear()
            variants[variant] = run_variant(args, binary, variant, partial)
    except (KeyboardInterrupt, SystemExit) as e:
        stop_all()
        latencies = partial.pop("latencies", None)
        final = {**result, **partial, "variant": current.get("variant"), "variants": variants}
        if latencies:
            final.update(latency(latencies, extremes=True))
        final["error"] = f"interrupted ({type(e).__name__})"
        final["wall_s"] = round(time.perf_counter() - wall0, 3)
        out.emit(final)
        return e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 130
    finally:
        timer.cancel()
        stop_all()
    best, _ = best_variant(variants, metric, higher)
    if best is None:
        errors = {v: r.get("error") for v, r in variants.items()}
        out.emit(
            {
                **result,
                "error": f"every variant failed: {errors}",
                "variants": variants,
                "wall_s": round(time.perf_counter() - wall0, 3),
            }
        )
        return 1
    final = {**result, **variants[best]}
    if len(variants) > 1:
        final["selected_by"] = f"{'max' if higher else 'min'} {metric}"
        final["variants"] = variants
    final["wall_s"] = round(time.perf_counter() - wall0, 3)
    out.emit(final)
    return 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.peers.restate_bench",
        description="Measure Restate on parkway's benchmark shapes; print one JSON line.",
    )
    p.add_argument("--shape", required=True, choices=SHAPES)
    p.add_argument("--n", type=int, default=None, help="runs (default: per shape)")
    p.add_argument("--inflight", type=int, default=100, help="requests in flight (concurrent)")
    p.add_argument("--variant", default="best", choices=("best", *VARIANTS))
    p.add_argument(
        "--wait",
        choices=tuple(SERVICE),
        default="awakeable",
        help="park/wake: what a run waits on",
    )
    p.add_argument("--workers", type=int, default=1, help="hypercorn processes for the SDK")
    p.add_argument("--warmup", type=int, default=50, help="unmeasured steps3 calls first")
    p.add_argument("--max-seconds", type=float, default=120.0, help="wake: resolving budget")
    p.add_argument("--park-timeout", type=float, default=600.0, help="bound on parking N runs")
    p.add_argument(
        "--finish",
        choices=("send", "shutdown"),
        default="send",
        help="park/wake: resolve every parked run and await it, or just shut down",
    )
    p.add_argument("--finish-timeout", type=float, default=120.0)
    p.add_argument("--request-timeout", type=float, default=60.0, help="bound on one request")
    p.add_argument("--startup-timeout", type=float, default=60.0)
    p.add_argument("--timeout", type=float, default=1800.0, help="watchdog for the whole run")
    p.add_argument("--server-version", default=SERVER_VERSION, help="npm version to install")
    p.add_argument(
        "--server-bin",
        default=os.environ.get("RESTATE_SERVER_BIN"),
        help="a restate-server binary to use instead of the npm one",
    )
    args = p.parse_args(argv)
    if args.n is None:
        args.n = DEFAULT_N[args.shape]
    if args.n <= 0 or args.inflight <= 0 or args.workers <= 0:
        p.error("--n, --inflight and --workers must be positive")
    if not args.server_version.startswith("1."):
        p.error("--server-version: a 1.x version")
    args.warmup = max(args.warmup, 0)
    args.warmup_parkers = min(args.warmup, 20)
    return args


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = Output()
    out.capture()
    missing = []
    for module in ("restate", "hypercorn", "httpx", "psutil"):
        try:
            __import__(module)
        except Exception as e:
            missing.append(f"{module} ({e!r})")
    if missing:
        out.emit(
            {
                "available": False,
                "reason": f"not importable: {', '.join(missing)}; pip install -e '.[restate]'",
            }
        )
        return 0
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        return run(args, out)
    finally:
        stop_all()


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    if WATCHDOG_FIRED.is_set():
        time.sleep(120)  # the watchdog is cleaning up; it exits the process itself
    os._exit(code)
