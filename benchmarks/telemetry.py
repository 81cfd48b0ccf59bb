"""What observing parkway costs: 3-step throughput with metrics and spans on and off.

Run from the project root::

    python -m benchmarks.telemetry [--rounds 6] [--n 3000] [--db sqlite|postgres] [--write F]

Each round runs ``benchmarks.parkway_bench --shape steps3`` (``async def`` steps) once
in each mode, in order (off, metrics, tracing, tracing at a 10 % sampler, both, both at
10 %), each a fresh process on a fresh database, and then the ``spanfloor`` shape. A
mode's ratio is the median over rounds of its throughput over the same round's ``off``:
runs minutes apart at most, on a machine whose speed drifts.

``spanfloor`` measures, in one process and with the provider the tracing modes use
(the OpenTelemetry SDK, a ``BatchSpanProcessor``, an exporter that drops the spans):

- ``bare_us``: one span started and ended, no attributes, no parent, not made current:
  the least any span made through the SDK costs;
- ``run_us``: the five spans parkway makes for a 3-step run (its start with the trace
  context it stores, its advance, three steps), by ``parkway.core.tracing``, in a loop;
- ``sampled_us``: the same under a 10 % ``ParentBased`` sampler (the advance reading
  the start's stored context, as the worker does): what tracing costs a run at that
  sampler, measured apart from the run, so steadier than the throughput's ratio on
  a busy machine.

The time ratio is its reciprocal (a run's time in the mode over its time with telemetry
off); the 10 % sampled tracing mode is held to ``TARGET`` of it, the cost a sampled
deployment is meant to pay at most, and the table says whether it was met.

The table's last rows turn these into the best ratio tracing could reach on that
throughput: a run of ``1 / off`` seconds plus five spans at the floor.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import orjson

from benchmarks import measure

# (label, --telemetry, --trace-ratio): the modes of a round, "off" first.
MODES: list[tuple[str, str, float]] = [
    ("off", "off", 1.0),
    ("metrics", "metrics", 1.0),
    ("tracing, every span recorded", "tracing", 1.0),
    ("tracing, 10 % of traces sampled", "tracing", 0.1),
    ("both, every span recorded", "on", 1.0),
    ("both, 10 % of traces sampled", "on", 0.1),
]

SPANS_PER_RUN = 5
# The most time tracing with a 10 % ParentBased sampler may take over tracing off.
TARGET, TARGET_MODE = 1.10, "tracing, 10 % of traces sampled"  # start, advance, three steps


async def shape_spanfloor(bench: Any, n: int) -> dict[str, Any]:
    """The SDK's cost of a span, and of parkway's five spans of a run (see the module)."""
    from opentelemetry import context as otel_context

    from benchmarks.harness import _tracer_provider
    from parkway.core.tracing import Tracing

    provider = _tracer_provider(1.0)
    tracer = provider.get_tracer("floor")
    tracing = Tracing(provider)
    sampled_provider = _tracer_provider(0.1)
    sampled = Tracing(sampled_provider)
    # Duck-typed stand-ins for what the worker hands the tracing: a run, its due
    # start task (no stored trace context: the client span is current instead), steps.
    run: Any = SimpleNamespace(id="run-1", version=1, workflow="steps3")
    tasks: Any = [SimpleNamespace(kind="start", payload=None)]
    steps: Any = [SimpleNamespace(cmd=SimpleNamespace(name=s), attempt=1) for s in "abc"]

    def bare() -> None:
        for _ in range(n):
            tracer.start_span("parkway.step a").end()

    def five() -> None:
        for _ in range(n):
            span, token = tracing.begin_client("start", {"workflow": "steps3", "run_id": "r"})
            tracing.carrier()
            tracing.end(span, token)
            advance, advance_token = tracing.begin_advance(run, tasks)
            for step in steps:
                span, token = tracing.begin_step(step)
                tracing.end(span, token)
            tracing.end_advance(advance, advance_token)

    def five_sampled() -> None:
        for _ in range(n):
            span, token = sampled.begin_client("start", {"workflow": "steps3", "run_id": "r"})
            stored = orjson.dumps({"trace": sampled.carrier()})
            sampled.end(span, token)
            due: Any = [SimpleNamespace(kind="start", payload=stored)]
            advance, advance_token = sampled.begin_advance(run, due)
            for step in steps:
                if advance.is_recording():  # (as the worker: none under a dropped advance)
                    span, token = sampled.begin_step(step)
                    sampled.end(span, token)
            sampled.end_advance(advance, advance_token)

    def best_us(job: Callable[[], None]) -> float:
        job()  # (warm: first calls build caches)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            job()
            times.append(time.perf_counter() - t0)
        return round(min(times) / n * 1e6, 2)

    floor, ours, at_ten = best_us(bare), best_us(five), best_us(five_sampled)
    provider.shutdown()
    sampled_provider.shutdown()
    assert otel_context.get_current() == otel_context.Context()  # (every token detached)
    return {
        "bare_us": floor,
        "run_us": ours,
        "sampled_us": at_ten,
        "spans_per_run": SPANS_PER_RUN,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds of every mode")
    parser.add_argument("--n", type=int, default=3000, help="3-step runs a measurement")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--floor-n", type=int, default=20000, help="spans of each spanfloor measurement"
    )
    parser.add_argument("--write", help="also write the Markdown table to this file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.n < 1:
        parser.error("--rounds and --n must be 1 or more")

    shape = ["--shape", "steps3", "--n", str(args.n), "--db", args.db]
    runs: dict[str, list[float]] = {label: [] for label, _, _ in MODES}
    ratios: dict[str, list[float]] = {label: [] for label, _, _ in MODES}
    floors: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        this_round: dict[str, float] = {}
        for label, telemetry, trace_ratio in MODES:
            result = measure.run_once(
                "benchmarks.parkway_bench",
                [*shape, "--telemetry", telemetry, "--trace-ratio", str(trace_ratio)],
                timeout=600,
            )
            if not result.get("available", True):
                print(f"{label}: {result.get('reason')}", file=sys.stderr)
                return 1
            this_round[label] = float(result["wf_per_s"])
            runs[label].append(this_round[label])
        for label in this_round:
            ratios[label].append(this_round[label] / this_round["off"])
        floor = measure.run_once(
            "benchmarks.parkway_bench", ["--shape", "spanfloor", "--n", str(args.floor_n)], 600
        )
        if not floor.get("available", True):
            print(f"spanfloor: {floor.get('reason')}", file=sys.stderr)
            return 1
        floors.append(floor)

    off = statistics.median(runs["off"])
    bare = statistics.median(f["bare_us"] for f in floors)
    ours = statistics.median(f["run_us"] for f in floors)
    at_ten = statistics.median(f["sampled_us"] for f in floors)
    run_us = 1e6 / off
    lines = [
        f"`python -m benchmarks.telemetry --rounds {args.rounds} --n {args.n} --db {args.db}`"
        f" ({time.strftime('%Y-%m-%d %H:%M')}): 3-step workflows, `async def` steps, "
        f"the modes alternated in {args.rounds} rounds; ratio: the median of each "
        "round's mode / off.",
        "",
        "| mode | wf/s (median) | ratio to off | time / off |",
        "|---|---|---|---|",
    ]
    for label, _, _ in MODES:
        lines.append(
            f"| {label} | {measure.fmt(statistics.median(runs[label]))} "
            f"| {statistics.median(ratios[label]):.2f}× "
            f"| {statistics.median(1 / r for r in ratios[label]):.2f}× |"
        )
    sampled = statistics.median(1 / r for r in ratios[TARGET_MODE])
    verdict = "met" if sampled <= TARGET else "NOT met"
    lines += [
        "",
        f"Tracing with a 10 % ParentBased sampler: {sampled:.2f}× the time of tracing off "
        f"(target ≤ {TARGET:.2f}×: {verdict}).",
        "",
        f"A run with telemetry off: {run_us:,.0f} µs. The SDK's floor (one span started "
        f"and ended, nothing else, same provider): {bare:.1f} µs; parkway's "
        f"{SPANS_PER_RUN} spans of a run, in a loop on their own: {ours:.1f} µs.",
        "",
        "| the best tracing could reach | ratio to off |",
        "|---|---|",
        f"| {SPANS_PER_RUN} spans at the SDK's floor | "
        f"{run_us / (run_us + SPANS_PER_RUN * bare):.2f}× |",
        f"| parkway's {SPANS_PER_RUN} spans as measured on their own | "
        f"{run_us / (run_us + ours):.2f}× |",
        f"| parkway's spans of a run at a 10 % sampler ({at_ten:.1f} µs), on their own | "
        f"{run_us / (run_us + at_ten):.2f}× (time {(run_us + at_ten) / run_us:.2f}×) |",
    ]
    table = "\n".join(lines)
    print(table)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as out:
            out.write(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
