"""Run every benchmark shape on parkway and, where installed, on DBOS; print one table.

    python -m benchmarks.run [--quick] [--no-peers] [--peers restate] [--repeat K]
        [--postgres] [--pg-rtt 0.5,2 [--pg-delay netem|proxy]] [--write FILE]

Each shape runs in its own fresh process (``benchmarks.parkway_bench`` and
``benchmarks.peers.dbos_bench``), so peak RSS and threads are the shape's own.
Ratios compare figures measured in this same invocation. ``--write`` also saves
the table as Markdown (used for docs/performance.md). ``--peers restate`` adds a Restate
column, measured by ``benchmarks.peers.restate_bench`` (see benchmarks/peers/README.md).
``--postgres`` adds a table on the local PostgreSQL server, ``--pg-rtt`` one on the
same server across a network with those round trips (see ``benchmarks.netpg``).
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from benchmarks import measure
from benchmarks.measure import fmt
from benchmarks.tables import net_table, postgres_table, shape_args


@dataclass
class Row:
    shape: str
    label: str
    key: str
    target: str
    better: str = "lower"  # "higher" or "lower": how the ratio is read
    # The DBOS figure the row compares with: its key (default: ``key``), and the key
    # naming the variant it came from, printed next to it.
    peer_key: str | None = None
    peer_variant: str | None = None
    peer_shape: str | None = None


# Full-size N per table key; --quick takes each's quick figure (a smoke run).
SIZES: dict[str, tuple[int, int]] = {
    "steps3": (1000, 100),
    "steps3sync": (1000, 100),
    "park": (10000, 1000),
    "parkevent": (10000, 1000),
    "wake": (1000, 100),
    "xwake": (1000, 100),
    "xpublish": (1000, 100),
    "xcorrelate": (1000, 100),
    "publish": (100000, 10000),
    "subjects": (10000, 1000),
    "correlate": (10000, 1000),
    "resume": (200, 30),
    "openloop": (10000, 1000),
    "gather": (50, 10),
    "update": (1000, 100),
    "xupdate": (1000, 100),
    "schedules": (1000, 100),
}


def rows(n: dict[str, int], quick: bool) -> list[Row]:
    steps = f"{n['steps3']:,} workflows × 3 steps"
    depth = 5000
    return [
        Row(
            "steps3sync",
            f"{steps}, `def` steps: wf/s, against DBOS's best with sync steps",
            "wf_per_s",
            "≥ 10× DBOS's best",
            "higher",
            "sync_wf_per_s",
            "sync_variant",
            "steps3",
        ),
        Row(
            "steps3sync",
            "the same, against DBOS's best overall",
            "wf_per_s",
            "≥ 10× DBOS's best",
            "higher",
            "wf_per_s",
            "variant",
            "steps3",
        ),
        Row(
            "steps3",
            f"{steps}, `async def` steps: wf/s, against DBOS's best with async steps",
            "wf_per_s",
            "",
            "higher",
            "async_wf_per_s",
            "async_variant",
        ),
        Row(
            "steps3",
            "the same, against DBOS's best overall",
            "wf_per_s",
            "≥ 15× DBOS's best",
            "higher",
            "wf_per_s",
            "variant",
        ),
        Row("park", f"park {n['park']:,} runs on a wait", "runs_per_s", "≥ 20× DBOS", "higher"),
        Row("park", "peak RSS, MB (whole process)", "peak_rss_mb", "≤ 150", "lower"),
        Row("park", "threads while parked", "threads", "no thread per run", "lower"),
        Row("park", "bytes on disk per parked run", "bytes_per_run", "≤ 500", "lower"),
        Row(
            "parkevent",
            "bytes on disk per parked run, an event wait with a match",
            "bytes_per_run",
            "≤ 500",
        ),
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
        *resume_rows(depth),
        *openloop_rows(n["openloop"], quick),
        *inside_rows("≤ 2"),
        *schedule_rows(n["schedules"]),
    ]


def schedule_rows(count: int) -> list[Row]:
    return [
        Row("schedules", f"{count:,} schedules in one minute: fired on time (≤ 1 s late)",
            "on_time", f"all {count:,}", "higher"),
        Row("schedules", "the same: tick → run's code starts, p50 ms", "p50_ms", ""),
        Row("schedules", "the same, p99 ms", "p99_ms", "≤ 1,000"),
    ]  # fmt: skip


def inside_rows(update_target: str) -> list[Row]:
    return [
        Row("gather", "gather of 10 async steps of 20 ms: wall, p50 ms", "wall_p50_ms", ""),
        Row("gather", "the same / one step's time (p50)", "ratio_p50", "≈ 1"),
        Row("update", "update → answer, in one process, p50 ms", "p50_ms", update_target),
        Row("update", "the same, p99 ms", "p99_ms", ""),
        Row("xupdate", "update → answer, across processes, p50 ms", "p50_ms", update_target),
        Row("xupdate", "the same, p99 ms", "p99_ms", ""),
    ]


def resume_rows(depth: int) -> list[Row]:
    return [
        Row(
            "resume",
            "resume at journal depth 0 (signal → parked again), p50 ms",
            "shallow_p50_ms",
            "",
        ),
        Row("resume", "the same, p99 ms", "shallow_p99_ms", ""),
        Row("resume", f"resume at journal depth {depth:,}, p50 ms", "deep_p50_ms", ""),
        Row("resume", "the same, p99 ms", "deep_p99_ms", ""),
        Row("resume", f"resume at depth {depth:,} / at depth 0 (p50)", "ratio_p50", "≤ 1.5"),
        Row(
            "resume",
            f"first resume at depth {depth:,} after a restart, p50 ms",
            "restart_p50_ms",
            "≤ today's (no cache)",
        ),
    ]


def openloop_rows(background: int, quick: bool) -> list[Row]:
    seconds = 2 if quick else 10
    return [
        Row(
            "openloop",
            f"open loop, {background:,} runs parked: capacity, 4 senders: msgs/s",
            "capacity_per_s",
            "",
        ),
        Row("openloop", f"at 50 % of it for {seconds} s: msgs/s offered", "r50_offered_per_s", ""),
        Row("openloop", "the same, scheduled send → resume committed, p50 ms", "r50_p50_ms", ""),
        Row("openloop", "the same, p99 ms", "r50_p99_ms", "≤ 10"),
        Row("openloop", "the same, p99.9 ms", "r50_p999_ms", ""),
        Row("openloop", "at 80 %: msgs/s offered", "r80_offered_per_s", ""),
        Row("openloop", "the same, p50 ms", "r80_p50_ms", ""),
        Row("openloop", "the same, p99 ms", "r80_p99_ms", "≤ 50"),
        Row("openloop", "the same, p99.9 ms", "r80_p999_ms", ""),
        Row(
            "openloop",
            "paced at 100 % of the capacity: msgs/s completed (the rate it sustains paced)",
            "sustained_per_s",
            "",
        ),
        Row("openloop", "at 80 % of that sustained rate: msgs/s offered", "s80_offered_per_s", ""),
        Row("openloop", "the same, p50 ms", "s80_p50_ms", ""),
        Row("openloop", "the same, p99 ms", "s80_p99_ms", ""),
        Row("openloop", "the same, p99.9 ms", "s80_p999_ms", ""),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller N (a smoke run)")
    parser.add_argument("--no-peers", action="store_true", help="skip DBOS")
    parser.add_argument(
        "--no-sqlite",
        action="store_true",
        help="leave out the SQLite table (with --postgres or --pg-rtt: those tables alone)",
    )
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
        "resumes at depth, the open loop, and DBOS on the same server",
    )
    parser.add_argument(
        "--pg-rtt",
        metavar="MS[,MS...]",
        help="also measure PostgreSQL across a network with these round trips (ms), "
        "e.g. 0.5,2: a network namespace, a veth pair and a proxy (benchmarks.netpg)",
    )
    parser.add_argument(
        "--pg-delay",
        choices=("netem", "proxy"),
        default="netem",
        help="--pg-rtt: the delay from tc netem on the veth pair (default), or held by "
        "the proxy itself (where the kernel has no netem)",
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
    rtts: list[float] = []
    if args.pg_rtt:
        try:
            rtts = [float(x) for x in args.pg_rtt.split(",") if x.strip()]
        except ValueError:
            parser.error(f"--pg-rtt takes round trips in ms such as 0.5,2, not {args.pg_rtt!r}")
        if not rtts or any(r <= 0 for r in rtts):
            parser.error("--pg-rtt: each round trip must be more than 0 ms")
    measure.REPEAT = args.repeat

    n = {key: quick if args.quick else full for key, (full, quick) in SIZES.items()}
    peer_n = {"steps3": n["steps3"], "park": n["park"], "wake": 50}

    started = time.time()
    # Ours and the peers' in rounds (every command once per round): a ratio in the
    # table compares runs of the same minutes (see measure.run_rounds).
    jobs: dict[str, measure.Job] = {}
    for key, count in n.items():
        jobs[f"ours:{key}"] = (
            "benchmarks.parkway_bench",
            [*shape_args(key, args.quick), "--n", str(count)],
            1800,
        )
    if not args.no_peers:
        for shape, count in peer_n.items():
            # DBOS in WAL mode (its fastest SQLite set-up, as ours); for park and wake
            # its async variant (its best, and no OS thread per run), then shut down.
            extra = ["--sqlite-journal", "wal"]
            if shape in ("park", "wake"):
                extra += ["--variant", "async", "--finish", "shutdown"]
            if shape == "wake":
                extra += ["--max-seconds", "120"]
            jobs[f"dbos:{shape}"] = (
                "benchmarks.peers.dbos_bench",
                ["--shape", shape, "--n", str(count), "--db", "sqlite", *extra],
                1800,
            )
    if "restate" in args.peers:
        for shape in ("steps3", "park", "wake"):
            # Its server and SDK process on this machine, best of its protocols; then shut down.
            extra = ["--finish", "shutdown"] if shape in ("park", "wake") else []
            jobs[f"restate:{shape}"] = (
                "benchmarks.peers.restate_bench",
                ["--shape", shape, "--n", str(n[shape]), *extra],
                2400,
            )
    if args.no_sqlite:
        jobs = {}
    measured = measure.run_rounds(jobs)
    ours = {k.split(":", 1)[1]: v for k, v in measured.items() if k.startswith("ours:")}
    peer = {k.split(":", 1)[1]: v for k, v in measured.items() if k.startswith("dbos:")}
    restate = {k.split(":", 1)[1]: v for k, v in measured.items() if k.startswith("restate:")}

    lines = [
        f"Measured {datetime.fromtimestamp(started, UTC):%Y-%m-%d %H:%M} UTC on "
        f"{platform.machine()} ({_cpus()} CPUs), Python {platform.python_version()}, "
        "SQLite backend, one process per shape"
        + (f", each figure the median of {args.repeat} runs" if args.repeat > 1 else "")
        + ("" if args.no_peers else f"; DBOS {_dbos_version()} on SQLite (WAL) in the same run")
        + (f"; Restate {_restate_version(restate)}" if restate else "")
        + (" (quick run: smaller N)" if args.quick else "")
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
    for row in rows(n, args.quick):
        mine = measure.value(ours.get(row.shape, {}), row.key)
        theirs = peer.get(row.peer_shape or row.shape, {})
        peer_key = row.peer_key or row.key
        other = theirs.get(peer_key) if theirs.get("available") else None
        shown = measure.with_variant(theirs, peer_key, row.peer_variant) if other else fmt(None)
        ratio = measure.ratio(mine, other, row.better == "higher")
        if restate:
            res = restate.get(row.peer_shape or row.shape, {})
            third = res.get(row.key) if res.get("available") else None
            lines.append(
                f"| {row.label} | {fmt(mine)} | {shown} | {ratio} | {fmt(third)} "
                f"| {measure.ratio(mine, third, row.better == 'higher')} | {row.target} |"
            )
            continue
        lines.append(f"| {row.label} | {fmt(mine)} | {shown} | {ratio} | {row.target} |")
    notes = _notes(ours, peer, restate, args.repeat)
    if args.no_sqlite:
        lines, notes = [], []
    if args.postgres:
        lines += ["", *postgres_table(args)]
    if rtts:
        lines += ["", *net_table(args, rtts)]
    table = "\n".join(lines + (["", *notes] if notes else [])).strip("\n")
    print(table)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as out:
            out.write(table + "\n")
    return 0


def _notes(
    ours: dict[str, dict[str, Any]],
    peer: dict[str, dict[str, Any]],
    restate: dict[str, dict[str, Any]],
    repeat: int,
) -> list[str]:
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
    steps3 = peer.get("steps3", {})
    if steps3.get("available") and isinstance(steps3.get("variants"), dict):
        each = ", ".join(
            f"{name} {fmt(result.get('wf_per_s'))}"
            for name, result in steps3["variants"].items()
            if isinstance(result, dict)
        )
        notes.append(
            f"- DBOS steps3, wf/s by variant{' (the last run)' if repeat > 1 else ''}: {each}; "
            "sync steps: start, queue, direct (the workflow function called directly, one "
            "call after the other); async steps: async, direct_async."
        )
    if peer.get("park", {}).get("variant"):
        notes.append(f"- DBOS park: best of its variants ({peer['park']['variant']}).")
    resume = ours.get("resume", {})
    if resume.get("available", True) and resume.get("deep_journal"):
        notes.append(
            f"- resume: journals of {fmt(resume.get('shallow_journal'))} and "
            f"{fmt(resume.get('deep_journal'))} entries at the end; the restart figure is "
            f"the p50 of {resume.get('restarts')} restarts (a new engine on the same file)."
        )
    loop = ours.get("openloop", {})
    if loop.get("available", True) and loop.get("capacity_per_s"):
        notes.append(
            "- open loop: capacity = 4 senders correlating as fast as each can; then "
            "sends at fixed times, latency from each scheduled time to its run's commit "
            f"(released by {loop.get('r50_release', '?')}); senders' lag p99 "
            f"{fmt(loop.get('r50_send_lag_p99_ms'))} / {fmt(loop.get('r80_send_lag_p99_ms'))} ms."
        )
    if loop.get("sustained_per_s"):
        notes.append(
            "- open loop, sustained: the completion rate of messages released at 100 % of the "
            f"capacity ({fmt(loop.get('sat_offered_per_s'))} msgs/s offered) is the rate the "
            "loop takes paced; the 80 % rows under it are of that rate (informative: the "
            "target's row is the one of the capacity above)."
        )
    if restate:
        notes += _restate_notes(restate)
    return notes


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
