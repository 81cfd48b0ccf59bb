"""The dashboard in a real browser: headless Chromium against ``parkway serve``.

An operator opens the page, pastes the API token, and clicks through every view:
the run list (counts, filters, search, pages), a run's page (timeline, what it
waits for, values, parent and children, a failure's traceback, signal and
cancel), dead letters (retry, discard), and the controls a newer server offers
(pause, resume, retry, schedules) when its /openapi.json lists them.

Needs Playwright (the Python package, in the dev extra) and a Chromium at
``/usr/bin/chromium`` (Debian: ``apt-get install chromium``); it skips, saying
which is missing, without them. Playwright's own browser download is never used.

``PARKWAY_SCREENSHOTS=docs/screenshots`` saves a screenshot of each view there
(the ones docs/guides/dashboard.md shows); otherwise they go to the test's tmp_path.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx

from tests.helpers import Served, write_app

TOKEN = "dashboard-token"
SCREENSHOTS = os.environ.get("PARKWAY_SCREENSHOTS")

# The operator's application: approvals, an order whose payment child fails, a step
# retrying with a long backoff, loans waiting for a message, a nightly schedule when
# this parkway has schedules.
SHOP_APP = """
import parkway.core.housekeeping as housekeeping
from parkway import Engine, Retry

# Dead letters show within a second here, not within a minute (the sweep's period).
housekeeping.SWEEP_INTERVAL = 0.5

engine = Engine({url!r})


@engine.workflow()
async def approval(ctx, order):
    ctx.set_value("stage", "awaiting approval")
    decision = await ctx.wait_for_signal("approve", timeout="2h")
    ctx.set_value("stage", "decided")
    return {{"order": order, "decision": decision}}


def reserve(sku):
    return {{"sku": sku, "reserved": True}}


def charge_card(order):
    raise ValueError(f"card declined for order {{order['id']}}")


@engine.workflow()
async def payment(ctx, order):
    return await ctx.step(charge_card, order, retry=Retry(max_attempts=2, backoff="50ms"))


@engine.workflow(on_event="order.created")
async def fulfilment(ctx, order):
    await ctx.step(reserve, order["sku"])
    ctx.set_value("progress", {{"reserved": True, "percent": 50}})
    await ctx.start_child("payment", order, id=f"payment-{{order['id']}}")
    return await ctx.wait_for_event("order.shipped", match={{"order": order["id"]}}, timeout="1d")


@engine.workflow()
async def loan(ctx, app_id):
    return await ctx.wait_for_message("credit.score", app_id, timeout="1h")


def fetch_rates():
    raise ConnectionError("rates service unavailable")


@engine.workflow()
async def rates(ctx, _input):
    return await ctx.step(fetch_rates, retry=Retry(max_attempts=5, backoff="1h", max_backoff="1h"))


if hasattr(engine, "add_schedule"):  # (a parkway with schedules)
    @engine.workflow(schedule="0 3 * * *")
    async def nightly(ctx, _input):
        return "reindexed"
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    write_app(tmp_path, "shop", SHOP_APP, url)
    # (--log-level info: the access log is checked too)
    server = Served(
        tmp_path, "shop:engine", "--log-level", "info", env={"PARKWAY_API_TOKEN": TOKEN}
    )
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _until(check: Any, what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def _populate(http: httpx.Client) -> None:
    """35 runs in every state, two dead letters and a buffered message."""
    for i in range(30):
        created = http.post(
            "/runs",
            json={
                "workflow": "approval",
                "id": f"order-{1000 + i}",
                "subject": f"client:{i % 4}",
                "input": {"sku": "lamp", "qty": 1 + i % 3},
            },
        )
        assert created.status_code == 201, created.text
    started = http.post(
        "/events",
        json={
            "name": "order.created",
            "id": "ev-9",
            "subject": "order:9",
            "payload": {"id": 9, "sku": "desk"},
        },
    )
    assert started.json()["started"] == ["evt:ev-9:fulfilment"], started.text
    for run_id, workflow, data in [("loan-7", "loan", "APP-7"), ("rates-1", "rates", None)]:
        created = http.post("/runs", json={"workflow": workflow, "id": run_id, "input": data})
        assert created.status_code == 201, created.text
    # Two messages no run waits for expire into dead letters; one stays buffered.
    for key, ttl in [("APP-1", 0.3), ("APP-2", 0.3), ("APP-3", 3600)]:
        sent = http.post(
            "/messages",
            json={"name": "credit.score", "key": key, "payload": {"score": 700}, "ttl": ttl},
        )
        assert sent.json()["outcome"] == "buffered", sent.text
    _until(lambda: len(http.get("/messages?status=expired").json()) == 2, "two dead letters")
    # Started after APP-1 died: it waits, and a retry of the dead letter reaches it.
    assert http.post(
        "/runs", json={"workflow": "loan", "id": "loan-1", "input": "APP-1"}
    ).is_success
    _until(lambda: http.get("/runs/payment-9").json()["status"] == "failed", "the failed payment")
    _until(lambda: http.get("/runs/loan-1").json()["status"] == "parked", "loan-1 parked")
    _until(lambda: http.get("/runs/rates-1/history").json(), "the retrying step")


def test_an_operator_clicks_through_every_view(browser: Any, served: Served, shots: Path) -> None:
    from playwright.sync_api import expect

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=served.url, headers=auth, timeout=10) as http:
        _populate(http)
        features = http.get("/openapi.json").json()["paths"]

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    requests: list[tuple[str, bool]] = []  # (url, a poll)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("request", lambda r: requests.append((r.url, "x-parkway-poll" in r.headers)))
    response = page.goto(served.url + "/?refresh=700")
    assert response is not None and response.status == 401  # no token yet: the page, no data
    expect(page.locator("#toast")).to_contain_text("API token")
    page.fill("#token", TOKEN)
    page.click("#token-form button[type=submit]")

    # -- the run list: counts, a page of 25, the next page ------------------------------
    expect(page.locator("#health")).to_have_text("healthy")
    counts = page.locator("#counts")
    expect(counts.locator('tr[data-workflow="approval"] td[data-status="parked"]')).to_have_text(
        "30"
    )
    expect(counts.locator('tr[data-workflow="payment"] td[data-status="failed"]')).to_have_text("1")
    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(25)
    expect(page.locator("#subscriptions")).to_contain_text("order.shipped")
    expect(page.locator("#page-newer")).to_be_disabled()
    page.screenshot(path=str(shots / "runs.png"), full_page=True)
    first_page = rows.evaluate_all("rows => rows.map(r => r.dataset.runId)")
    page.click("#page-older")
    expect(page.locator("#page-label")).to_have_text("page 2")
    expect(rows).to_have_count(10)
    expect(page.locator("#page-older")).to_be_disabled()
    second_page = rows.evaluate_all("rows => rows.map(r => r.dataset.runId)")
    assert len(set(first_page) | set(second_page)) == 35
    page.click("#page-newer")
    expect(page.locator("#page-label")).to_have_text("page 1")
    expect(rows.first).to_have_attribute("data-run-id", first_page[0])

    # -- search and filters -------------------------------------------------------------
    page.fill("#run-search", "order-101")
    page.press("#run-search", "Enter")  # (the filter form is submitted from the keyboard)
    expect(rows).to_have_count(10)
    expect(rows.first).to_have_attribute("data-run-id", "order-1019")
    page.fill("#run-search", "client:3")
    page.click("#filters-apply")
    expect(rows).to_have_count(7)  # order-1003, 1007, ... 1027
    page.select_option("#page-size", "10")
    page.fill("#run-search", "")
    page.fill("#created-before", "2000-01-01T00:00:00")
    page.click("#filters-apply")
    expect(page.locator("#runs")).to_contain_text("No runs match.")
    page.fill("#created-before", "")
    page.fill("#created-after", "2000-01-01T00:00:00")
    page.click("#filters-apply")
    expect(rows).to_have_count(10)
    expect(page.locator("#page-older")).to_be_enabled()
    page.click("#filters-reset")
    expect(rows).to_have_count(25)
    counts.locator('tr[data-workflow="payment"] td[data-status="failed"] button').click()
    expect(page.locator("#workflow-filter")).to_have_value("payment")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run-id", "payment-9")
    page.screenshot(path=str(shots / "runs-filtered.png"), full_page=True)

    # -- a failed run: its traceback, its timeline, its parent --------------------------
    rows.first.click()
    expect(page.locator("#detail-id")).to_have_text("payment-9")
    expect(page.locator("#detail-status")).to_have_text("failed")
    expect(page.locator("#failure-panel")).to_be_visible()
    expect(page.locator("#run-traceback")).to_contain_text("Traceback")
    expect(page.locator("#run-traceback")).to_contain_text("card declined for order 9")
    steps = page.locator("#timeline li[data-position]")
    expect(steps).to_have_count(3)  # its two failed attempts, kept, then the step
    attempts = page.locator('#timeline li[data-kind="attempt"]')
    expect(attempts).to_have_count(2)
    expect(attempts.first).to_contain_text("charge_card")
    expect(attempts.first).to_contain_text("attempt 1 ran")
    expect(steps.last).to_contain_text("charge_card")
    expect(steps.last).to_contain_text("error")
    expect(steps.last).to_contain_text("after 2 attempt(s)")
    expect(page.locator("#timeline li").last).to_contain_text("took")
    expect(page.locator("#cancel-run")).to_be_disabled()
    page.screenshot(path=str(shots / "run-failed.png"), full_page=True)

    # -- its parent: values, children, what it waits for -------------------------------
    page.locator("#run-parent a").click()
    expect(page.locator("#detail-id")).to_have_text("evt:ev-9:fulfilment")
    assert page.evaluate("location.hash") == "#run/evt%3Aev-9%3Afulfilment"
    expect(page.locator("#run-values")).to_contain_text('"percent": 50')
    expect(page.locator('#run-children tr[data-run-id="payment-9"]')).to_contain_text("failed")
    wait = page.locator('#run-waits tr[data-kind="event"]')
    expect(wait).to_contain_text("order.shipped")
    expect(wait).to_contain_text('match {"order":9}')
    expect(wait).to_contain_text("in 23 h")  # (the one-day timeout)
    expect(steps).to_have_count(4)  # reserve, set_value, start_child, the wait
    expect(steps.first).to_contain_text("reserve")
    expect(steps.first).to_contain_text("+")  # (the time since the run started)
    page.screenshot(path=str(shots / "run-waiting.png"), full_page=True)

    # -- a step waiting to be retried ---------------------------------------------------
    page.goto(served.url + "/?refresh=700#run/rates-1")
    retry = page.locator('#run-waits tr[data-kind="retry"]')
    expect(retry).to_contain_text("step retry")
    expect(retry).to_contain_text("attempt 2 of 5 next")
    expect(retry).to_contain_text("ConnectionError: rates service unavailable")
    expect(retry).to_contain_text("in 59 min")
    expect(steps.first).to_contain_text("attempt 1 ran")  # the failed attempt, on the timeline
    expect(steps.last).to_contain_text("pending")
    page.screenshot(path=str(shots / "run-retrying.png"), full_page=True)

    # -- signal a parked run, cancel another --------------------------------------------
    page.goto(served.url + "/?refresh=700#run/order-1000")
    expect(page.locator("#run-values")).to_contain_text("awaiting approval")
    expect(page.locator('#run-waits tr[data-kind="signal"]')).to_contain_text("approve")
    page.fill("#signal-name", "approve")
    page.fill("#signal-payload", '{"approved": true, "by": "ops"}')
    page.click("#signal-send")
    expect(page.locator("#detail-status")).to_contain_text("completed", timeout=15_000)
    expect(page.locator("#run-output")).to_contain_text('"approved": true')
    expect(page.locator("#run-waits")).to_contain_text("the run has ended")
    expect(page.locator("#signal-send")).to_be_disabled()
    page.goto(served.url + "/?refresh=700#run/order-1001")
    expect(page.locator("#detail-status")).to_contain_text("parked")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-run")
    expect(page.locator("#detail-status")).to_contain_text("cancelled")

    # -- dead letters: retry one into the run now waiting for it, discard the other ------
    page.click("#tab-messages")
    messages = page.locator("#messages tbody tr")
    expect(messages).to_have_count(3)
    expect(page.locator("#tab-messages")).to_have_text("Messages (2 dead)")
    page.screenshot(path=str(shots / "messages.png"), full_page=True)
    dead = page.locator("#messages tbody tr", has_text="APP-1")
    expect(dead).to_contain_text("dead letter")
    dead.locator('button[data-action="retry"]').click()
    expect(page.locator("#toast")).to_contain_text("delivered (run loan-1)")
    expect(messages).to_have_count(2)
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#messages tbody tr", has_text="APP-2").locator(
        'button[data-action="discard"]'
    ).click()
    expect(messages).to_have_count(1)
    expect(messages.first).to_contain_text("APP-3")
    page.select_option("#message-filter", "expired")
    expect(page.locator("#messages")).to_contain_text("No buffered messages or dead letters.")

    # -- keyboard: the tabs and a run's link are reachable and followed with Enter ------
    page.focus("#tab-runs")
    page.keyboard.press("Enter")
    expect(page.locator("#view-runs")).to_be_visible()
    expect(page.locator("#workflow-filter")).to_have_value("payment")  # (the filters stay)
    page.click("#filters-reset")
    link = page.locator('#runs a[href="#run/loan-1"]')
    link.focus()
    polled = len(requests)
    page.wait_for_timeout(1600)  # (two refreshes of the list)
    assert len(requests) > polled
    expect(link).to_be_focused()  # a live refresh keeps the keyboard's place
    page.keyboard.press("Enter")
    expect(page.locator("#detail-status")).to_contain_text("completed", timeout=15_000)
    expect(page.locator("#run-output")).to_contain_text('"score": 700')

    # -- pause, resume and retry, when this server has them ------------------------------
    controls = {verb: f"/runs/{{id}}/{verb}" in features for verb in ("pause", "resume", "retry")}
    page.goto(served.url + "/?refresh=700#run/order-1002")
    expect(page.locator("#detail-status")).to_contain_text("parked")
    for verb, present in controls.items():
        if not present:
            expect(page.locator(f"#{verb}-run")).to_be_hidden()
    if controls["pause"] and controls["resume"]:
        page.click("#pause-run")
        expect(page.locator("#detail-status")).to_contain_text("paused")
        expect(page.locator("#pause-run")).to_be_hidden()
        page.click("#resume-run")
        expect(page.locator("#detail-status")).not_to_contain_text("paused")
        expect(page.locator("#pause-run")).to_be_visible()
    if controls["retry"]:
        page.goto(served.url + "/?refresh=700#run/payment-9")
        page.click("#retry-run")
        expect(page.locator("#toast")).to_contain_text("run payment-9 retried")

    # -- schedules, when this server has them --------------------------------------------
    if "/schedules" in features:
        page.click("#tab-schedules")
        row = page.locator('#schedules tr[data-schedule-id="nightly"]')
        expect(row).to_contain_text("0 3 * * *")
        expect(row).to_contain_text("active")
        expect(row).to_contain_text("in ")
        page.screenshot(path=str(shots / "schedules.png"), full_page=True)
        if "/schedules/{id}/pause" in features:
            row.locator('button[data-action="pause"]').click()
            expect(row).to_contain_text("paused")
            row.locator('button[data-action="resume"]').click()
            expect(row).to_contain_text("active")
    else:
        expect(page.locator("#tab-schedules")).to_be_hidden()

    # The token lives in this tab's sessionStorage only.
    assert page.evaluate("sessionStorage.getItem('parkway.token')") == TOKEN
    assert not [e for e in errors if "401" not in e], errors

    # -- the access log: the operator's actions, not the page's own polling --------------
    page.goto("about:blank")  # (what the page still had in flight has landed in the log)
    page.wait_for_timeout(500)
    before = len(served.stderr)
    requests.clear()
    page.goto(served.url + "/?refresh=300#runs")
    counted = lambda poll: [u for u, p in requests if u.endswith("/runs/counts") and p == poll]  # noqa: E731
    for _ in range(100):  # (the page's events are seen while Playwright is called)
        if len(counted(True)) >= 3:
            break
        page.wait_for_timeout(100)
    assert len(counted(True)) >= 3, requests[-10:]
    page.goto("about:blank")
    page.wait_for_timeout(500)
    page.close()
    assert served.stop() == 0, served.stderr
    log = served.stderr
    assert re.search(r'"POST /runs/order-1001/cancel HTTP/1.1" 202', log), log[-3000:]
    assert re.search(r'"DELETE /messages/\d+ HTTP/1.1" 200', log)
    # The page's first load of the view is logged; its polls of it are not.
    assert counted(False) == [served.url + "/runs/counts"], requests
    assert len(re.findall(r'"GET /runs/counts HTTP', log[before:])) == 1, log[before:]


# -- the inbox: human tasks ----------------------------------------------------------------------

INBOX_APP = """
from parkway import Engine

engine = Engine({url!r})

FORM = {{
    "type": "object",
    "properties": {{
        "approved": {{"type": "boolean", "description": "Refund the customer?"}},
        "amount": {{"type": "integer", "minimum": 0, "description": "How much, in cents"}},
        "reason": {{"type": "string", "enum": ["damaged", "late"]}},
        "note": {{"type": "string"}},
    }},
    "required": ["amount", "reason"],
}}


@engine.workflow()
async def refund(ctx, order):
    return await ctx.human_task(
        "refund", title=f"Refund order {{order}}?", form=FORM, data={{"order": order}},
        assignees=["ana"],
    )
"""


@pytest.fixture
def inbox_served(tmp_path: Path) -> Iterator[Served]:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    write_app(tmp_path, "inbox", INBOX_APP, url)
    server = Served(tmp_path, "inbox:engine", env={"PARKWAY_API_TOKEN": TOKEN})
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()


def test_a_person_completes_a_task_in_the_inbox(
    browser: Any, inbox_served: Served, shots: Path
) -> None:
    from playwright.sync_api import expect

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=inbox_served.url, headers=auth, timeout=10) as http:
        assert http.post(
            "/runs", json={"workflow": "refund", "id": "r-7", "input": "A-7"}
        ).is_success
        _until(lambda: http.get("/tasks").json(), "the open task")

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(inbox_served.url + "/?refresh=700")
    page.fill("#token", TOKEN)
    page.click("#token-form button[type=submit]")
    page.click("#tab-inbox")
    page.get_by_label("Your name").fill("ana")
    page.get_by_label("Your name").press("Enter")
    task = page.locator("#tasks tbody button", has_text="Refund order A-7?")
    expect(task).to_be_visible()
    task.focus()
    page.keyboard.press("Enter")  # (opened from the keyboard)
    expect(page.locator("#task-title")).to_be_focused()
    expect(page.locator("#task-data")).to_contain_text('"order": "A-7"')

    # Every field has its label, its description, and says whether it is required.
    amount = page.get_by_label("amount")
    expect(amount).to_have_attribute("type", "number")
    expect(amount).to_have_attribute("aria-required", "true")
    expect(page.get_by_label("approved")).to_have_attribute("type", "checkbox")
    expect(page.locator("#task-form")).to_contain_text("How much, in cents")
    assert "task-field-amount-hint" in (amount.get_attribute("aria-describedby") or "")
    expect(page.get_by_label("reason")).to_contain_text("late")

    # An invalid submission: the server's error next to the field, focus on it, announced.
    page.get_by_label("approved").check()
    amount.fill("-5")
    page.get_by_label("reason").select_option(label="late")
    page.click("#task-submit")
    error = page.locator("#task-field-amount-error")
    expect(error).to_contain_text("at least 0")
    expect(amount).to_be_focused()
    expect(amount).to_have_attribute("aria-invalid", "true")
    assert "task-field-amount-error" in (amount.get_attribute("aria-describedby") or "")
    expect(page.locator("#task-alert")).to_have_attribute("aria-live", "assertive")
    expect(page.locator("#task-alert")).to_contain_text("at least 0")
    page.screenshot(path=str(shots / "inbox.png"), full_page=True)

    # A valid one, from the keyboard: the task is completed and the run resumes.
    amount.fill("300")
    amount.press("Enter")
    expect(page.locator("#toast")).to_contain_text("completed")
    expect(page.locator("#task-panel")).to_be_hidden()
    expect(page.locator("#tasks tbody")).to_contain_text("No open task")
    with httpx.Client(base_url=inbox_served.url, headers=auth, timeout=10) as http:
        run = _until(
            lambda: (r := http.get("/runs/r-7").json())["status"] == "completed" and r,
            "the run's end",
        )
        assert run["output"] == {"approved": True, "amount": 300, "reason": "late"}
        [done] = http.get("/tasks", params={"status": "completed"}).json()
        assert done["completed_by"] == "ana"
    assert not errors, errors


# A saga undone: its compensations show on the timeline, each saying which step it undoes.
SAGA_APP = """
from parkway import Engine

engine = Engine({url!r})


def reserve(order):
    return {{"hold": f"H-{{order}}"}}


def charge(order):
    return f"P-{{order}}"


def release(hold):
    return "released " + hold["hold"]


def refund(payment):
    return "refunded " + payment


def ship(order):
    raise RuntimeError("no courier")


@engine.workflow()
async def book(ctx, order):
    await ctx.step(reserve, order, name="reserve", compensate=release)
    await ctx.step(charge, order, name="charge", compensate=refund)
    await ctx.step(ship, order, name="ship")
"""


def test_a_sagas_compensations_show_on_the_timeline(browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url = f"sqlite:///{tmp_path / 'saga.db'}"
    write_app(tmp_path, "saga", SAGA_APP, url)
    served = Served(tmp_path, "saga:engine", env={"PARKWAY_API_TOKEN": TOKEN})
    try:
        served.wait_ready()
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=served.url, headers=auth, timeout=10) as http:
            created = http.post("/runs", json={"workflow": "book", "id": "book-1", "input": 7})
            assert created.status_code == 201, created.text
            _until(lambda: http.get("/runs/book-1").json()["status"] == "failed", "the saga")
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(served.url + "/")
        page.fill("#token", TOKEN)
        page.click("#token-form button[type=submit]")
        page.goto(served.url + "/#run/book-1")
        expect(page.locator("#detail-id")).to_have_text("book-1")
        undone = page.locator('#timeline li[data-kind="compensation"]')
        expect(undone).to_have_count(2)
        expect(undone.first).to_contain_text("compensation of step")
        expect(undone.first).to_contain_text("charge")
        expect(undone.first).to_contain_text("refunded P-7")
        expect(undone.last).to_contain_text("reserve")
        expect(undone.last).to_contain_text("released H-7")
        registered = page.locator('#timeline li[data-kind="compensation.registered"]')
        expect(registered).to_have_count(2)
        expect(registered.first).to_contain_text("compensation registered for step")
        page.screenshot(path=str(tmp_path / "saga.png"), full_page=True)
    finally:
        served.kill()


def test_the_fleet_views_events_workers_unserved_runs_and_who_did_what(
    browser: Any, served: Served, shots: Path, tmp_path: Path
) -> None:
    """Events linked to the runs they started and resumed, the live workers with what
    each serves, a run no worker serves marked in the list, and an operator's
    action (by the API token's name) on a run's timeline."""
    import asyncio
    import concurrent.futures

    from playwright.sync_api import expect

    from parkway import Engine

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=served.url, headers=auth, timeout=10) as http:
        started = http.post(
            "/events",
            json={"name": "order.created", "id": "ev-9", "payload": {"id": 9, "sku": "desk"}},
        )
        assert started.status_code == 200, started.text
        assert http.post("/runs", json={"workflow": "approval", "id": "order-1"}).is_success
        _until(lambda: http.get("/runs/order-1").json()["status"] == "parked", "order-1 parked")
        assert http.post("/runs/order-1/pause").is_success
        assert http.post(
            "/events", json={"name": "order.shipped", "id": "ev-10", "payload": {"order": 9}}
        ).json()["resumed"] == ["evt:ev-9:fulfilment"]

    async def start_an_old_version() -> None:
        # A client of a version no worker serves: its run waits, unserved.
        old = Engine(f"sqlite:///{tmp_path / 'shop.db'}", worker=False)

        @old.workflow(name="approval", version="0.9")
        async def approval(ctx: Any, order: Any) -> Any:
            return order

        async with old:
            await old.start("approval", None, id="old-approval")

    # (In a thread of its own: Playwright's sync API holds this thread's event loop.)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, start_an_old_version()).result()

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(served.url + "/?refresh=700")
    page.fill("#token", TOKEN)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#health")).to_have_text("healthy")
    old_row = page.locator('#runs tbody tr[data-run-id="old-approval"]')
    expect(old_row.locator(".badge.unserved")).to_have_text("unserved")
    expect(page.locator('#runs tbody tr[data-run-id="order-1"] .badge.unserved')).to_have_count(0)

    page.click("#tab-events")
    shipped = page.locator('#events tbody tr[data-event-id="ev-10"]')
    expect(shipped.locator('td[data-links="resumed"]')).to_contain_text("evt:ev-9:fulfilment")
    created = page.locator('#events tbody tr[data-event-id="ev-9"]')
    expect(created.locator('td[data-links="started"]')).to_contain_text("evt:ev-9:fulfilment")
    page.screenshot(path=str(shots / "events.png"), full_page=True)
    page.fill("#event-filter", "order.shipped")
    page.press("#event-filter", "Enter")
    expect(page.locator("#events tbody tr")).to_have_count(1)
    shipped.locator('td[data-links="resumed"] a').click()
    expect(page.locator("#detail-id")).to_have_text("evt:ev-9:fulfilment")

    page.click("#tab-workers")
    workers = page.locator("#workers tbody tr")
    expect(workers).to_have_count(1)
    expect(workers.first).to_contain_text("approval 1")
    page.screenshot(path=str(shots / "workers.png"), full_page=True)

    page.goto(served.url + "/#run/order-1")
    operator = page.locator("ol.timeline li.t-operator")
    expect(operator).to_have_count(1)
    expect(operator).to_contain_text("pause")
    expect(operator).to_contain_text("by api")
    assert errors == []
