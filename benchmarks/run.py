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
from datetime import UTC, datetime
from typing import Any

from benchmarks import measure, quick
from benchmarks.measure import fmt
from benchmarks.rows import SIZES, rows
from benchmarks.tables import net_table, postgres_table, shape_args


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every benchmark at a small N, in seconds (a smoke run: exit 1 if one is broken)",
    )
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
    if args.quick:
        quick.drop_missing_peers(args)

    n = {key: small if args.quick else full for key, (full, small) in SIZES.items()}
    # DBOS's wake on SQLite polls once a second: 50 wakes are most of a minute.
    peer_n = {"steps3": n["steps3"], "park": n["park"], "wake": 5 if args.quick else 50}

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
    measured = measure.run_rounds(jobs, quick.PARALLEL if args.quick else 1)
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
        + (" (quick run: a smoke run at small N, its figures not meaningful)" if args.quick else "")
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
    if args.quick:
        return quick.finish(ours, peer, restate)
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
