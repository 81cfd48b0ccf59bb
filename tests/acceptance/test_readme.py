"""Every Python example in the README runs as shown."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.S)

# Each example, found by a line only it has, and what it must print. (By marker,
# not by position: a section added above an example does not renumber the rest.)
EXPECTED = {
    'engine = Engine("sqlite:///orders.db")': ["parked", "'tracking': 'ZX-9'"],
    "async def back_in_stock(": ["1 product:456", "emailed client:5: Blue mug is back"],
    '@engine.action("send_email")': ["to client:5: product 456 is back", "1"],
    "async def loan(": ["approved declined", "outcome='buffered'"],
    "PRICES = {": [
        "https://pay.example/7?amount=12",
        "rejected: unknown code 'NOPE'",
        "discounted: 10.8",
        "'outcome': 'paid', 'total': 10.8",
        "order 8 cancelled",
    ],
    "async def reminder(": ["reminded"],
    "history_threshold=50": ["{'total': 120, 'journal': "],
    'return await ctx.wait_for_signal("approve")': [
        "[['order-4', 'order-3'], ['order-2', 'order-1'], ['order-0']]",
        "['order-3', 'order-1']",
        "{'approval': {'parked': 5}}",
    ],
    "from fastapi import FastAPI": ["{'order': {'id': 'A-7'}, 'decision': 'yes'}", "completed"],
    "from parkway import Engine, Schedule": [
        "sched:nightly_report:2030-03-10T07:00:00+00:00 2030-03-10T07:00:00+00:00",
        "ping-hourly True None sched:ping-hourly:2030-03-10T12:00:00+00:00",
    ],
    "from parkway import Concurrency, ConcurrencyLimitError, Engine, RateLimit": [
        "a-1 parked",
        "a-2 pending",
        "a-urgent pending",
        "b-1 parked",
        "after a-1: parked pending",
        "skipped: workflow 'nightly_report'",
        "waiting for the next window: ['call-2']",
    ],
    "from parkway import Engine, RunStateError": [
        "parked True\nparked\nfailed\n",
        "{'approved': True, 'payment': 'charged'}",
        "refused: cannot retry run 'A-1': it is completed",
        "cancelled 3",
        "left 0 3",
    ],
}


def block(marker: str) -> str:
    found = [b for b in BLOCKS if marker in b]
    assert len(found) == 1, f"{len(found)} README examples hold {marker!r}"
    return found[0]


def test_readme_has_the_examples() -> None:
    # Every example is tested, each by one marker.
    assert len(BLOCKS) == len(EXPECTED)
    assert sorted(BLOCKS) == sorted(block(marker) for marker in EXPECTED)


@pytest.mark.parametrize("marker", list(EXPECTED))
def test_readme_example_runs(marker: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block(marker), "utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    for expected in EXPECTED[marker]:
        assert expected in done.stdout, done.stdout
