"""The dashboard's repairs in a real browser (headless Chromium against ``parkway
serve``): a held run in the list, the counts and its page, retried there once the
code is fixed; Retry offered only where the server takes it (not on a cancelled
run); a cancelled run's wait shown as no longer waited for; an unknown run said to
be unknown; "Fork from here" on a timeline entry.

Needs Playwright and a Chromium, as ``test_dashboard_browser.py`` does (skips
without them)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx

from tests.helpers import Served

from .test_dashboard_browser import TOKEN, _until

# The order of its steps is read from a file at each replay: the test "deploys" a
# change, and its fix, by writing that file.
REPAIR_APP = """
from pathlib import Path

from parkway import Engine

# (No parked run kept in memory: each input replays the journal, with the code as it is.)
engine = Engine({url!r}, cached_runs=0)
ORDER = Path({order!r})


@engine.workflow()
async def shifty(ctx, _input):
    for name in ORDER.read_text().split():
        await ctx.step(lambda n=name: n, name=name)
    return await ctx.wait_for_signal("go", timeout="1h")


@engine.workflow()
async def pipeline(ctx, n):
    a = await ctx.step(lambda: n, name="fetch")
    b = await ctx.step(lambda: a * 2, name="double")
    return await ctx.step(lambda: b + 1, name="store")
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    url = f"sqlite:///{tmp_path / 'repair.db'}"
    order = tmp_path / "order.txt"
    order.write_text("a b")
    (tmp_path / "repair.py").write_text(
        textwrap.dedent(REPAIR_APP.format(url=url, order=str(order)))
    )
    server = Served(tmp_path, "repair:engine", env={"PARKWAY_API_TOKEN": TOKEN})
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()


def test_an_operator_repairs_runs_from_the_dashboard(
    browser: Any,
    served: Served,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    order = tmp_path / "order.txt"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=served.url, headers=auth, timeout=10) as http:
        for run_id in ("held-1", "cancelled-1"):
            created = http.post("/runs", json={"workflow": "shifty", "id": run_id})
            assert created.status_code == 201, created.text
        assert http.post("/runs", json={"workflow": "pipeline", "id": "p-1", "input": 4}).is_success
        _until(lambda: http.get("/runs/held-1").json()["status"] == "parked", "held-1 parked")
        _until(lambda: http.get("/runs/cancelled-1").json()["status"] == "parked", "parked")
        _until(lambda: http.get("/runs/p-1").json()["status"] == "completed", "p-1 completed")
        assert http.post("/runs/cancelled-1/cancel").status_code == 202
        order.write_text("b a")  # the deploy that breaks it
        assert http.post("/runs/held-1/signals/go", json="x").status_code == 202
        _until(lambda: http.get("/runs/held-1").json()["status"] == "held", "held-1 held")

    page = browser.new_page(viewport={"width": 1300, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(served.url + "/?refresh=700")
    page.fill("#token", TOKEN)
    page.click("#token-form button[type=submit]")

    # -- the held run in the counts and the list -----------------------------------------
    counts = page.locator("#counts")
    expect(counts.locator('tr[data-workflow="shifty"] td[data-status="held"]')).to_have_text("1")
    row = page.locator('#runs tbody tr[data-run-id="held-1"]')
    expect(row).to_contain_text("held")
    page.select_option("#status-filter", "held")
    page.click("#filters-apply")
    expect(page.locator("#runs tbody tr")).to_have_count(1)

    # -- its page: why it is held, and a retry once the code is fixed ---------------------
    page.goto(served.url + "/?refresh=700#run/held-1")
    expect(page.locator("#detail-status")).to_contain_text("held")
    expect(page.locator("#failure-title")).to_contain_text("Held")
    expect(page.locator("#run-error")).to_contain_text("NonDeterminismError")
    expect(page.locator("#retry-run")).to_be_visible()
    order.write_text("a b")  # the fix
    page.click("#retry-run")
    expect(page.locator("#toast")).to_contain_text("run held-1 retried")
    expect(page.locator("#detail-status")).to_contain_text("completed", timeout=15_000)
    expect(page.locator("#run-output")).to_contain_text('"x"')

    # -- a cancelled run: no Retry (the server refuses it), its wait no longer pending ----
    page.goto(served.url + "/?refresh=700#run/cancelled-1")
    expect(page.locator("#detail-status")).to_contain_text("cancelled")
    expect(page.locator("#retry-run")).to_be_hidden()
    wait = page.locator("#timeline li[data-position]").last
    expect(wait).to_contain_text("not waited for: the run was cancelled")
    expect(wait).not_to_contain_text("times out")
    expect(page.locator("#run-waits")).to_contain_text("the run has ended")

    # -- an unknown run is said to be unknown, with nothing to act on --------------------
    page.goto(served.url + "/?refresh=700#run/no-such-run")
    expect(page.locator("#run-missing")).to_contain_text("No run with id no-such-run")
    expect(page.locator("#run-waits")).to_contain_text("there is no such run")
    expect(page.locator("#run-waits")).not_to_contain_text("the run has ended")
    expect(page.locator("#cancel-run")).to_be_disabled()
    expect(page.locator("#retry-run")).to_be_hidden()

    # -- fork from here: a new run from the entries before the second step ---------------
    page.goto(served.url + "/?refresh=700#run/p-1")
    expect(page.locator("#detail-status")).to_contain_text("completed")
    forks = page.locator('#timeline button[data-action="fork"]')
    expect(forks).to_have_count(3)
    page.once("dialog", lambda dialog: dialog.accept())
    forks.nth(1).click()
    expect(page.locator("#toast")).to_contain_text("run p-1 forked as")
    expect(page.locator("#run-info")).to_contain_text("forked from", timeout=15_000)
    expect(page.locator("#run-info")).to_contain_text("at entry 1")
    expect(page.locator("#detail-status")).to_contain_text("completed", timeout=15_000)
    expect(page.locator("#run-output")).to_contain_text("9")
    assert errors == []
