"""How the runner measures: each shape in fresh processes, its figures the medians."""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

# How many times each shape runs (--repeat); its figures are the medians.
REPEAT = 1


def run_json(
    module: str, args: Sequence[str], timeout: float, prefix: Sequence[str] = ()
) -> dict[str, Any]:
    """Run ``python -m module args`` REPEAT times; its figures, each the median of the runs.

    ``prefix`` goes before the command (``ip netns exec NAME``, say).
    """
    return merged([run_once(module, args, timeout, prefix) for _ in range(REPEAT)])


# A command of a round: its module, its arguments, its timeout in seconds.
Job = tuple[str, Sequence[str], float]


def run_rounds(jobs: dict[str, Job], parallel: int = 1) -> dict[str, dict[str, Any]]:
    """Run every job once per round, REPEAT rounds, in order within each round (A B
    A B, not A A B B); each job's figures, the medians of its runs.

    A ratio between two jobs then compares runs minutes apart at most, not the
    start and the end of the whole measurement, on a machine whose speed drifts
    by tens of percent within an hour. ``parallel`` > 1 runs that many jobs at once
    (a smoke run's, whose figures do not matter: never a measurement's).
    """
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in jobs}
    for _ in range(REPEAT):
        if parallel > 1:
            with ThreadPoolExecutor(parallel) as pool:
                results = pool.map(lambda job: run_once(*job), jobs.values())
                for name, result in zip(jobs, results, strict=True):
                    runs[name].append(result)
            continue
        for name, (module, args, timeout) in jobs.items():
            runs[name].append(run_once(module, args, timeout))
    return {name: merged(results) for name, results in runs.items()}


def merged(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of several runs of one command, each the median of the runs.

    (A figure's median is taken on its own: the runs need not agree on anything
    else. A run that failed is left out; if all did, the last one's reason stays.)
    """
    good = [r for r in results if r.get("available", True)]
    if not good:
        return results[-1]
    out = dict(good[-1])
    for key, value in out.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            values = sorted(r[key] for r in good if isinstance(r.get(key), int | float))
            whole = all(isinstance(v, int) for v in values)  # (counts stay counts)
            out[key] = statistics.median_low(values) if whole else statistics.median(values)
    out["runs"] = len(good)
    return out


def run_once(
    module: str, args: Sequence[str], timeout: float, prefix: Sequence[str] = ()
) -> dict[str, Any]:
    """Run ``python -m module args`` and parse its one line of JSON."""
    command = [*prefix, sys.executable, "-m", module, *args]
    print(f"$ {' '.join(command[len(prefix) + 1 :])}", file=sys.stderr, flush=True)
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


def fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def value(result: dict[str, Any], key: str) -> Any:
    """A figure of a shape's result, or None where the shape was not measured."""
    return result.get(key) if result.get("available", True) else None


def ratio(mine: Any, theirs: Any, higher: bool) -> str:
    """How many times better ``mine`` is (``higher``: more is better), as in "12.3 times"."""
    if isinstance(mine, int | float) and isinstance(theirs, int | float) and mine and theirs:
        return f"{(mine / theirs if higher else theirs / mine):,.1f}×"
    return ""


def pair(result: dict[str, Any], first: str = "p50_ms", second: str = "p99_ms") -> str:
    return f"{fmt(value(result, first))} / {fmt(value(result, second))}"


def with_variant(result: dict[str, Any], key: str, variant_key: str | None) -> str:
    """A peer's figure with the variant it came from: ``252 (direct)``."""
    figure = value(result, key)
    if figure is None:
        return "—"
    variant = result.get(variant_key) if variant_key else None
    return f"{fmt(figure)} ({variant})" if variant else fmt(figure)
