"""``parkway demo``: a short, real scenario on SQLite that shows runs parking and resuming.

Three orders are placed. Each reserves stock, charges the customer (the
payment gateway fails once, so the step is retried), then parks until the
warehouse signals ``shipped``. A cart reminder sleeps on a timer. The engine
is then closed and a new one opened on the same file, as after a restart: the
parked runs are all still there. Two orders ship and finish (each through a
``send_receipt`` child run); the third never ships, its wait times out and it
refunds the customer. Everything uses real time and short durations.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from parkway.engine import Engine
from parkway.errors import WaitTimeoutError
from parkway.models import HistoryEntry, Retry, RunInfo, RunStatus
from parkway.replay.context import WorkflowContext

DB_FILE = "parkway-demo.db"

# Short, real durations: the whole demo takes a few seconds. In production the
# warehouse would have "3d" to ship and the reminder would wait a day.
SHIP_WITHIN = "3s"
REMIND_AFTER = "2s"
PAYMENT_BACKOFF = "200ms"

ORDERS: list[tuple[str, dict[str, Any]]] = [
    ("order-1001", {"customer": "ada@example.com", "item": "keyboard", "qty": 1, "amount": 89.0}),
    ("order-1002", {"customer": "alan@example.com", "item": "monitor", "qty": 2, "amount": 398.0}),
    ("order-1003", {"customer": "grace@example.com", "item": "mouse", "qty": 3, "amount": 75.0}),
]
REMINDER: tuple[str, dict[str, Any]] = (
    "cart-77-reminder",
    {"customer": "linus@example.com", "cart": "cart-77"},
)
SHIPPED = {"order-1001": "TRK-501", "order-1002": "TRK-502"}

Say = Callable[[str], None]


class Shop:
    """The outside world the workflows act on, printing what happens to it.

    It outlives the engine restart in the middle of the demo, as a real
    payment gateway or mail server would. Its calls are plain functions:
    ``ctx.step`` runs them in a thread, so a slow call never blocks the worker.
    """

    def __init__(self, say: Say) -> None:
        self.say = say
        self.charge_calls: Counter[str] = Counter()

    def _log(self, order_id: str, text: str) -> None:
        self.say(f"   {order_id:<19} {text}")

    def reserve_stock(self, order_id: str, item: str, qty: int) -> str:
        self._log(order_id, f"reserve_stock    {qty} x {item} reserved")
        return f"RES-{order_id[-4:]}"

    def charge_payment(self, order_id: str, amount: float) -> str:
        self.charge_calls[order_id] += 1
        if self.charge_calls[order_id] == 1:
            self._log(
                order_id,
                f"charge_payment   gateway timed out (attempt 1); retry in {PAYMENT_BACKOFF}",
            )
            raise ConnectionError("payment gateway timed out")
        self._log(order_id, f"charge_payment   {amount:.2f} EUR charged (attempt 2)")
        return f"PAY-{order_id[-4:]}"

    def refund_payment(self, order_id: str, payment: str) -> str:
        self._log(order_id, f"refund_payment   {payment} refunded")
        return f"REF-{order_id[-4:]}"

    def release_stock(self, order_id: str, reservation: str) -> str:
        self._log(order_id, f"release_stock    {reservation} released")
        return "released"

    def email(self, run_id: str, to: str, text: str) -> str:
        self._log(run_id, f"email            to {to}: {text}")
        return f"sent to {to}"


def build_engine(url: str, shop: Shop) -> Engine:
    """An engine with the demo's workflows: ``order``, ``send_receipt``, ``cart_reminder``."""
    engine = Engine(url, concurrency=8, lease="10s")

    @engine.workflow(name="order")
    async def order(ctx: WorkflowContext, data: dict[str, Any]) -> dict[str, Any]:
        oid = ctx.run_id
        reservation = await ctx.step(
            shop.reserve_stock, oid, data["item"], data["qty"], name="reserve_stock"
        )
        payment = await ctx.step(
            shop.charge_payment,
            oid,
            data["amount"],
            name="charge_payment",
            retry=Retry(max_attempts=3, backoff=PAYMENT_BACKOFF),
        )
        try:
            shipment = await ctx.wait_for_signal("shipped", timeout=data["ship_within"])
        except WaitTimeoutError:
            refund = await ctx.step(shop.refund_payment, oid, payment, name="refund_payment")
            await ctx.step(shop.release_stock, oid, reservation, name="release_stock")
            return {"status": "refunded", "refund": refund}
        receipt = await ctx.child(
            "send_receipt",
            {"customer": data["customer"], "order": oid, "tracking": shipment["tracking"]},
            id=f"{oid}-receipt",
        )
        return {"status": "shipped", "tracking": shipment["tracking"], "receipt": receipt}

    @engine.workflow(name="send_receipt")
    async def send_receipt(ctx: WorkflowContext, data: dict[str, Any]) -> str:
        text = f"receipt for {data['order']}, tracking {data['tracking']}"
        return await ctx.step(shop.email, ctx.run_id, data["customer"], text, name="email")

    @engine.workflow(name="cart_reminder")
    async def cart_reminder(ctx: WorkflowContext, data: dict[str, Any]) -> str:
        await ctx.sleep(data["after"])
        await ctx.step(
            shop.email,
            ctx.run_id,
            data["customer"],
            f"you left items in {data['cart']}",
            name="email",
        )
        return "reminded"

    return engine


async def run_demo(folder: str = ".", *, say: Say | None = None) -> None:
    """Play the demo in ``folder`` (its database file is recreated), printing with ``say``."""
    out: Say = say if say is not None else print
    path = _fresh_database(folder)
    url = f"sqlite:///{path}"
    shop = Shop(out)
    began = time.monotonic()
    order_ids = [oid for oid, _ in ORDERS]
    everyone = [*order_ids, REMINDER[0]]

    out(f"parkway demo: durable workflows on SQLite ({path})")
    out("")
    out("1. Three orders are placed and a cart reminder is set")
    engine = build_engine(url, shop)
    await engine.open()
    try:
        for oid, data in ORDERS:
            await engine.start("order", {**data, "ship_within": SHIP_WITHIN}, id=oid)
        rid, reminder = REMINDER
        await engine.start("cart_reminder", {**reminder, "after": REMIND_AFTER}, id=rid)
        await _until(engine, everyone, lambda i: i.status == RunStatus.PARKED)
        out("")
        out("2. Every run is parked: no coroutine, no thread, just rows in the database")
        await _table(engine, out)
    finally:
        await engine.close()

    out("")
    out("3. Restart: the engine is closed and a new Engine opens the same file")
    engine = build_engine(url, shop)
    await engine.open()
    try:
        await _table(engine, out)

        out("")
        out("4. The warehouse ships order-1001 and order-1002 (signal 'shipped')")
        for oid, tracking in SHIPPED.items():
            await engine.signal(oid, "shipped", {"tracking": tracking})
        for oid in SHIPPED:
            await engine.handle(oid).result(timeout=10)
        await _table(engine, out, only=list(SHIPPED))

        out("")
        out(f"5. Timers fire: the reminder after {REMIND_AFTER}, and order-1003, never")
        out(f"   shipped, times out after {SHIP_WITHIN} and refunds the customer")
        await engine.handle(REMINDER[0]).result(timeout=10)
        await engine.handle("order-1003").result(timeout=10)

        out("")
        out("6. Final state")
        await _table(engine, out)

        out("")
        out("7. History of order-1003 (its journal, replayed on every resume)")
        _history(await engine.history("order-1003"), out)
    finally:
        await engine.close()
    out("")
    out(f"Done in {time.monotonic() - began:.1f}s. Inspect it yourself:")
    out(f"   parkway --url sqlite:///{path} runs")
    out(f"   parkway --url sqlite:///{path} show order-1003")


def _fresh_database(folder: str) -> str:
    path = os.path.normpath(os.path.join(folder, DB_FILE))
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return path


async def _until(
    engine: Engine, run_ids: Iterable[str], ready: Callable[[RunInfo], bool], within: float = 10
) -> None:
    deadline = time.monotonic() + within
    pending = list(run_ids)
    while pending:
        pending = [r for r in pending if not ready(await engine.get_run(r))]
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"demo runs {pending} did not get there within {within:g}s")
        await asyncio.sleep(0.02)


async def _table(engine: Engine, out: Say, only: list[str] | None = None) -> None:
    runs = sorted(await engine.list_runs(), key=lambda r: r.id)
    if only is not None:
        runs = [r for r in runs if r.id in only or r.parent_id in only]
    out(f"   {'RUN':<24} {'WORKFLOW':<14} {'STATUS':<10} WAITING FOR / RESULT")
    for run in runs:
        if run.status == RunStatus.COMPLETED:
            detail = _short(run.output)
        elif run.status == RunStatus.FAILED:
            detail = str(run.error)
        else:
            detail = _waiting_for(await engine.history(run.id))
        out(f"   {run.id:<24} {run.workflow:<14} {run.status.value:<10} {detail}")


def _waiting_for(history: list[HistoryEntry]) -> str:
    pending = [e for e in history if e.status == "pending"]
    if not pending:
        return "-"
    entry = pending[-1]
    if entry.kind == "signal":
        timeout = entry.result.get("timeout") if isinstance(entry.result, dict) else None
        within = f" (timeout {timeout:g}s)" if isinstance(timeout, int | float) else ""
        return f"signal {entry.name!r}{within}"
    if entry.kind == "sleep":
        return "a timer (ctx.sleep)"
    if entry.kind == "child.result":
        return f"child run {entry.name}"
    if entry.kind == "step":
        return f"retry of step {entry.name!r}"
    return f"{entry.kind} {entry.name}"


def _history(history: list[HistoryEntry], out: Say) -> None:
    out(f"   {'POS':<4} {'KIND':<13} {'NAME':<15} {'STATUS':<7} RESULT")
    for e in history:
        result = str(e.error) if e.error is not None else _short(e.result)
        out(f"   {e.position:<4} {e.kind:<13} {e.name:<15} {e.status:<7} {result}")


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_short(v)}" for k, v in value.items())
    return str(value)
