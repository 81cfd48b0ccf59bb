"""What surviving failures costs a step: ``timeout=`` on every step, and heartbeats.

Run from the project root::

    python -m benchmarks.failures [--rounds 3] [--n 1000] [--beats-n 300] [--db both] [--write F]

Each round runs, each a fresh process on a fresh database, in order:

- ``benchmarks.parkway_bench --shape steps3`` (3-step workflows) without and with
  ``--step-timeout 30`` (every step given ``timeout=30``), for ``async def`` and
  ``def`` steps, on SQLite and on the local PostgreSQL server (``--db``: one of them);
- ``--shape heartbeat`` (one ``async def`` step per run, runs one after another)
  with a step that does not heartbeat and one that calls ``heartbeat()`` 1,000
  times in a loop (SQLite).

A row's ratio is the median over rounds of the pair's ratio within the round (runs
seconds apart, on a machine whose speed drifts): throughput with timeouts over
throughput without (target: at least 0.95); the mean time of a run whose step heartbeats
over one whose step does not (target: at most 1.5).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence

from benchmarks import measure

# (label, parkway_bench arguments of the baseline, of the variant, figure, target)
PAIRS: list[tuple[str, list[str], list[str], str, str]] = [
    (
        f"3-step workflows, `{steps}` steps, {db}: wf/s with `timeout=` on every step",
        ["--shape", "steps3", "--steps", steps, "--db", db],
        ["--shape", "steps3", "--steps", steps, "--db", db, "--step-timeout", "30"],
        "wf_per_s",
        "≥ 0.95×",
    )
    for db in ("sqlite", "postgres")
    for steps in ("async", "sync")
] + [
    (
        "a step that heartbeats 1,000 times, sqlite: ms a run",
        ["--shape", "heartbeat", "--db", "sqlite", "--beats", "0"],
        ["--shape", "heartbeat", "--db", "sqlite", "--beats", "1000"],
        "ms_per_run",
        "≤ 1.5×",
    )
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every pair")
    parser.add_argument("--n", type=int, default=1000, help="3-step runs a measurement")
    parser.add_argument("--beats-n", type=int, default=300, help="heartbeat runs a measurement")
    parser.add_argument(
        "--db", choices=["sqlite", "postgres", "both"], default="both", help="the pairs' stores"
    )
    parser.add_argument("--write", help="also write the Markdown table to this file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.n < 1 or args.beats_n < 1:
        parser.error("--rounds, --n and --beats-n must be 1 or more")

    pairs = [p for p in PAIRS if args.db == "both" or p[1][p[1].index("--db") + 1] == args.db]
    base: dict[str, list[float]] = {label: [] for label, *_ in PAIRS}
    variant: dict[str, list[float]] = {label: [] for label, *_ in PAIRS}
    ratios: dict[str, list[float]] = {label: [] for label, *_ in PAIRS}
    for _ in range(args.rounds):
        for label, without, with_, figure, _target in pairs:
            n = args.beats_n if figure == "ms_per_run" else args.n
            got = []
            for shape in (without, with_):
                result = measure.run_once(
                    "benchmarks.parkway_bench", [*shape, "--n", str(n)], timeout=600
                )
                if not result.get("available", True):
                    print(f"{label}: {result.get('reason')}", file=sys.stderr)
                    return 1
                got.append(float(result[figure]))
            base[label].append(got[0])
            variant[label].append(got[1])
            ratios[label].append(got[1] / got[0])

    db = "" if args.db == "both" else f" --db {args.db}"
    lines = [
        f"`python -m benchmarks.failures --rounds {args.rounds} --n {args.n} --beats-n "
        f"{args.beats_n}{db}` ({time.strftime('%Y-%m-%d %H:%M')}): each pair measured "
        "back to back in every round; ratio: the median of each round's variant / baseline.",
        "",
        "| measurement | without (median) | with (median) | ratio | target |",
        "|---|---|---|---|---|",
    ]
    for label, _, _, _, target in pairs:
        lines.append(
            f"| {label} | {measure.fmt(statistics.median(base[label]))} "
            f"| {measure.fmt(statistics.median(variant[label]))} "
            f"| {statistics.median(ratios[label]):.2f}× | {target} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as out:
            out.write(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
