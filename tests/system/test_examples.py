"""The examples run as users run them: ``python examples/<name>.py``, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PARKWAY_URL", "PARKWAY_AGENT_MODEL")}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_back_in_stock(tmp_path: Path) -> None:
    result = run_example("back_in_stock.py", tmp_path)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line.strip() for line in result.stdout.splitlines()]

    # Orders start one run per client, each parked on its product's subject.
    assert "order.create client:5 product 456: started evt:order-5:back_in_stock" in lines
    assert "order.create client:7 product 999: started evt:order-7:back_in_stock" in lines
    assert (
        "client:5 is parked, waiting for product.update on product:456 "
        "matching {'in_stock': True}" in lines
    )
    assert (
        "client:7 is parked, waiting for product.update on product:999 "
        "matching {'in_stock': True}" in lines
    )
    # Only the in-stock update of product 456 touches anyone: client 5's run, once.
    assert "product.update 456 (still out): touched 0" in lines
    assert "product.update 123 (nobody waits): touched 0" in lines
    assert (
        "product.update 456 (back in stock): touched 1: "
        "evt:order-5:back_in_stock (from product:456)" in lines
    )
    emails = [line for line in lines if line.startswith("[email]")]
    assert emails == ["[email] to client:5: Blue mug (product 456) is back in stock"]
    # A week later: client 5 was emailed, client 7's wait timed out; nothing is left behind.
    assert (
        "client:5 (evt:order-5:back_in_stock): completed, "
        "Blue mug (product 456) is back in stock" in lines
    )
    assert (
        "client:7 (evt:order-7:back_in_stock): completed, no email: timed out after 7 days" in lines
    )
    assert lines[-1] == "subscriptions left: 0"
    # The example keeps its database in a temporary folder: nothing lands in the cwd.
    assert list(tmp_path.iterdir()) == []


def test_agent_demo_runs_offline(tmp_path: Path) -> None:
    result = run_example("agent/app.py", tmp_path, "--demo")
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "approval asked: refund {'order': 42, 'cents': 3900}"
    assert lines[1:] == [
        "{'status': 'completed'}",
        "model: The agent thought.",
        "tool: lookup_order: order 42: a kettle, delivered damaged",
        "model: The agent thought.",
        "tool: refund: Refunded 39.00 EUR on order 42",
        "model: The agent thought.",
        # The answer's words, streamed from the agent's stream as the model wrote them.
        "words: I looked your order up: order 42: a kettle, delivered damaged. "
        "Refunded 39.00 EUR on order 42.",
        "answer: I looked your order up: order 42: a kettle, delivered damaged. "
        "Refunded 39.00 EUR on order 42.",
    ]
    assert list(tmp_path.iterdir()) == []
