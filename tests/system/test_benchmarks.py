"""Every benchmark runs: ``python -m benchmarks.run --quick``, a smoke run at a small n.

Its figures mean nothing; what is checked is that every shape of the table and every
other benchmark module ran to the end (the run exits 1 otherwise, naming what did not)
and that the tables were printed, so that a change that breaks a benchmark fails here
rather than on the next measurement.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_every_benchmark_runs_at_a_small_n() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick"],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=840,
    )
    out = done.stdout
    assert done.returncode == 0, f"{out[-4000:]}\n{done.stderr[-4000:]}"
    # The table of the shapes, every row of it with parkway's figure.
    lines = out.splitlines()
    header = lines.index("| shape | parkway | DBOS | ratio | target |")
    rows = []
    for line in lines[header + 2 :]:
        if not line.startswith("| "):
            break
        rows.append(line)
    assert len(rows) > 40, out
    assert [row for row in rows if row.split(" | ")[1] == "—"] == [], out
    # Every other module printed its own table (or a note saying why it was skipped).
    for module in (
        "callbacks",
        "fleet",
        "admission",
        "repairs",
        "failures",
        "telemetry",
        "streams",
    ):
        assert f"$ python -m benchmarks.{module} " in out, out
    assert "quick run: every benchmark ran." in out, out
