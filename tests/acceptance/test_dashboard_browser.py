"""The dashboard in a real browser: headless Chromium against ``parkway serve``.

An operator opens the page, pastes the API token, sees a parked run, clicks it
to read its history, and sends the signal that completes it. Needs Playwright
(the Python package, in the dev extra) and a Chromium at ``/usr/bin/chromium``
(Debian: ``apt-get install chromium``); it skips, saying which is missing,
without them. Playwright's own browser download is never used.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx

from .test_http import Served, served_app

CHROMIUM = os.environ.get("PARKWAY_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOKEN = "dashboard-token"


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium driven by Playwright, or a skip that says what is missing."""
    if not (os.path.isfile(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(
            f"no Chromium at {CHROMIUM} (apt-get install chromium, or set PARKWAY_TEST_CHROMIUM)"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed: pip install playwright"
    )
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(served_app(tmp_path), "approvals:engine", env={"PARKWAY_API_TOKEN": TOKEN})
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()


def test_an_operator_finds_a_parked_run_reads_its_history_and_signals_it(
    browser: Any, served: Served, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=served.url, headers=auth, timeout=10) as http:
        for run_id, order in [
            ("order-1001", {"sku": "lamp", "qty": 2}),
            ("order-1002", {"sku": "desk", "qty": 1}),
        ]:
            created = http.post(
                "/runs",
                json={"workflow": "approval", "id": run_id, "subject": "client:5", "input": order},
            )
            assert created.status_code == 201, created.text
        started = http.post(
            "/events",
            json={
                "name": "order.created",
                "id": "ev-9",
                "subject": "order:9",
                "payload": {"id": 9},
            },
        )
        assert started.json()["started"] == ["evt:ev-9:shipment"], started.text
        http.post("/messages", json={"name": "credit.score", "key": "APP-7", "payload": 640})

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    response = page.goto(served.url + "/")
    assert response is not None and response.status == 401  # no token yet: the page, no data
    expect(page.locator("#toast")).to_contain_text("API token")

    page.fill("#token", TOKEN)
    page.click("#token-form button[type=submit]")
    row = page.locator('#runs tr[data-run-id="order-1001"]')
    expect(row).to_contain_text("parked")
    expect(page.locator("#runs tbody tr")).to_have_count(3)
    expect(page.locator("#messages")).to_contain_text("APP-7")
    expect(page.locator("#subscriptions")).to_contain_text("order.shipped")
    expect(page.locator("#subscriptions")).to_contain_text("evt:ev-9:shipment")
    expect(page.locator("#health")).to_have_text("healthy")

    row.click()
    expect(page.locator("#detail-id")).to_have_text("order-1001")
    expect(page.locator("#run-info")).to_contain_text("parked")
    expect(page.locator("#run-info")).to_contain_text('"sku": "lamp"')
    history = page.locator("#history tbody tr")
    expect(history).to_have_count(1)
    expect(history.first).to_contain_text("signal")
    expect(history.first).to_contain_text("pending")

    page.screenshot(path=str(tmp_path / "dashboard-parked.png"), full_page=True)

    page.fill("#signal-name", "x")
    page.fill("#signal-payload", '{"approved": true, "by": "ops"}')
    page.click("#signal-send")
    expect(page.locator("#run-info")).to_contain_text("completed", timeout=15_000)
    expect(page.locator("#run-output")).to_contain_text('"approved": true')
    expect(history.first).to_contain_text("done")
    expect(row).to_contain_text("completed")
    expect(page.locator("#signal-send")).to_be_disabled()

    # Publishing from the page resumes the run parked on that event.
    page.fill("#event-name", "order.shipped")
    page.fill("#event-payload", '{"carrier": "dhl"}')
    page.fill("#event-subject", "order:9")
    page.click("#publish-form button[type=submit]")
    expect(page.locator("#publish-result")).to_contain_text("evt:ev-9:shipment")
    expect(page.locator('#runs tr[data-run-id="evt:ev-9:shipment"]')).to_contain_text("completed")
    expect(page.locator("#subscriptions")).to_contain_text("No run is waiting")

    # Cancelling asks first; the run is then cancelled.
    page.locator('#runs tr[data-run-id="order-1002"]').click()
    expect(page.locator("#detail-id")).to_have_text("order-1002")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-run")
    expect(page.locator("#run-info")).to_contain_text("cancelled")
    page.locator('#runs tr[data-run-id="order-1001"]').click()
    expect(page.locator("#run-output")).to_contain_text('"approved": true')

    # The token lives in this tab's sessionStorage only.
    assert page.evaluate("sessionStorage.getItem('parkway.token')") == TOKEN
    shot = tmp_path / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    print(f"dashboard screenshot: {shot}")

    page.select_option("#status-filter", "cancelled")
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    expect(page.locator("#runs tbody tr").first).to_contain_text("order-1002")

    with httpx.Client(base_url=served.url, headers=auth, timeout=10) as http:
        run = http.get("/runs/order-1001").json()
        assert http.get("/runs/order-1002").json()["status"] == "cancelled"
        shipment = http.get("/runs/evt:ev-9:shipment").json()
    assert run["status"] == "completed"
    assert run["output"]["decision"] == {"approved": True, "by": "ops"}
    assert shipment["output"] == {"carrier": "dhl"}
    assert not [e for e in errors if "401" not in e], errors
    assert served.stop() == 0, served.stderr
