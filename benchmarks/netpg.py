"""PostgreSQL across a network: a namespace, a veth pair, a delay, and a TCP proxy.

The machine's PostgreSQL listens on 127.0.0.1 only, and is not ours to reconfigure.
So the benchmark processes run in a network namespace of their own, joined to the
machine's by a veth pair, and reach the server through a small asyncio TCP proxy
that this module starts on the machine's end of the pair and that forwards to
127.0.0.1:5432. The round trip is lengthened by one of:

* ``netem`` (the default): ``tc qdisc … netem delay RTT/2`` on both ends of the
  pair, so every packet in each direction waits half the round trip in the kernel;
  the proxy only forwards;
* ``proxy``: the proxy holds each chunk it reads for RTT/2 before writing it on,
  in order, in each direction (for kernels without ``sch_netem``). Its timers are
  ``select()``'s (microseconds; asyncio's default ``epoll`` selector sleeps in whole
  milliseconds) with the process's timer slack set to 1 ns; a chunk is never
  written before its time, so what the timers overshoot by (tens of µs, more on
  a busy machine) adds to the round trip, and the RTT check shows it.

``measure_rtt`` times ``SELECT 1`` round trips through the same path (from inside
the namespace), so the table prints the round trip the benchmark really got.
Namespaces, links and the proxy are removed on the way out, also when a run
fails, on SIGTERM, at exit, and (for a runner that was SIGKILLed) by the next
run, which removes namespaces named after a process that no longer exists.

Command line (used by the runner; each prints one line)::

    python -m benchmarks.netpg proxy --listen HOST:0 --target 127.0.0.1:5432 [--delay-ms D]
    python -m benchmarks.netpg rtt --url postgresql://... [--n 500]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import ctypes
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import orjson

from benchmarks.harness import latency

PREFIX = "pwbench-"  # namespaces made by this module: PREFIX + the runner's pid


class Unavailable(Exception):
    """This machine cannot give the benchmark its network (the reason is the message)."""


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def _must(*command: str) -> None:
    done = _run(*command)
    if done.returncode:
        error = (done.stderr or done.stdout).strip().splitlines()
        said = error[-1].rstrip(".") if error else f"exit {done.returncode}"
        raise Unavailable(f"`{' '.join(command)}` failed: {said}")


def remove_stale() -> None:
    """Remove the namespaces of runners that died without cleaning up (their veths go too)."""
    listed = _run("ip", "netns", "list")
    for line in listed.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX) :]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _run("ip", "netns", "del", name)


class Netns:
    """A namespace joined to this one by a veth pair; ``exec`` runs commands inside it."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.name = f"{PREFIX}{pid}"
        self.host_if, self.ns_if = f"pwb{pid}h", f"pwb{pid}n"
        # A /30 of 10.213.0.0/16 named by the pid: concurrent runners do not collide.
        base = (pid % 16384) * 4
        self.host_ip = f"10.213.{base // 256}.{base % 256 + 1}"
        self.ns_ip = f"10.213.{base // 256}.{base % 256 + 2}"
        self._up = False
        self.delay_kind = "none"

    @property
    def exec(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def up(self) -> None:
        """Create the namespace and the pair, or raise Unavailable (leaving nothing behind)."""
        if shutil.which("ip") is None:
            raise Unavailable("no `ip` command (install iproute2: apt-get install iproute2)")
        remove_stale()
        atexit.register(self.down)
        self._up = True
        try:
            _must("ip", "netns", "add", self.name)
            _must("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _must("ip", "link", "set", self.ns_if, "netns", self.name)
            _must("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
            _must("ip", "link", "set", self.host_if, "up")
            _must(*self.exec, "ip", "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
            _must(*self.exec, "ip", "link", "set", self.ns_if, "up")
            _must(*self.exec, "ip", "link", "set", "lo", "up")
        except Unavailable:
            self.down()
            raise

    def check_netem(self) -> None:
        """Raise Unavailable unless ``tc … netem`` works on this pair."""
        if shutil.which("tc") is None:
            raise Unavailable("no `tc` command (install iproute2: apt-get install iproute2)")
        self.set_delay(0.05)
        self.set_delay(0.0)

    def set_delay(self, one_way_ms: float) -> None:
        """netem delay on both ends (each direction waits ``one_way_ms``); 0 removes it."""
        for prefix, dev in (([], self.host_if), (self.exec, self.ns_if)):
            if one_way_ms <= 0:
                _run(*prefix, "tc", "qdisc", "del", "dev", dev, "root")
                continue
            _must(
                *prefix,
                *("tc", "qdisc", "replace", "dev", dev, "root", "netem"),
                *("delay", f"{one_way_ms * 1000:.0f}us", "limit", "100000"),
            )
        self.delay_kind = "netem" if one_way_ms > 0 else "none"

    def down(self) -> None:
        if not self._up:
            return
        self._up = False
        _run("ip", "link", "del", self.host_if)  # (deletes its peer too)
        _run("ip", "netns", "del", self.name)


class Proxy:
    """``python -m benchmarks.netpg proxy`` in a process of its own (it dies with us)."""

    def __init__(self, listen_host: str, target: tuple[str, int], delay_ms: float) -> None:
        command = [
            sys.executable,
            "-m",
            "benchmarks.netpg",
            "proxy",
            "--listen",
            f"{listen_host}:0",
            "--target",
            f"{target[0]}:{target[1]}",
            "--delay-ms",
            str(delay_ms),
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, text=True, preexec_fn=_die_with_parent
        )
        atexit.register(self.stop)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        if len(line) != 2 or line[0] != "listening":
            self.stop()
            raise Unavailable(f"the proxy did not start (said {' '.join(line)!r})")
        self.host, self.port = listen_host, int(line[1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def terminate_cleanly() -> None:
    """SIGTERM and SIGHUP raise SystemExit, so that ``finally`` and atexit clean up."""

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


def measure_rtt(prefix: Sequence[str], url: str, n: int = 500) -> dict[str, Any]:
    """``SELECT 1`` round trips through the path, from inside the namespace (``prefix``)."""
    command = [*prefix, sys.executable, "-m", "benchmarks.netpg", "rtt", "--url", url]
    done = subprocess.run([*command, "--n", str(n)], capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = " | ".join(done.stderr.strip().splitlines()[-2:])
        return {"available": False, "reason": f"rtt check failed: {tail}"}
    result: dict[str, Any] = orjson.loads(lines[-1])
    return result


# -- the proxy ----------------------------------------------------------------------------


class _Side(asyncio.Protocol):
    """One connection of a proxied pair: what it receives is written, delayed, to its peer."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self._queue: deque[tuple[float, bytes]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._early: list[bytes] = []  # received before the peer's connection was made
        self._lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def attach(self, peer: _Side) -> None:
        self.peer = peer
        for data in self._early:
            self._forward(data)
        self._early.clear()

    def data_received(self, data: bytes) -> None:
        if self.peer is None or self.peer.transport is None:
            self._early.append(data)
        else:
            self._forward(data)

    def _forward(self, data: bytes) -> None:
        assert self.peer is not None and self.peer.transport is not None
        if self.delay <= 0:
            self.peer.transport.write(data)
            return
        loop = asyncio.get_running_loop()
        self._queue.append((loop.time() + self.delay, data))
        if self._timer is None:
            self._arm(loop)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = loop.call_at(self._queue[0][0], self._flush)

    def _flush(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        assert self.peer is not None and self.peer.transport is not None
        while self._queue and self._queue[0][0] <= now:
            self.peer.transport.write(self._queue.popleft()[1])
        if self._queue:
            self._arm(loop)
        elif self._lost:
            self.peer.transport.close()

    def pause_writing(self) -> None:  # our peer reads faster than we can write: slow it
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self.peer is not None and self.peer.transport is not None and not self._queue:
            self.peer.transport.close()


async def _serve_proxy(listen: tuple[str, int], target: tuple[str, int], delay_ms: float) -> None:
    loop = asyncio.get_running_loop()
    one_way = delay_ms / 2000.0 if delay_ms > 0 else 0.0  # delay_ms is the round trip's
    connecting: set[asyncio.Task[None]] = set()

    def accepted() -> _Side:
        client = _Side(one_way)

        async def connect() -> None:
            try:
                _, server = await loop.create_connection(lambda: _Side(one_way), *target)
            except OSError:
                if client.transport is not None:
                    client.transport.close()
                return
            server.peer = client
            client.attach(server)

        task = loop.create_task(connect())
        connecting.add(task)
        task.add_done_callback(connecting.discard)
        return client

    srv = await loop.create_server(accepted, *listen)
    port = srv.sockets[0].getsockname()[1]
    print(f"listening {port}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    srv.close()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def proxy_main(args: argparse.Namespace) -> int:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(29, 1)  # PR_SET_TIMERSLACK: 1 ns, not 50 µs
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    try:
        loop.run_until_complete(
            _serve_proxy(_address(args.listen), _address(args.target), args.delay_ms)
        )
    finally:
        loop.close()
    return 0


def rtt_main(args: argparse.Namespace) -> int:
    import psycopg

    with psycopg.connect(args.url, autocommit=True, connect_timeout=10) as conn:
        for _ in range(20):
            conn.execute("SELECT 1").fetchone()
        samples = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            samples.append(time.perf_counter() - t0)
            time.sleep(0.001)  # spaced, as a workload's round trips are, not back to back
    figures = latency(samples)
    figures["min_ms"] = round(min(samples) * 1000, 3)
    sys.stdout.write(orjson.dumps(figures).decode() + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    proxy = sub.add_parser("proxy", help="forward TCP from --listen to --target")
    proxy.add_argument("--listen", required=True, help="HOST:PORT (PORT 0: any)")
    proxy.add_argument("--target", required=True, help="HOST:PORT")
    proxy.add_argument("--delay-ms", type=float, default=0.0, help="round trip to add, ms")
    rtt = sub.add_parser("rtt", help="time SELECT 1 round trips; one line of JSON")
    rtt.add_argument("--url", required=True)
    rtt.add_argument("--n", type=int, default=500)
    args = parser.parse_args(argv)
    return proxy_main(args) if args.command == "proxy" else rtt_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
