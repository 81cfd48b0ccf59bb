"""The runner's PostgreSQL tables: on the local server, and across a (namespaced) network."""

from __future__ import annotations

import argparse
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks import netpg
from benchmarks.harness import DEFAULT_PG_ADMIN
from benchmarks.measure import Job, fmt, pair, ratio, run_json, run_rounds, value, with_variant
from benchmarks.rows import QUICK_DEPTH, QUICK_EVENTS, QUICK_SECONDS

# Table rows measured by a shape with options: key -> parkway_bench arguments.
VARIANTS = {
    "xpublish": ["--shape", "xwake", "--via", "publish"],
    "xcorrelate": ["--shape", "xwake", "--via", "correlate"],
    "steps3sync": ["--shape", "steps3", "--steps", "sync"],
    "parkevent": ["--shape", "park", "--wait", "event"],
    "xupdate": ["--shape", "update", "--update-via", "xproc"],
}
# Options of the shapes whose quick run is shorter in more than N: (full, quick).
SIZED = {
    "resume": (["--restarts", "10"], ["--restarts", "1", "--depth", str(QUICK_DEPTH)]),
    "openloop": (
        ["--seconds", "10", "--capacity-n", "10000"],
        ["--seconds", str(QUICK_SECONDS), "--capacity-n", "100"],
    ),
    "subjects": ([], ["--events", str(QUICK_EVENTS)]),
    "schedules": ([], ["--soon"]),
}


def shape_args(key: str, quick: bool = False) -> list[str]:
    args = VARIANTS.get(key, ["--shape", key])
    full, short = SIZED.get(key, ([], []))
    return [*args, *(short if quick else full)]


def _ours(key: str, *extra: str, prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    return run_json("benchmarks.parkway_bench", [*shape_args(key), *extra], 1800, prefix)


def postgres_table(args: argparse.Namespace) -> list[str]:
    """parkway and DBOS on one local PostgreSQL server, in this same invocation."""
    n = 200 if args.quick else 2000
    quick = args.quick

    def ours(key: str, *extra: str) -> dict[str, Any]:
        return _ours(key, "--db", "postgres", *extra)

    scale = {k: ours("scale", "--n", str(n), "--workers", str(k)) for k in (1, 2, 4)}
    # The rows with a ratio to DBOS: ours and DBOS's in rounds (see measure.run_rounds).
    paired: dict[str, Job] = {
        key: (
            "benchmarks.parkway_bench",
            [*shape_args(key), "--db", "postgres", "--n", str(n // 2)],
            1800,
        )
        for key in ("steps3", "steps3sync")
    }
    if not args.no_peers:
        paired["dbos"] = (
            "benchmarks.peers.dbos_bench",
            ["--shape", "steps3", "--n", str(n // 2), "--db", "postgres"],
            1800,
        )
    rounds = run_rounds(paired)
    steps3, steps3sync = rounds["steps3"], rounds["steps3sync"]
    # The targets are over 1,000 runs; each wake waits for the previous one's end.
    wakes = "100" if quick else "1000"
    wake = ours("wake", "--n", wakes)
    xwake = ours("xwake", "--n", wakes)
    xpublish = ours("xpublish", "--n", wakes)
    xcorrelate = ours("xcorrelate", "--n", wakes)
    correlate = ours("correlate", "--n", str(n))
    publish = ours("publish", "--n", str(n * 5))
    gather = ours("gather", "--n", "10" if quick else "50")
    update = ours("update", "--n", wakes)
    xupdate = ours("xupdate", "--n", wakes)
    resume = run_json(
        "benchmarks.parkway_bench",
        [*shape_args("resume", quick), "--db", "postgres", "--n", "30" if quick else "200"],
        1800,
    )
    loop = run_json(
        "benchmarks.parkway_bench",
        [*shape_args("openloop", quick), "--db", "postgres", "--n", str(n * 5)],
        1800,
    )
    dbos: dict[str, dict[str, Any]] = {}
    if not args.no_peers:
        dbos["steps3"] = rounds["dbos"]
        dbos["wake"] = run_json(
            "benchmarks.peers.dbos_bench",
            [
                *("--shape", "wake", "--n", wakes, "--db", "postgres"),
                *("--variant", "async", "--finish", "shutdown"),
            ],
            1800,
        )

    d_steps3 = dbos.get("steps3", {})
    d_steps = value(d_steps3, "wf_per_s")
    d_wake = dbos.get("wake", {})
    best = with_variant(d_steps3, "wf_per_s", "variant")
    rows = [
        "PostgreSQL 15 on the same machine (fsync on), one fresh database per shape:",
        "",
        "| shape | parkway | DBOS | ratio | target |",
        "|---|---:|---:|---:|---|",
    ]
    for result, kind, label, target in (
        (steps3sync, "sync", "`def` steps", "≥ 10× DBOS's best"),
        (steps3, "async", "`async def` steps", "≥ 15× DBOS's best"),
    ):
        mine = value(result, "wf_per_s")
        same = value(d_steps3, f"{kind}_wf_per_s")
        rows += [
            f"| {n // 2:,} workflows × 3 steps, {label}, in one process: wf/s, against "
            f"DBOS's best with {kind} steps | {fmt(mine)} | "
            f"{with_variant(d_steps3, f'{kind}_wf_per_s', f'{kind}_variant')} | "
            f"{ratio(mine, same, True)} | {target if kind == 'sync' else ''} |",
            f"| the same, against DBOS's best overall | {fmt(mine)} | {best} | "
            f"{ratio(mine, d_steps, True)} | {target} |",
        ]
    for k, result in scale.items():
        rows.append(
            f"| {n:,} workflows × 3 steps, run by {k} worker process{'es' if k > 1 else ''}"
            f": wf/s | {fmt(value(result, 'wf_per_s'))} | {fmt(d_steps)} ¹ | "
            f"{ratio(value(result, 'wf_per_s'), d_steps, True)} | ≥ 10× DBOS |"
        )
    rows += [
        f"| signal → resumed, in-process, p50 / p99 ms | {pair(wake)} | {pair(d_wake)} | "
        f"{ratio(value(wake, 'p50_ms'), value(d_wake, 'p50_ms'), False)} | ≤ 1.5 / 10 |",
        f"| signal → resumed, across processes, p50 / p99 ms | {pair(xwake)} | | "
        "| ≤ 5 / 50 (≤ 1.5 / 10) |",
        f"| publish → resumed, across processes, p50 / p99 ms | {pair(xpublish)} | | "
        "| ≤ 5 / 50 (≤ 1.5 / 10) |",
        f"| correlate → resumed, across processes, p50 / p99 ms | {pair(xcorrelate)} | | "
        "| ≤ 1.5 / 10 |",
        f"| publish → resumed, {n * 5:,} parked waiters, p50 / p99 ms | "
        f"{pair(publish, 'wake_p50_ms', 'wake_p99_ms')} | | | ≤ 1.5 / 10 |",
        f"| publish cost, {n * 5:,} non-matching waiters / none | "
        f"{fmt(value(publish, 'ratio'))} | | | ≤ 1.5 |",
        f"| correlate {n:,} parked runs, one sender, one at a time: msgs/s | "
        f"{fmt(value(correlate, 'msgs_per_s'))} | | | ≥ 2,000 |",
        "| the same, one sender with 16 messages in flight: msgs/s | "
        f"{fmt(value(correlate, 'msgs_per_s_inflight'))} | | | ≥ 2,000 |",
        f"| correlate → resumed, p50 / p99 ms | {pair(correlate)} | | | ≤ 1.5 / 10 |",
        *resume_rows(resume),
        *openloop_rows(loop, n * 5, QUICK_SECONDS if quick else 10),
        f"| gather of 10 async steps of 20 ms: wall / one step (p50) | "
        f"{fmt(value(gather, 'ratio_p50'))} | | | ≈ 1 |",
        f"| update → answer, in one process, p50 / p99 ms | {pair(update)} | | | ≤ 3 |",
        f"| update → answer, across processes, p50 / p99 ms | {pair(xupdate)} | | | ≤ 3 |",
        "",
        "¹ DBOS's figure is its in-process one (started and run in one process, its best "
        "variant); the worker-process rows run workflows started beforehand by a client "
        "process, from the first completion to the last.",
    ]
    variants = d_steps3.get("variants")
    if d_steps3.get("available") and isinstance(variants, dict):
        each = ", ".join(
            f"{name} {fmt(result.get('wf_per_s'))}"
            for name, result in variants.items()
            if isinstance(result, dict)
        )
        rows.append(f"- DBOS steps3 on PostgreSQL, wf/s by variant: {each}.")
    return rows


def resume_rows(resume: dict[str, Any]) -> list[str]:
    depth = value(resume, "depth") or 5000
    return [
        "| resume at journal depth 0 (signal → parked again), p50 / p99 ms | "
        f"{pair(resume, 'shallow_p50_ms', 'shallow_p99_ms')} | | | |",
        f"| resume at journal depth {depth:,}, p50 / p99 ms | "
        f"{pair(resume, 'deep_p50_ms', 'deep_p99_ms')} | | | |",
        f"| resume at depth {depth:,} / at depth 0 (p50) | "
        f"{fmt(value(resume, 'ratio_p50'))} | | | ≤ 1.5 |",
        f"| first resume at depth {depth:,} after a restart, p50 ms | "
        f"{fmt(value(resume, 'restart_p50_ms'))} | | | ≤ today's (no cache) |",
    ]


def openloop_rows(loop: dict[str, Any], background: int, seconds: float) -> list[str]:
    def three(tag: str) -> str:
        return (
            f"{fmt(value(loop, f'{tag}_p50_ms'))} / {fmt(value(loop, f'{tag}_p99_ms'))} / "
            f"{fmt(value(loop, f'{tag}_p999_ms'))}"
        )

    return [
        f"| open loop, {background:,} runs parked: capacity, 4 senders: msgs/s | "
        f"{fmt(value(loop, 'capacity_per_s'))} | | | |",
        f"| at 50 % of it ({fmt(value(loop, 'r50_offered_per_s'))} msgs/s for {seconds} s): "
        f"scheduled send → resume committed, p50 / p99 / p99.9 ms | {three('r50')} | | "
        "| p99 ≤ 20 |",
        f"| at 80 % ({fmt(value(loop, 'r80_offered_per_s'))} msgs/s): p50 / p99 / p99.9 ms | "
        f"{three('r80')} | | | p99 ≤ 50 |",
        f"| paced at 100 % of the capacity: msgs/s completed (the rate it sustains paced) | "
        f"{fmt(value(loop, 'sustained_per_s'))} | | | |",
        f"| at 80 % of that ({fmt(value(loop, 's80_offered_per_s'))} msgs/s): "
        f"p50 / p99 / p99.9 ms | {three('s80')} | | | |",
    ]


def net_table(args: argparse.Namespace, rtts: list[float]) -> list[str]:
    """3 steps with 1, 2, 4 worker processes and wakes across processes, at each RTT."""
    admin = os.environ.get("PARKWAY_BENCH_POSTGRES_URL", DEFAULT_PG_ADMIN)
    parts = urlsplit(admin)
    target = (parts.hostname or "127.0.0.1", parts.port or 5432)
    title = "PostgreSQL across a network (benchmarks.netpg), the server of the table above:"
    netpg.terminate_cleanly()
    ns: netpg.Netns | None = netpg.Netns()
    assert ns is not None
    note = ""
    try:
        ns.up()
        if args.pg_delay == "netem":
            ns.check_netem()
    except netpg.Unavailable as e:
        ns.down()
        ns = None
        if args.pg_delay == "netem":
            return [
                title,
                "",
                f"Not measured: {e}. Namespaces, veth pairs and `tc … netem` are needed "
                "(root, and a kernel with sch_netem); `--pg-delay proxy` holds the "
                "packets in the benchmark's proxy instead of netem.",
            ]
        note = f" (no namespace: {e}; the proxy listens on 127.0.0.1)"
    try:
        return _net_columns(args, rtts, admin, target, ns, title, note)
    finally:
        if ns is not None:
            ns.down()


def _net_columns(
    args: argparse.Namespace,
    rtts: list[float],
    admin: str,
    target: tuple[str, int],
    ns: netpg.Netns | None,
    title: str,
    note: str,
) -> list[str]:
    n, wakes = (200, 100) if args.quick else (2000, 1000)
    columns: dict[str, dict[str, Any]] = {}
    # loopback: straight to the server; then through the proxy with no delay (what
    # the proxy itself costs), then each round trip.
    plan: list[tuple[str, float | None]] = [("loopback", None), ("proxy, no delay", 0.0)]
    plan += [(f"{rtt:g} ms RTT", rtt) for rtt in rtts]
    for name, rtt in plan:
        prefix: tuple[str, ...] = ()
        url = admin
        proxy = None
        if rtt is not None:
            listen = ns.host_ip if ns is not None else "127.0.0.1"
            in_proxy = rtt if args.pg_delay == "proxy" else 0.0
            if ns is not None and args.pg_delay == "netem":
                ns.set_delay(rtt / 2)
            proxy = netpg.Proxy(listen, target, in_proxy)
            url = _via(admin, listen, proxy.port)
            prefix = tuple(ns.exec) if ns is not None else ()
        try:
            column: dict[str, Any] = {"rtt": netpg.measure_rtt(prefix, url)}
            for k in (1, 2, 4):
                column[f"scale{k}"] = _ours(
                    "scale",
                    "--db",
                    "postgres",
                    "--pg-url",
                    url,
                    "--n",
                    str(n),
                    "--workers",
                    str(k),
                    prefix=prefix,
                )
            column["xwake"] = _ours(
                "xwake", "--db", "postgres", "--pg-url", url, "--n", str(wakes), prefix=prefix
            )
        finally:
            if proxy is not None:
                proxy.stop()
            if ns is not None and args.pg_delay == "netem":
                ns.set_delay(0.0)
        columns[name] = column
    return _net_rows(columns, plan, args.pg_delay, n, title, note)


def _via(admin: str, host: str, port: int) -> str:
    parts = urlsplit(admin)
    auth = parts.netloc.rpartition("@")[0]
    netloc = f"{auth}@{host}:{port}" if auth else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _net_rows(
    columns: dict[str, dict[str, Any]],
    plan: list[tuple[str, float | None]],
    delay: str,
    n: int,
    title: str,
    note: str,
) -> list[str]:
    names = [name for name, _ in plan]
    how = "tc netem on a veth pair" if delay == "netem" else "the proxy holding each chunk"
    lines = [
        title,
        "",
        f"Delay: {how}{note}; clients and workers in a network namespace, the proxy "
        "(asyncio, in a process of its own) on the machine's end, forwarding to the "
        "server on 127.0.0.1.",
        "",
        f"| shape | {' | '.join(names)} | target |",
        f"|---|{'---:|' * len(names)}---|",
    ]

    def row(label: str, cells: list[str], target: str = "") -> None:
        lines.append(f"| {label} | {' | '.join(cells)} | {target} |")

    row(
        "`SELECT 1` round trip, measured: p50 / p99 ms",
        [pair(columns[c]["rtt"]) for c in names],
    )
    loop4 = value(columns["loopback"]["scale4"], "wf_per_s")
    for k in (1, 2, 4):
        row(
            f"{n:,} workflows × 3 steps, {k} worker process{'es' if k > 1 else ''}: wf/s",
            [fmt(value(columns[c][f"scale{k}"], "wf_per_s")) for c in names],
        )
    shares = []
    for c in names:
        mine = value(columns[c]["scale4"], "wf_per_s")
        shares.append(f"{mine / loop4:.0%}" if mine and loop4 else "")
    row("4 worker processes: share of loopback", shares, "≥ 50 % at 2 ms")
    bare = value(columns["proxy, no delay"]["scale4"], "wf_per_s")
    shares = []
    for c in names[1:]:
        mine = value(columns[c]["scale4"], "wf_per_s")
        shares.append(f"{mine / bare:.0%}" if mine and bare else "")
    row("the same, share of the proxy with no delay (the delay alone)", ["", *shares])
    row(
        "signal → resumed, across processes, p50 / p99 ms",
        [pair(columns[c]["xwake"]) for c in names],
        "p50 ≤ 3 × RTT + 1 ms: "
        + ", ".join(f"{3 * rtt + 1:g} at {rtt:g}" for _, rtt in plan if rtt),
    )
    for c in names:
        for key, result in columns[c].items():
            if not result.get("available", True):
                lines.append(f"- {c}, {key}: not measured ({result.get('reason')})")
    return lines
