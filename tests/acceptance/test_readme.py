"""Every Python example in the README runs as shown."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.S)

EXPECTED = {
    0: ["parked", "'tracking': 'ZX-9'"],
    1: ["1 product:456", "emailed client:5: Blue mug is back"],
    2: ["to client:5: product 456 is back", "1"],
    3: ["approved declined", "outcome='buffered'"],
    4: [
        "https://pay.example/7?amount=12",
        "rejected: unknown code 'NOPE'",
        "discounted: 10.8",
        "'outcome': 'paid', 'total': 10.8",
        "order 8 cancelled",
    ],
    5: ["reminded"],
    6: ["{'order': {'id': 'A-7'}, 'decision': 'yes'}", "completed"],
    7: [
        "parked True\nparked\nfailed\n",
        "{'approved': True, 'payment': 'charged'}",
        "refused: cannot retry run 'A-1': it is completed",
        "cancelled 3",
        "left 0 3",
    ],
}


def test_readme_has_the_examples() -> None:
    assert len(BLOCKS) == len(EXPECTED)


@pytest.mark.parametrize("index", sorted(EXPECTED))
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"example_{index}.py"
    script.write_text(BLOCKS[index], "utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    for expected in EXPECTED[index]:
        assert expected in done.stdout, done.stdout
