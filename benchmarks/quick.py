"""``python -m benchmarks.run --quick``: every benchmark's code run end to end at a small n.

A smoke run, for CI (``tests/system/test_benchmarks.py``): its figures mean nothing,
its point is that no benchmark is broken. ``benchmarks.run`` measures its table's
shapes at the quick sizes (``benchmarks.rows.SIZES``, ``benchmarks.tables.SIZED``),
then runs every other benchmark module here at the sizes in ``MODULES``. A peer or a
module whose packages are not installed is skipped with a printed note; a shape that
was not measured, or a module that exits non-zero, fails the run (exit 1).

Not run: ``benchmarks.netpg``, the network set-up of ``--pg-rtt`` (root and a network
namespace), and the PostgreSQL tables (``--postgres``, which --quick also shortens).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.procs import PROJECT_ROOT, python_env

# Each module, its smoke arguments, and the packages it cannot run without.
MODULES: list[tuple[str, list[str], tuple[str, ...]]] = [
    ("benchmarks.callbacks", ["--n", "5", "--db", "sqlite"], ()),
    ("benchmarks.fleet", ["--n", "20", "--rounds", "1", "--db", "sqlite"], ()),
    ("benchmarks.admission", ["--n", "30", "--window", "5"], ()),
    ("benchmarks.repairs", ["--runs", "20", "--entries", "10", "--forks", "2"], ()),
    ("benchmarks.failures", ["--rounds", "1", "--n", "20", "--beats-n", "5", "--db", "sqlite"], ()),
    (
        "benchmarks.telemetry",
        ["--rounds", "1", "--n", "20", "--floor-n", "500"],
        ("opentelemetry.sdk", "prometheus_client"),
    ),
    ("benchmarks.streams", ["--n", "20", "--paced", "5", "--db", "sqlite"], ()),
    # Its coverage phase is the long fuzz's (and the test suite's), not a smoke run's.
    (
        "benchmarks.fuzz_http",
        ["--examples", "1", "--phases", "examples,fuzzing"],
        ("schemathesis",),
    ),
    ("benchmarks.agents", ["--n", "2", "--db", "sqlite"], ("pydantic_ai", "dbos")),
]
MODULE_TIMEOUT = 300
# Processes run at once: a smoke run's figures do not matter, its wall time does.
PARALLEL = 2


def _missing(packages: tuple[str, ...]) -> list[str]:
    absent = []
    for name in packages:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # its parent package is missing
            found = False
        if not found:
            absent.append(name)
    return absent


def note(text: str) -> None:
    print(f"note: {text}", flush=True)


def drop_missing_peers(args: argparse.Namespace) -> None:
    """Leave out the peers that are not installed, each with a printed note."""
    if not args.no_peers and _missing(("dbos",)):
        args.no_peers = True
        note("DBOS is not installed: its column is left empty (pip install -e '.[bench]')")
    if "restate" in args.peers and _missing(("restate", "hypercorn")):
        args.peers = [p for p in args.peers if p != "restate"]
        note("Restate's SDK is not installed: no Restate column (pip install -e '.[restate]')")


def unmeasured(results: dict[str, dict[str, Any]]) -> list[str]:
    """The table's shapes that did not give their figures, with why."""
    return [
        f"{name}: {result.get('reason')}"
        for name, result in results.items()
        if not result.get("available", True)
    ]


def _run(module: str, argv: list[str]) -> tuple[str, str | None]:
    """Run one module; its output, and what went wrong (None: nothing)."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", module, *argv],
            cwd=PROJECT_ROOT,
            env=python_env(),
            capture_output=True,
            text=True,
            timeout=MODULE_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return "", f"{module}: timed out after {MODULE_TIMEOUT}s"
    print(f"({module}: {time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-5:])
        return done.stdout, f"{module}: exit {done.returncode}: {tail}"
    return done.stdout, None


def run_modules() -> list[str]:
    """Run every module of ``MODULES``, printing its output; the failures, described."""
    runnable = []
    for module, argv, needs in MODULES:
        absent = _missing(needs)
        if absent:
            note(f"{module} skipped: {', '.join(absent)} not installed")
        else:
            runnable.append((module, argv))
    failures = []
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = pool.map(lambda job: _run(*job), runnable)
        for (module, argv), (output, failed) in zip(runnable, results, strict=True):
            print(f"\n$ python -m {module} {' '.join(argv)}", flush=True)
            sys.stdout.write(output)
            if failed:
                failures.append(failed)
    return failures


def finish(*results: dict[str, dict[str, Any]]) -> int:
    """After the table: the other modules, then the verdict (0: nothing is broken)."""
    failures = [f"shape {line}" for each in results for line in unmeasured(each)]
    failures += run_modules()
    if failures:
        print("\nquick run FAILED:", *(f"- {f}" for f in failures), sep="\n", flush=True)
        return 1
    print("\nquick run: every benchmark ran.", flush=True)
    return 0
