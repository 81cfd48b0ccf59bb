"""Durable agents: what journaling adds per model request and per tool call.

    python -m benchmarks.agents [--n 200] [--db sqlite|postgres|both]

One pydantic-ai agent on ``FunctionModel`` (no network; the model answers at
once, so what is measured is the durable machinery) runs conversations of three
shapes, one at a time: ``A`` one model request and no tool; ``B`` five model
requests with a tool call after each of the first four; ``C`` two model
requests, the first asking for four tool calls at once. Each conversation runs:

- plain (``agent.run``): the baseline;
- through parkway (``ParkwayAgent`` in a workflow: ``engine.start`` then
  ``handle.result``, one engine with its in-process worker);
- through pydantic-ai's own DBOS integration (``DBOSAgent(agent).run``, which
  starts a DBOS workflow), its tool a ``@DBOS.step`` so that tool calls are
  journaled on both sides. DBOS's system database is on the same backend.

A system's overhead over plain for a shape with ``r`` model requests and ``t``
tool calls is ``base + r*m + t*c``; the three shapes give ``m`` (per model
request), ``c`` (per tool call) and ``base`` (a run's start and end). Printed:
those, in ms, from the medians of each shape, and parkway's against DBOS's; then
the same from the process's CPU time per conversation, which a machine busy
with other work disturbs far less than the wall clock. On PostgreSQL, also what
each sends to the server per model request and per tool call, fitted the same
way: parkway's round trips and statements (its wire, ``parkway.store.postgres.wire``)
and DBOS's statements and commits (SQLAlchemy's engine events).
Targets: parkway's ``m`` ≤ 1/5 of DBOS's, and ≤ 1 ms on SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import DEFAULT_PG_ADMIN, Bench

SHAPES = {"A": (1, 0), "B": (5, 4), "C": (2, 4)}


def scripted(shape: str) -> Callable[..., Any]:
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart

    def model(messages: list[Any], info: Any) -> ModelResponse:
        returned = sum(1 for m in messages for p in m.parts if isinstance(p, ToolReturnPart))
        if shape == "B" and returned < 4:
            return ModelResponse(parts=[ToolCallPart("add", {"a": returned, "b": 1})])
        if shape == "C" and returned == 0:
            return ModelResponse(parts=[ToolCallPart("add", {"a": i, "b": 1}) for i in range(4)])
        return ModelResponse(parts=[TextPart(f"done after {returned} tool calls")])

    return model


def make_agents(name: str, tool: Callable[[int, int], int]) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    agents = {}
    for shape in SHAPES:
        agent = Agent(FunctionModel(scripted(shape)), name=f"{name}{shape}")
        agent.tool_plain(tool, name="add")
        agents[shape] = agent
    return agents


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def timed(
    n: int, systems: dict[str, Callable[[], Awaitable[Any]]]
) -> dict[str, tuple[float, float]]:
    """Each system's median seconds of a call over ``n`` rounds (after a few not
    counted), and its median CPU seconds of a call (the process's, all its threads: a
    machine shared with other work slows the wall clock far more than the CPU a call
    takes). Each round calls every system once, so the machine's drift hits all alike."""
    for _ in range(5):
        for once in systems.values():
            await once()
    took: dict[str, list[float]] = {name: [] for name in systems}
    spent: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(n):
        for name, once in systems.items():
            c0, t0 = time.process_time(), time.perf_counter()
            await once()
            took[name].append(time.perf_counter() - t0)
            spent[name].append(time.process_time() - c0)
    return {
        name: (statistics.median(took[name]), statistics.median(spent[name])) for name in systems
    }


def fit(overhead: dict[str, float]) -> dict[str, float]:
    """``base``, ``m`` and ``c`` (ms) from the three shapes' overheads (s)."""
    a, b, c = (overhead[s] * 1000 for s in ("A", "B", "C"))
    per_request = (b - c) / 3
    per_tool = (c - a - per_request) / 4
    return {"base": a - per_request, "model": per_request, "tool": per_tool}


async def measure(db: str, n: int, pg_admin: str, folder: Path) -> dict[str, Any]:
    from dbos import DBOS
    from pydantic_ai.durable_exec.dbos import DBOSAgent

    from parkway.integrations.pydantic_ai import ParkwayAgent

    bench = Bench(db, folder, pg_admin)
    dbos_db = ""
    try:
        plain = make_agents("plain", add)
        # parkway
        engine = bench.engine()
        # No event stream, as DBOSAgent has none by default: both make plain requests.
        durable = {
            s: ParkwayAgent(a, stream_key=None) for s, a in make_agents("parkway", add).items()
        }
        for shape, agent in durable.items():
            engine.workflow(name=f"conversation{shape}")(_workflow(agent))
        # DBOS, its system database on the same backend
        if db == "postgres":
            import psycopg

            dbos_db = f"dbos_bench_{os.getpid()}"
            with psycopg.connect(pg_admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {dbos_db}")
                conn.execute(f"CREATE DATABASE {dbos_db}")
            dbos_url = f"{pg_admin.rpartition('/')[0]}/{dbos_db}"
        else:
            dbos_url = f"sqlite:///{folder / 'dbos.sqlite'}"
        DBOS(config={"name": "parkway-agents-bench", "system_database_url": dbos_url})
        dbos_add = DBOS.step(name="add")(add)
        dbos_agents = {s: DBOSAgent(a) for s, a in make_agents("dbos", dbos_add).items()}
        DBOS.launch()

        results: dict[str, dict[str, float]] = {"plain": {}, "parkway": {}, "dbos": {}}
        cpu: dict[str, dict[str, float]] = {"plain": {}, "parkway": {}, "dbos": {}}
        async with engine:
            for shape in SHAPES:

                async def run_plain(shape: str = shape) -> Any:
                    return (await plain[shape].run("go")).output

                async def run_parkway(shape: str = shape) -> Any:
                    handle = await engine.start(f"conversation{shape}", "go")
                    return await handle.result(timeout=60)

                async def run_dbos(shape: str = shape) -> Any:
                    return (await dbos_agents[shape].run("go")).output

                expected = await run_plain()
                assert await run_parkway() == expected == await run_dbos(), shape
                figures = await timed(
                    n, {"plain": run_plain, "parkway": run_parkway, "dbos": run_dbos}
                )
                for system, (took, spent) in figures.items():
                    results[system][shape], cpu[system][shape] = took, spent
            sent = await _sent(db, run_parkway_shape(engine), dbos_agents)
        DBOS.destroy()
        over = {
            system: fit({s: results[system][s] - results["plain"][s] for s in SHAPES})
            for system in ("parkway", "dbos")
        }
        over_cpu = {
            system: fit({s: cpu[system][s] - cpu["plain"][s] for s in SHAPES})
            for system in ("parkway", "dbos")
        }
        return {
            "db": db,
            "n": n,
            "median_s": results,
            "overhead_ms": over,
            "cpu_s": cpu,
            "cpu_overhead_ms": over_cpu,
            "sent": sent,
        }
    finally:
        bench.close()
        if dbos_db:
            import psycopg

            with psycopg.connect(pg_admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {dbos_db} WITH (FORCE)")


def run_parkway_shape(engine: Any) -> Callable[[str], Awaitable[Any]]:
    async def run(shape: str) -> Any:
        handle = await engine.start(f"conversation{shape}", "go")
        return await handle.result(timeout=60)

    return run


async def _sent(
    db: str, parkway: Callable[[str], Awaitable[Any]], dbos_agents: dict[str, Any], n: int = 20
) -> dict[str, dict[str, float]]:
    """What each system sends to PostgreSQL (round trips, statements, commits), fitted
    per model request and per tool call as the times are; nothing on SQLite."""
    if db != "postgres":
        return {}
    from sqlalchemy import event
    from sqlalchemy.engine import Engine as SQLAlchemyEngine

    from parkway.store.postgres import wire

    counts = {"parkway round trips": 0, "parkway statements": 0}
    counts |= {"dbos statements": 0, "dbos commits": 0}
    send = wire.send

    async def counted(conn: Any, steps: Any) -> Any:
        counts["parkway round trips"] += 1
        counts["parkway statements"] += len(steps)
        return await send(conn, steps)

    def statement(*_: Any) -> None:
        counts["dbos statements"] += 1

    def commit(*_: Any) -> None:
        counts["dbos commits"] += 1

    per_shape: dict[str, dict[str, float]] = {name: {} for name in counts}
    wire.send = counted
    event.listen(SQLAlchemyEngine, "before_cursor_execute", statement)
    event.listen(SQLAlchemyEngine, "commit", commit)
    try:
        for shape in SHAPES:
            await asyncio.sleep(0.2)  # (the engines' own background work settles)
            for name in counts:
                counts[name] = 0
            for _ in range(n):
                await parkway(shape)
                await dbos_agents[shape].run("go")
            for name, total in counts.items():
                per_shape[name][shape] = total / n
    finally:
        wire.send = send
        event.remove(SQLAlchemyEngine, "before_cursor_execute", statement)
        event.remove(SQLAlchemyEngine, "commit", commit)
    return {
        name: fit({s: v / 1000 for s, v in shapes.items()}) for name, shapes in per_shape.items()
    }


def _workflow(agent: Any) -> Callable[..., Any]:
    async def conversation(ctx: Any, prompt: Any) -> Any:
        return (await agent.run(ctx, prompt)).output

    return conversation


def table(rows: list[dict[str, Any]]) -> str:
    parts = [
        _table(rows, "overhead_ms", "median_s", "the medians of"),
        _table(rows, "cpu_overhead_ms", "cpu_s", "the CPU per conversation (all threads) of"),
    ]
    for row in rows:
        if row.get("sent"):
            lines = [
                f"Sent to the server ({row['db']}), fitted from the three shapes",
                "| what | per model request | per tool call | per run (start, end) |",
                "|------|-------------------|---------------|----------------------|",
            ]
            for name, o in row["sent"].items():
                lines.append(f"| {name} | {o['model']:.2f} | {o['tool']:.2f} | {o['base']:.2f} |")
            parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _table(rows: list[dict[str, Any]], figures: str, plain_key: str, what: str) -> str:
    lines = [
        f"Overhead over the plain agent (FunctionModel), ms, from {what} three "
        "conversation shapes (targets: parkway per model request ≤ 1/5 of DBOS's, ≤ 1 ms "
        "on SQLite)",
        "| backend | system | per model request | per tool call | per run (start, end) "
        "| model request ratio to DBOS |",
        "|---------|--------|-------------------|---------------|----------------------"
        "|-----------------------------|",
    ]
    for row in rows:
        dbos = row[figures]["dbos"]
        for system in ("parkway", "dbos"):
            o = row[figures][system]
            ratio = o["model"] / dbos["model"] if dbos["model"] > 0 else float("nan")
            name = "parkway (ParkwayAgent)" if system == "parkway" else "DBOS (DBOSAgent)"
            lines.append(
                f"| {row['db']} | {name} | {o['model']:.3f} | {o['tool']:.3f} | {o['base']:.3f} "
                f"| {ratio:.2f} |"
            )
    plain = ", ".join(
        f"{row['db']} {s}: {row[plain_key]['plain'][s] * 1000:.3f}" for row in rows for s in SHAPES
    )
    lines.append(f"(plain agent's figures, ms: {plain})")
    for system in ("parkway", "dbos"):
        # Each shape's whole overhead, divided by its operations (requests and tool
        # calls): no subtraction between shapes, so the least disturbed by noise.
        each = ", ".join(
            f"{row['db']} {s}: {ms:.3f} ({ms / sum(SHAPES[s]):.3f} per operation)"
            for row in rows
            for s in SHAPES
            for ms in [(row[plain_key][system][s] - row[plain_key]["plain"][s]) * 1000]
        )
        lines.append(f"({system}'s overhead per conversation, ms: {each})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    parser.add_argument(
        "--pg-url", default=os.environ.get("PARKWAY_BENCH_POSTGRES_URL", DEFAULT_PG_ADMIN)
    )
    args = parser.parse_args(argv)
    if args.db == "both":
        # One process a backend: DBOS is one instance a process.
        rows = []
        for db in ("sqlite", "postgres"):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.agents",
                    "--db",
                    db,
                    "--n",
                    str(args.n),
                    "--pg-url",
                    args.pg_url,
                    "--json",
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    else:
        with tempfile.TemporaryDirectory(prefix="parkway-bench-") as folder:
            rows = [asyncio.run(measure(args.db, args.n, args.pg_url, Path(folder)))]
    if args.json:
        sys.stdout.write(json.dumps(rows[0] if len(rows) == 1 else rows) + "\n")
    else:
        sys.stdout.write(table(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
