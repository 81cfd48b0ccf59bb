"""Streams: items written from a step and read live by one reader, parkway against DBOS.

Run from the project root::

    python -m benchmarks.streams [--n 2000] [--paced 300] [--pace-ms 2] [--db sqlite,postgres]

Every measurement runs in a child process of its own on a fresh database (a file in a
new temporary folder for SQLite; a new database on the PostgreSQL server named by
``--pg-admin``, dropped at the end), and the table printed at the end puts each of
parkway's figures beside DBOS's, measured in this same run, with the ratio.

Shapes, for each engine and database
    ``burst``: one workflow whose one step writes ``--n`` items to stream ``s`` as fast
    as the writer allows, while one reader in the same process follows the stream from
    before the first write. ``items_per_s`` = n / (last item read - first item written);
    ``p50_ms``/``p99_ms``: each item's write-to-read latency (``time.perf_counter`` in
    the item at its write, read again when the reader gets it), queueing included.
    parkway's step writes without awaiting (``unawaited``: the writes that come while
    one commits share the next commit) and awaiting each write (``awaited``: a commit
    per item, as DBOS's ``write_stream`` does); the table shows both.
    ``paced``: ``--paced`` items, one every ``--pace-ms``: the write-to-read latency of
    an item when the reader is waiting for it (the wake-up path, not a queue).
    ``sse`` (parkway, SQLite only): ``paced`` through ``parkway serve`` in a child
    process, read over ``GET /runs/{id}/streams/s`` by an httpx client here; latency
    by ``time.time()`` (one machine's clock) from the step's write to the event parsed.

DBOS 3.4 (``pip install -e '.[bench]'``): a sync workflow whose ``@DBOS.step`` calls
``DBOS.write_stream`` (each write a transaction of its own), read by
``DBOS.read_stream`` (its stream listener: LISTEN/NOTIFY on PostgreSQL; on SQLite it
polls). Its polling interval is set to its least, 1 ms (``--dbos-poll``; DBOS's default
is 1 s, which puts its SQLite reader ~0.5 s behind): DBOS at its best. Otherwise its
defaults. If DBOS cannot be imported its rows say so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.harness import DEFAULT_PG_ADMIN, latency

KEY = "s"


# -- the children ------------------------------------------------------------------------------


def figures(written: list[float], read: list[float]) -> dict[str, Any]:
    """Throughput and latency of items written at ``written`` and read at ``read``."""
    span = read[-1] - written[0]
    out = latency([r - w for w, r in zip(written, read, strict=True)])
    out.update(n=len(read), items_per_s=round(len(read) / span, 1) if span > 0 else None)
    return out


async def parkway_child(url: str, n: int, pace: float, awaited: bool) -> dict[str, Any]:
    from parkway import Engine, step_context

    engine = Engine(url)

    async def writer(n: int, pace: float, awaited: bool) -> int:
        ctx = step_context()
        for i in range(n):
            write = ctx.write_stream(KEY, {"i": i, "t": time.perf_counter()})
            if awaited or pace:
                await write
            if pace:
                await asyncio.sleep(pace)
        return n

    @engine.workflow()
    async def streamed(ctx: Any, args: dict[str, Any]) -> int:
        return int(await ctx.step(writer, args["n"], args["pace"], args["awaited"]))

    written, read = [], []
    async with engine:
        handle = await engine.start("streamed", {"n": n, "pace": pace, "awaited": awaited})
        async for item in handle.stream(KEY):
            read.append(time.perf_counter())
            written.append(item.value["t"])
            assert item.value["i"] == len(read) - 1
        assert await handle.result(timeout=60) == n
    return figures(written, read)


def dbos_child(url: str, n: int, pace: float, poll: float) -> dict[str, Any]:
    try:
        from dbos import DBOS, DBOSConfig
    except ImportError as exc:
        return {"available": False, "reason": f"dbos cannot be imported: {exc}"}

    @DBOS.step()
    def writer(n: int, pace: float) -> int:
        for i in range(n):
            DBOS.write_stream(KEY, {"i": i, "t": time.perf_counter()})
            if pace:
                time.sleep(pace)
        return n

    @DBOS.workflow()
    def streamed(n: int, pace: float) -> int:
        done = writer(n, pace)
        DBOS.close_stream(KEY)
        return done

    config: DBOSConfig = {
        "name": "parkway-streams-bench",
        "system_database_url": url,
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": poll,
    }
    DBOS(config=config)
    DBOS.launch()
    try:
        handle = DBOS.start_workflow(streamed, n, pace)
        written, read = [], []
        for value in DBOS.read_stream(handle.workflow_id, KEY):
            read.append(time.perf_counter())
            written.append(value["t"])
            assert value["i"] == len(read) - 1
        assert handle.get_result() == n
    finally:
        DBOS.destroy()
    return {**figures(written, read), "poll_s": poll}


SSE_APP = """
import asyncio, time
from parkway import Engine, step_context

engine = Engine({url!r})


async def writer(n, pace):
    ctx = step_context()
    for i in range(n):
        await ctx.write_stream("s", {{"i": i, "t": time.time()}})
        await asyncio.sleep(pace)
    return n


@engine.workflow()
async def streamed(ctx, args):
    return await ctx.step(writer, args["n"], args["pace"])
"""


def sse_child(url: str, n: int, pace: float, folder: Path) -> dict[str, Any]:
    (folder / "sse_app.py").write_text(textwrap.dedent(SSE_APP.format(url=url)))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("PARKWAY_URL", "PARKWAY_API_TOKEN")}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "parkway",
            "serve",
            "sse_app:engine",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        return asyncio.run(_sse_read(port, n, pace))
    finally:
        server.terminate()
        server.wait(timeout=30)


async def _sse_read(port: int, n: int, pace: float) -> dict[str, Any]:
    import httpx

    written, read = [], []
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        for _ in range(600):
            with contextlib.suppress(httpx.TransportError):
                if (await http.get("/healthz")).status_code == 200:
                    break
            await asyncio.sleep(0.05)
        created = await http.post(
            "/runs", json={"workflow": "streamed", "input": {"n": n, "pace": pace}}
        )
        run_id = created.json()["id"]
        async with http.stream("GET", f"/runs/{run_id}/streams/{KEY}") as response:
            async for line in response.aiter_lines():
                if line.startswith("event: end"):
                    break
                if line.startswith("data: "):
                    read.append(time.time())
                    written.append(json.loads(line[6:])["value"]["t"])
    return figures(written, read)


# -- the runner --------------------------------------------------------------------------------


class Database:
    """A fresh database for one child: a SQLite file, or a PostgreSQL database."""

    def __init__(self, kind: str, pg_admin: str, driver: str) -> None:
        self.kind, self.pg_admin, self.name = kind, pg_admin, ""
        self.folder = Path(tempfile.mkdtemp(prefix="streams_bench_"))
        if kind == "sqlite":
            self.url = f"sqlite:///{self.folder / 'bench.db'}"
            return
        import psycopg

        self.name = f"streams_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.name}")
        base = pg_admin.rpartition("/")[0]
        if driver == "dbos":  # (SQLAlchemy's URL names its driver)
            base = base.replace("postgresql://", "postgresql+psycopg://", 1)
        self.url = f"{base}/{self.name}"

    def drop(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.name:
            import psycopg

            with psycopg.connect(self.pg_admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def child(args: argparse.Namespace, engine: str, db: str, shape: str, *extra: str) -> Any:
    """One measurement in a child process on a fresh database: its figures."""
    database = Database(db, args.pg_admin, engine)
    n = args.n if shape == "burst" else args.paced
    pace = 0.0 if shape == "burst" else args.pace_ms / 1000
    command = [
        sys.executable,
        "-m",
        "benchmarks.streams",
        "--child",
        engine,
        "--url",
        database.url,
        "--n",
        str(n),
        "--pace",
        str(pace),
        "--folder",
        str(database.folder),
        "--dbos-poll",
        str(args.dbos_poll),
        *extra,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    finally:
        database.drop()
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr or "no output").strip().splitlines()[-1]}
    return json.loads(lines[-1])


def cell(figures: Any, name: str) -> str:
    if not isinstance(figures, dict) or figures.get(name) is None:
        return (figures or {}).get("error") or (figures or {}).get("reason") or "-"
    return f"{figures[name]:,}"


def ratio(ours: Any, theirs: Any, name: str, higher_better: bool) -> str:
    try:
        a, b = float(ours[name]), float(theirs[name])
    except (KeyError, TypeError, ValueError):
        return "-"
    if a == 0 or b == 0:
        return "-"
    return f"{(a / b if higher_better else b / a):.1f}x"


def runner(args: argparse.Namespace) -> None:
    rows: list[tuple[str, str, Any, Any, str, bool]] = []
    for db in args.db.split(","):
        burst = child(args, "parkway", db, "burst")
        burst_awaited = child(args, "parkway", db, "burst", "--awaited")
        paced = child(args, "parkway", db, "paced", "--awaited")
        dbos_burst = child(args, "dbos", db, "burst")
        dbos_paced = child(args, "dbos", db, "paced")
        print(f"{db}: parkway burst {burst}", file=sys.stderr)
        print(f"{db}: parkway burst awaited {burst_awaited}", file=sys.stderr)
        print(f"{db}: parkway paced {paced}", file=sys.stderr)
        print(f"{db}: dbos burst {dbos_burst}", file=sys.stderr)
        print(f"{db}: dbos paced {dbos_paced}", file=sys.stderr)
        rows += [
            (db, "burst items/s (unawaited)", burst, dbos_burst, "items_per_s", True),
            (db, "burst items/s (awaited)", burst_awaited, dbos_burst, "items_per_s", True),
            (db, "burst p50 ms (awaited)", burst_awaited, dbos_burst, "p50_ms", False),
            (db, "burst p99 ms (awaited)", burst_awaited, dbos_burst, "p99_ms", False),
            (
                db,
                "burst p50 ms (unawaited, all queued at once)",
                burst,
                dbos_burst,
                "p50_ms",
                False,
            ),
            (db, "paced p50 ms", paced, dbos_paced, "p50_ms", False),
            (db, "paced p99 ms", paced, dbos_paced, "p99_ms", False),
        ]
        if db == "sqlite":
            sse = child(args, "sse", db, "paced")
            print(f"{db}: parkway sse {sse}", file=sys.stderr)
            rows += [
                (db, "SSE paced p50 ms", sse, dbos_paced, "p50_ms", False),
                (db, "SSE paced p99 ms", sse, dbos_paced, "p99_ms", False),
            ]
    header = ("db", "figure", "parkway", "DBOS 3.4", "parkway vs DBOS")
    table = [header] + [
        (db, label, cell(ours, name), cell(theirs, name), ratio(ours, theirs, name, better))
        for db, label, ours, theirs, name, better in rows
    ]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    print(
        f"streams: burst n={args.n}, paced n={args.paced} every {args.pace_ms} ms "
        "(ratio > 1: parkway better)"
    )
    for i, row in enumerate(table):
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="items of a burst")
    parser.add_argument("--paced", type=int, default=300, help="items of a paced run")
    parser.add_argument("--pace-ms", type=float, default=2.0)
    parser.add_argument("--db", default="sqlite,postgres")
    parser.add_argument("--pg-admin", default=os.environ.get("PARKWAY_BENCH_PG", DEFAULT_PG_ADMIN))
    parser.add_argument(
        "--dbos-poll",
        type=float,
        default=0.001,
        help="DBOS's polling interval (s); its default is 1, its least (and best) 0.001",
    )
    parser.add_argument("--child", choices=["parkway", "dbos", "sse"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--pace", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--awaited", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "parkway":
        print(json.dumps(asyncio.run(parkway_child(args.url, args.n, args.pace, args.awaited))))
    elif args.child == "dbos":
        print(json.dumps(dbos_child(args.url, args.n, args.pace, args.dbos_poll)))
    elif args.child == "sse":
        print(json.dumps(sse_child(args.url, args.n, args.pace, Path(args.folder))))
    else:
        runner(args)


if __name__ == "__main__":
    main()
