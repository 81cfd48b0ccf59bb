"""Run every benchmark shape on parkway and, where installed, on DBOS; print one table.

    python -m benchmarks.run [--quick] [--no-peers] [--peers restate] [--repeat K] [--write FILE]

Each shape runs in its own fresh process (``benchmarks.parkway_bench`` and
``benchmarks.peers.dbos_bench``), so peak RSS and threads are the shape's own.
Ratios compare figures measured in this same invocation. ``--write`` also saves
the table as Markdown (used for docs/performance.md). ``--peers restate`` adds a Restate
column, measured by ``benchmarks.peers.restate_bench`` (see benchmarks/peers/README.md).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

# How many times each shape runs (--repeat); its figures are the medians.
REPEAT = 1


def run_json(module: str, args: Sequence[str], timeout: float) -> dict[str, Any]:
    """Run ``python -m module args`` REPEAT times; its figures, each the median of the runs.

    (A figure's median is taken on its own: the runs need not agree on anything
    else. A run that failed is left out; if all did, the last one's reason stays.)
    """
    results = [run_once(module, args, timeout) for _ in range(REPEAT)]
    good = [r for r in results if r.get("available", True)]
    if not good:
        return results[-1]
    merged = dict(good[-1])
    for key, value in merged.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            values = sorted(r[key] for r in good if isinstance(r.get(key), int | float))
            whole = all(isinstance(v, int) for v in values)  # (counts stay counts)
            merged[key] = statistics.median_low(values) if whole else statistics.median(values)
    merged["runs"] = len(good)
    return merged


def run_once(module: str, args: Sequence[str], timeout: float) -> dict[str, Any]:
    """Run ``python -m module args`` and parse its one line of JSON."""
    command = [sys.executable, "-m", module, *args]
    print(f"$ {' '.join(command[1:])}", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"available": False, "reason": f"timed out after {timeout:g}s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = done.stderr.strip().splitlines()[-3:]
        return {"available": False, "reason": f"exit {done.returncode}: {' | '.join(tail)}"}
    result: dict[str, Any] = orjson.loads(lines[-1])
    return result


@dataclass
class Row:
    shape: str
    label: str
    key: str
    target: str
    better: str = "lower"  # "higher" or "lower": how the ratio is read
    check: Callable[[float, float | None], bool] | None = None


def fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller N (a smoke run)")
    parser.add_argument("--no-peers", action="store_true", help="skip DBOS")
    parser.add_argument("--write", help="also write the Markdown table to this file")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every shape (ours and the peers') this many times; report medians",
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also measure on PostgreSQL (127.0.0.1:5432 or PARKWAY_BENCH_POSTGRES_URL): "
        "3-step workflows with 1, 2 and 4 worker processes, wake-ups across processes, "
        "and DBOS on the same server",
    )
    parser.add_argument(
        "--peers",
        choices=("restate",),
        action="append",
        default=[],
        help="also measure this peer, in a column of its own",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be 1 or more")
    global REPEAT
    REPEAT = args.repeat

    n = {
        "steps3": 1000,
        "park": 10000,
        "wake": 1000,
        "xwake": 1000,
        "xpublish": 1000,
        "xcorrelate": 1000,
        "publish": 100000,
        "subjects": 10000,
        "correlate": 10000,
    }
    if args.quick:
        n = {k: max(100, v // 10) for k, v in n.items()}
    peer_n = {"steps3": n["steps3"], "park": n["park"], "wake": 50}

    started = time.time()
    ours: dict[str, dict[str, Any]] = {}
    for key, count in n.items():
        ours[key] = run_json(
            "benchmarks.parkway_bench", [*shape_args(key), "--n", str(count)], 1800
        )
    peer: dict[str, dict[str, Any]] = {}
    if not args.no_peers:
        for shape, count in peer_n.items():
            # DBOS in WAL mode (its fastest SQLite set-up, as ours); for park and wake
            # its async variant (its best, and no OS thread per run), then shut down.
            extra = ["--sqlite-journal", "wal"]
            if shape in ("park", "wake"):
                extra += ["--variant", "async", "--finish", "shutdown"]
            if shape == "wake":
                extra += ["--max-seconds", "120"]
            peer[shape] = run_json(
                "benchmarks.peers.dbos_bench",
                ["--shape", shape, "--n", str(count), "--db", "sqlite", *extra],
                1800,
            )
    restate: dict[str, dict[str, Any]] = {}
    if "restate" in args.peers:
        for shape in ("steps3", "park", "wake"):
            # Its server and SDK process on this machine, best of its protocols; then shut down.
            extra = ["--finish", "shutdown"] if shape in ("park", "wake") else []
            restate[shape] = run_json(
                "benchmarks.peers.restate_bench",
                ["--shape", shape, "--n", str(n[shape]), *extra],
                2400,
            )

    rows = [
        Row("steps3", f"{n['steps3']:,} workflows × 3 steps", "wf_per_s", "≥ 10× DBOS", "higher"),
        Row("park", f"park {n['park']:,} runs on a wait", "runs_per_s", "≥ 20× DBOS", "higher"),
        Row("park", "peak RSS, MB (whole process)", "peak_rss_mb", "≤ 150", "lower"),
        Row("park", "threads while parked", "threads", "no thread per run", "lower"),
        Row("park", "bytes on disk per parked run", "bytes_per_run", "≤ 500", "lower"),
        Row("wake", "signal → resumed, p50 ms", "p50_ms", "≤ 5 (≤ 1.5)", "lower"),
        Row("wake", "signal → resumed, p99 ms", "p99_ms", "≤ 50 (≤ 10)", "lower"),
        Row("xwake", "across processes: signal → resumed, p50 ms", "p50_ms", "≤ 1.5", "lower"),
        Row("xwake", "across processes: signal → resumed, p99 ms", "p99_ms", "≤ 10", "lower"),
        Row("xpublish", "across processes: publish → resumed, p50 ms", "p50_ms", "≤ 1.5", "lower"),
        Row("xpublish", "across processes: publish → resumed, p99 ms", "p99_ms", "≤ 10", "lower"),
        Row(
            "xcorrelate",
            "across processes: correlate → resumed, p50 ms",
            "p50_ms",
            "≤ 1.5",
            "lower",
        ),
        Row(
            "xcorrelate", "across processes: correlate → resumed, p99 ms", "p99_ms", "≤ 10", "lower"
        ),
        Row("publish", "publish, µs, no waiters", "publish_empty_us", "", "lower"),
        Row(
            "publish",
            f"publish, µs, {n['publish']:,} non-matching waiters",
            "publish_loaded_us",
            "",
            "lower",
        ),
        Row("publish", "publish cost ratio (loaded / empty)", "ratio", "≤ 1.5", "lower"),
        Row("publish", "publish → resumed, p50 ms", "wake_p50_ms", "≤ 1.5", "lower"),
        Row("publish", "publish → resumed, p99 ms", "wake_p99_ms", "≤ 10", "lower"),
        Row(
            "subjects",
            f"{n['subjects']:,} cross-subject subscribers, 100k updates (1% hit): events/s",
            "events_per_s",
            "",
            "higher",
        ),
        Row("subjects", "publish µs with subscribers / without", "ratio", "", "lower"),
        Row(
            "correlate",
            f"correlate {n['correlate']:,} parked runs, one sender, one at a time: msgs/s",
            "msgs_per_s",
            "≥ 2,000",
            "higher",
        ),
        Row(
            "correlate",
            "the same, one sender with 16 messages in flight: msgs/s",
            "msgs_per_s_inflight",
            "≥ 2,000",
            "higher",
        ),
        Row("correlate", "correlate → resumed, p50 ms", "p50_ms", "≤ 1.5", "lower"),
        Row("correlate", "correlate → resumed, p99 ms", "p99_ms", "≤ 10", "lower"),
    ]

    lines = [
        f"Measured {datetime.fromtimestamp(started, UTC):%Y-%m-%d %H:%M} UTC on "
        f"{platform.machine()} ({_cpus()} CPUs), Python {platform.python_version()}, "
        "SQLite backend, one process per shape"
        + (f", each figure the median of {REPEAT} runs" if REPEAT > 1 else "")
        + ("" if args.no_peers else f"; DBOS {_dbos_version()} on SQLite (WAL) in the same run")
        + (f"; Restate {_restate_version(restate)}" if restate else "")
        + (" (quick run: N/10)" if args.quick else "")
        + ".",
        "",
        "| shape | parkway | DBOS | ratio | target |",
        "|---|---:|---:|---:|---|",
    ]
    if restate:
        lines[-2:] = [
            "| shape | parkway | DBOS | ratio | Restate | ratio | target |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
    for row in rows:
        mine = ours.get(row.shape, {})
        theirs = peer.get(row.shape, {})
        value = mine.get(row.key) if mine.get("available", True) else None
        other = theirs.get(row.key) if theirs.get("available") else None
        ratio = _ratio(row, value, other)
        if restate:
            res = restate.get(row.shape, {})
            third = res.get(row.key) if res.get("available") else None
            lines.append(
                f"| {row.label} | {fmt(value)} | {fmt(other)} | {ratio} | {fmt(third)} "
                f"| {_ratio(row, value, third)} | {row.target} |"
            )
            continue
        lines.append(f"| {row.label} | {fmt(value)} | {fmt(other)} | {ratio} | {row.target} |")
    notes = []
    for name, results in (("parkway", ours), ("DBOS", peer), ("Restate", restate)):
        for shape, result in results.items():
            if not result.get("available", True):
                notes.append(f"- {name} {shape}: not measured ({result.get('reason')})")
    if peer.get("wake", {}).get("available"):
        notes.append(
            f"- DBOS wake measured over {peer['wake'].get('n_measured')} runs: on SQLite it "
            "polls for notifications once a second by design."
        )
    for shape in ("steps3", "park"):
        variant = peer.get(shape, {}).get("variant")
        if variant:
            notes.append(f"- DBOS {shape}: best of its variants ({variant}).")
    if restate:
        notes += _restate_notes(restate)
    if args.postgres:
        lines += ["", *postgres_table(args)]
    table = "\n".join(lines + (["", *notes] if notes else []))
    print(table)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as out:
            out.write(table + "\n")
    return 0


def _ratio(row: Row, value: Any, other: Any) -> str:
    if isinstance(value, int | float) and isinstance(other, int | float) and value and other:
        r = value / other if row.better == "higher" else other / value
        return f"{r:,.1f}×"
    return ""


def _restate_version(results: dict[str, dict[str, Any]]) -> str:
    for result in results.values():
        if result.get("peer_version"):
            return f"{result['peer_version']} (Python SDK {result.get('sdk_version')})"
    return "(not measured)"


def _restate_notes(results: dict[str, dict[str, Any]]) -> list[str]:
    notes = [
        "- Restate: its server and the hypercorn-served SDK app on 127.0.0.1, driven over "
        "the ingress HTTP API; RSS and threads are the server's and the SDK process's summed."
    ]
    steps3 = results.get("steps3", {})
    if steps3.get("available"):
        notes.append(
            f"- Restate steps3: {steps3.get('variant')} protocol, {steps3.get('mode')} "
            f"(sequential {fmt(steps3.get('sequential_wf_per_s'))}/s, "
            f"{steps3.get('inflight')} in flight {fmt(steps3.get('concurrent_wf_per_s'))}/s)."
        )
    for shape in ("park", "wake"):
        result = results.get(shape, {})
        if result.get("available") and result.get("variant"):
            notes.append(
                f"- Restate {shape}: {result['variant']} protocol, parked = "
                f"{result.get('park_point')}."
            )
    return notes


# Table rows measured by a shape with options: key -> parkway_bench arguments.
VARIANTS = {
    "xpublish": ["--shape", "xwake", "--via", "publish"],
    "xcorrelate": ["--shape", "xwake", "--via", "correlate"],
}


def shape_args(key: str) -> list[str]:
    return VARIANTS.get(key, ["--shape", key])


def postgres_table(args: argparse.Namespace) -> list[str]:
    """parkway and DBOS on one local PostgreSQL server, in this same invocation."""
    n = 200 if args.quick else 2000

    def ours(key: str, *extra: str) -> dict[str, Any]:
        return run_json(
            "benchmarks.parkway_bench",
            [*shape_args(key), "--db", "postgres", *extra],
            1800,
        )

    scale = {k: ours("scale", "--n", str(n), "--workers", str(k)) for k in (1, 2, 4)}
    steps3 = ours("steps3", "--n", str(n // 2))
    # The targets are over 1,000 runs; each wake waits for the previous one's end.
    wakes = "100" if args.quick else "1000"
    wake = ours("wake", "--n", wakes)
    xwake = ours("xwake", "--n", wakes)
    xpublish = ours("xpublish", "--n", wakes)
    xcorrelate = ours("xcorrelate", "--n", wakes)
    correlate = ours("correlate", "--n", str(n))
    publish = ours("publish", "--n", str(n * 5))
    dbos: dict[str, dict[str, Any]] = {}
    if not args.no_peers:
        for shape, count in (("steps3", n // 2), ("wake", int(wakes))):
            extra = ["--variant", "async", "--finish", "shutdown"] if shape == "wake" else []
            dbos[shape] = run_json(
                "benchmarks.peers.dbos_bench",
                ["--shape", shape, "--n", str(count), "--db", "postgres", *extra],
                1800,
            )

    def value(result: dict[str, Any], key: str) -> Any:
        return result.get(key) if result.get("available", True) else None

    def ratio(mine: Any, theirs: Any, higher: bool) -> str:
        if isinstance(mine, int | float) and isinstance(theirs, int | float) and mine and theirs:
            return f"{(mine / theirs if higher else theirs / mine):,.1f}×"
        return ""

    def pair(result: dict[str, Any], first: str = "p50_ms", second: str = "p99_ms") -> str:
        return f"{fmt(value(result, first))} / {fmt(value(result, second))}"

    d_steps = value(dbos.get("steps3", {}), "wf_per_s")
    d_wake = dbos.get("wake", {})
    rows = [
        "PostgreSQL 15 on the same machine (fsync on), one fresh database per shape:",
        "",
        "| shape | parkway | DBOS | ratio | target |",
        "|---|---:|---:|---:|---|",
        f"| {n // 2:,} workflows × 3 steps, started and run in one process: wf/s | "
        f"{fmt(value(steps3, 'wf_per_s'))} | {fmt(d_steps)} | "
        f"{ratio(value(steps3, 'wf_per_s'), d_steps, True)} | ≥ 10× DBOS |",
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
        "",
        "¹ DBOS's figure is its in-process one (started and run in one process, its best "
        "variant); the worker-process rows run workflows started beforehand by a client "
        "process, from the first completion to the last.",
    ]
    return rows


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


def _dbos_version() -> str:
    try:
        from importlib.metadata import version

        return version("dbos")
    except Exception:
        return "(not installed)"


if __name__ == "__main__":
    raise SystemExit(main())
