"""Restate peer harness: measures Restate on the shapes parkway is measured on.

Run from the project root, one shape per invocation::

    python -m benchmarks.peers.restate_bench --shape steps3|park|wake [--n N] [--inflight K]

Needs the ``restate`` extra (``pip install -e '.[restate]'``: restate-sdk, hypercorn, httpx,
psutil) and npm: on first use the server is installed with
``npm install --prefix benchmarks/.peers @restatedev/restate-server@SERVER_VERSION`` (that
folder is gitignored), and its native binary is run directly. ``--server-bin`` (or
``RESTATE_SERVER_BIN``) points at another restate-server binary instead.

Exactly one line of JSON goes to stdout; every log line goes to stderr. If something needed
cannot be had (a Python package, npm, the registry, the binary), the line is
``{"available": false, "reason": ...}`` and the exit code is 0.

Set-up, fresh for each variant
------------------------------
A new temporary folder holds the server's data dir, the logs, the hypercorn config and the
announcement file; it is removed at the end. ``restate-server`` (single node, all roles,
its default configuration otherwise) listens on TCP only, on three free ports of
127.0.0.1 (node-to-node, admin, ingress), with telemetry off; after start-up the harness
checks that every socket it listens on is a loopback one, or gives up. The SDK app
(``benchmarks.peers.restate_app``) is served by hypercorn on 127.0.0.1 with the settings
the Restate Python SDK ships for it (unbounded HTTP/2 streams and keep-alive), in one
process (``--workers 1``; more are hypercorn worker processes). It is registered through
the admin API (``POST /deployments``), and warmed up (``--warmup`` steps3 calls and a few
awakeables) before any clock starts. The two processes run in their own process groups,
killed at the end (SIGTERM for the server, SIGINT for hypercorn, whose SIGTERM the SDK takes
over, then SIGKILL after 5 s), on error, on SIGTERM/SIGINT and by the watchdog; they also
get SIGKILL if the harness dies (Linux ``PR_SET_PDEATHSIG``). Every run is started, resolved
and awaited through the ingress HTTP API, by a minimal HTTP/1.1 keep-alive client
(``IngressClient``: httpx was the bottleneck, see there); httpx does the admin calls. Every
request is bounded by ``--request-timeout``. The result also has ``listening`` (the sockets
found), ``deployment`` (as the server registered it) and the load average before and after,
since the server, the SDK and this client share the machine's cores.

Variants: how the server talks to the SDK
-----------------------------------------
``bidi`` (the default a Restate user gets from hypercorn): HTTP/2, one bidirectional stream
per invocation attempt; a handler waiting on an awakeable keeps its stream and its coroutine
(the server reports it ``invoked``) until the server's inactivity timeout (1 min by default)
asks it to suspend. ``rr`` (request/response, the deployment registered with
``use_http_11``): HTTP/1.1, one request per attempt; a handler that waits on something not
yet completed suspends at once, ending its request, and resumes in a new request that
replays its journal. Each variant runs on its own fresh server; the best is reported at top
level (``variant``), every variant's figures under ``variants``. Pin one with ``--variant``.

Shapes
------
``steps3`` (default N=1000)
    N invocations of ``BenchSteps/run``, a service handler of 3 trivial ``ctx.run`` steps
    (int -> int -> dict -> int), each one a POST to the ingress that returns the result.
    ``sequential``: one at a time; ``concurrent``: ``--inflight`` (default 100) requests in
    flight. Both are reported (``sequential_wf_per_s``, ``concurrent_wf_per_s`` and their
    ``*_seconds``); ``wf_per_s`` is the better of the two (``mode`` says which).
``park`` (default N=10000)
    N invocations of ``BenchAwake/run`` (``--wait awakeable``: creates an awakeable and
    awaits it) or of the workflow ``BenchPromise`` (``--wait promise``: awaits the durable
    promise ``go``), each started with a ``/send`` POST, ``--inflight`` at a time. The clock
    runs from the first send until all N are parked: for ``rr``, until the server's
    ``sys_invocation_status`` (admin SQL API) shows N suspended; for ``bidi``, whose waiting
    handlers do not suspend for a minute, until all N handlers have announced their
    awakeable (a line each on a side file, written outside the journal, just before they
    wait): ``runs_per_s``. At that point: ``server_rss_mb`` / ``server_peak_rss_mb`` (the
    restate-server process: psutil RSS and VmHWM), ``sdk_rss_mb`` / ``sdk_peak_rss_mb`` (the
    hypercorn process tree), ``rss_mb`` and ``peak_rss_mb`` (their sums), ``server_threads``,
    ``sdk_threads`` and ``threads`` (OS threads, summed), ``data_dir_bytes`` (apparent size of
    every file under the data dir) and ``bytes_per_run`` = (``data_dir_bytes`` - the size
    after warm-up) / N; ``statuses_when_parked`` counts the service's invocations by status
    (the warm-up's completed ones included). Then every run is resolved and awaited
    (``--finish send``, bounded by ``--finish-timeout``), or everything is just shut down.
``wake`` (default N=1000)
    N runs parked as above; then, one run at a time: t0, resolve its awakeable (``POST
    /restate/awakeables/{id}/resolve``) or its promise (``POST /BenchPromise/{key}/signal``,
    itself an invocation of a shared handler), then attach to the invocation (``GET
    .../attach``) and read its result. ``p50_ms``/``p99_ms``/``mean_ms`` (linear interpolation
    between closest ranks). Stops after ``--max-seconds`` of resolving (``n_measured``).
    ``suspended_at_wake_start`` says how many of the runs had suspended by then.

Everything is bounded: ``--park-timeout``, ``--max-seconds``, ``--finish-timeout``,
``--request-timeout``, ``--startup-timeout``, and a ``--timeout`` watchdog that prints what
was measured with ``"error"`` set, kills the processes and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from benchmarks.peers.dbos_bench import Output, latency_stats

if TYPE_CHECKING:
    import httpx

SHAPES = ("steps3", "park", "wake")
DEFAULT_N = {"steps3": 1000, "park": 10000, "wake": 1000}
VARIANTS = ("bidi", "rr")
PRIMARY: dict[str, tuple[str, bool]] = {
    "steps3": ("wf_per_s", True),
    "park": ("runs_per_s", True),
    "wake": ("p50_ms", False),
}
SERVER_VERSION = "1.7.12"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = PROJECT_ROOT / "benchmarks" / ".peers"
APP = "benchmarks.peers.restate_app:app"
ANNOUNCE_ENV = "RESTATE_BENCH_ANNOUNCE"  # the same name as restate_app.ANNOUNCE_ENV
LOOPBACK = "127.0.0.1"
ANNOUNCE_POLL_S = 0.01
SQL_POLL_S = 0.05
KILL_GRACE_S = 5.0
SERVICE = {"awakeable": "BenchAwake", "promise": "BenchPromise"}
PR_SET_PDEATHSIG = 1
NPM_ERROR_MARKS = ("npm error code", "FetchError", "notarget No matching", "EACCES")


def log(msg: str) -> None:
    print(f"[restate_bench] {msg}", file=sys.stderr, flush=True)


class Unavailable(Exception):
    """Something this harness needs cannot be had here: reported, exit 0."""


# --------------------------------------------------------------------------- the server binary


def platform_package() -> str:
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    if system is None or arch is None:
        raise Unavailable(f"no restate-server npm package for {sys.platform}/{platform.machine()}")
    return f"@restatedev/restate-server-{system}-{arch}"


def binary_version(path: Path) -> str:
    try:
        done = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise Unavailable(f"{path} does not run: {e}") from e
    # "restate-server 1.7.12"
    return done.stdout.strip().split()[-1]


def installed_binary(version: str) -> Path | None:
    package_dir = PEERS_DIR / "node_modules" / platform_package()
    binary = package_dir / "bin" / "restate-server"
    try:
        meta = json.loads((package_dir / "package.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("version") != version or not os.access(binary, os.X_OK):
        return None
    return binary


def install_server(version: str) -> Path:
    """``npm install`` the server into benchmarks/.peers, once; returns its native binary."""
    binary = installed_binary(version)
    if binary is not None:
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable(
            "npm is not on PATH: install Node.js and npm to let this harness fetch "
            f"@restatedev/restate-server@{version}, or pass --server-bin"
        )
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    command = [
        npm,
        "install",
        "--prefix",
        str(PEERS_DIR),
        "--no-audit",
        "--no-fund",
        "--ignore-scripts",
        f"@restatedev/restate-server@{version}",
    ]
    log(f"installing the server: {' '.join(command[1:])}")
    env = {**os.environ, "SCARF_ANALYTICS": "false"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    except subprocess.TimeoutExpired as e:
        raise Unavailable(
            "npm install of the Restate server timed out after 600 s "
            "(is the npm registry reachable?)"
        ) from e
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        log("npm install failed:\n" + "\n".join(lines[-30:]))
        key = [ln for ln in lines if any(m in ln for m in NPM_ERROR_MARKS)][:3]
        tail = " | ".join(key or lines[-4:])
        raise Unavailable(
            f"npm install @restatedev/restate-server@{version} failed (exit {done.returncode}; "
            f"is the npm registry reachable?): {tail}"
        )
    binary = installed_binary(version)
    if binary is None:
        raise Unavailable(
            f"npm installed @restatedev/restate-server@{version} but not its native package "
            f"{platform_package()} (an unsupported platform?)"
        )
    return binary


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGKILL when the harness dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return preexec


def kill_group(
    proc: subprocess.Popen[bytes] | None, name: str, grace_s: float, first: int = signal.SIGTERM
) -> None:
    """Signal the child's process group, SIGKILL it after a grace period; never raises."""
    if proc is None:
        return
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = proc.pid  # already gone; its group may still hold children
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, first)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        log(f"{name} still running {grace_s:g}s after {signal.Signals(first).name}: SIGKILL")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(KILL_GRACE_S)


def tree(pid: int) -> list[Any]:
    import psutil  # type: ignore[import-untyped,unused-ignore]

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def peak_rss_bytes(pid: int) -> int | None:
    """VmHWM, the process's peak resident set (Linux only)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def tree_figures(pid: int) -> dict[str, Any]:
    import psutil

    rss = peak = threads = 0
    have_peak = True
    procs = tree(pid)
    for p in procs:
        try:
            rss += p.memory_info().rss
            threads += p.num_threads()
        except psutil.Error:
            continue
        hwm = peak_rss_bytes(p.pid)
        if hwm is None:
            have_peak = False
        else:
            peak += hwm
    mb = 1024.0 * 1024.0
    return {
        "rss_mb": round(rss / mb, 1),
        "peak_rss_mb": round(peak / mb, 1) if have_peak else None,
        "threads": threads,
        "processes": len(procs),
    }


def dir_bytes(path: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of every file under path."""
    apparent = allocated = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name), follow_symlinks=False)
            except OSError:
                continue  # a file rotated away by RocksDB mid-walk
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return apparent, allocated


class Announcements:
    """Reads ``key\\tawakeable-id`` lines that the SDK app appends; keeps the first per key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ids: dict[str, str] = {}
        self._offset = 0
        self._buffer = b""

    def poll(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return len(self.ids)
        self._offset += len(chunk)
        data = self._buffer + chunk
        lines = data.split(b"\n")
        self._buffer = lines.pop()  # an incomplete last line waits for the next poll
        for line in lines:
            key, _, ident = line.decode().partition("\t")
            self.ids.setdefault(key, ident)
        return len(self.ids)


# --------------------------------------------------------------------------- the stack


TMP_PREFIX = "restate_bench_"
OWNER_FILE = "owner.pid"


def new_tmpdir() -> Path:
    path = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
    (path / OWNER_FILE).write_text(str(os.getpid()))
    return path


def sweep_stale_tmpdirs() -> None:
    """Remove the temp dirs of harnesses that were killed too hard to clean up (SIGKILL)."""
    for path in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*"):
        try:
            owner = int((path / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not ours, or just being created
        try:
            os.kill(owner, 0)
            continue  # its harness is alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        log(f"removing {path}, left by harness pid {owner}")
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class Stack:
    """restate-server + the hypercorn-served SDK app, in a fresh temp dir."""

    binary: Path
    variant: str
    workers: int
    tmp: Path = field(default_factory=new_tmpdir)
    server: subprocess.Popen[bytes] | None = None
    sdk: subprocess.Popen[bytes] | None = None
    ports: dict[str, int] = field(default_factory=dict)
    deployment: dict[str, Any] = field(default_factory=dict)
    _stopped: bool = False
    _stop_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def data_dir(self) -> Path:
        return self.tmp / "data"

    @property
    def announce_path(self) -> Path:
        return self.tmp / "announce.tsv"

    @property
    def admin_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['admin']}"

    @property
    def sdk_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['sdk']}"

    def start(self) -> None:
        ports = {name: free_port() for name in ("node", "admin", "ingress", "sdk")}
        if len(set(ports.values())) < len(ports):
            ports = {name: free_port() for name in ports}
        self.ports = ports
        self.data_dir.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RESTATE_")}
        env.update(
            RESTATE_DISABLE_TELEMETRY="true",
            RESTATE_LISTEN_MODE="tcp",
            RESTATE_BIND_IP=LOOPBACK,
            RESTATE_BIND_ADDRESS=f"{LOOPBACK}:{ports['node']}",
            RESTATE_ADVERTISED_ADDRESS=f"http://{LOOPBACK}:{ports['node']}/",
            RESTATE_ADMIN__BIND_ADDRESS=f"{LOOPBACK}:{ports['admin']}",
            RESTATE_INGRESS__BIND_ADDRESS=f"{LOOPBACK}:{ports['ingress']}",
            RESTATE_LOG_DISABLE_ANSI_CODES="true",
        )
        command = [
            str(self.binary),
            "--no-logo",
            "--base-dir",
            str(self.data_dir),
            "--node-name",
            "bench",
            "--cluster-name",
            f"bench-{uuid.uuid4().hex[:8]}",
        ]
        preexec = _die_with_parent()
        with open(self.tmp / "server.log", "wb") as out:
            self.server = subprocess.Popen(
                command,
                cwd=self.tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,
            )
        config = self.tmp / "hypercorn.toml"
        # The Restate Python SDK's recommended hypercorn settings, bound to loopback; one
        # process for --workers 1 (hypercorn's workers = 0), else that many worker processes.
        config.write_text(
            f'bind = ["{LOOPBACK}:{ports["sdk"]}"]\n'
            "h2_max_concurrent_streams = 2147483647\n"
            "keep_alive_max_requests = 2147483647\n"
            "keep_alive_timeout = 2147483647\n"
            f"workers = {0 if self.workers == 1 else self.workers}\n"
            "graceful_timeout = 0.5\n"
            'loglevel = "WARNING"\n'
        )
        sdk_env = {k: v for k, v in os.environ.items() if k != ANNOUNCE_ENV}
        sdk_env[ANNOUNCE_ENV] = str(self.announce_path)
        sdk_env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])
        )
        with open(self.tmp / "sdk.log", "wb") as out:
            self.sdk = subprocess.Popen(
                [sys.executable, "-m", "hypercorn", "--config", str(config), APP],
                cwd=PROJECT_ROOT,
                env=sdk_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,
            )
        log(f"[{self.variant}] server pid {self.server.pid}, sdk pid {self.sdk.pid}, ports {ports}")

    def check_alive(self) -> None:
        for name, proc in (("restate-server", self.server), ("hypercorn", self.sdk)):
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}: {self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 8) -> str:
        path = self.tmp / ("server.log" if name == "restate-server" else "sdk.log")
        try:
            text = path.read_text(errors="replace").strip().splitlines()[-lines:]
        except OSError:
            return "(no log)"
        return " | ".join(text)

    def listening(self) -> list[str]:
        """Every TCP/UDP socket that the server or the SDK listens on, as 'ip:port'."""
        import psutil

        found: list[str] = []
        for proc in (self.server, self.sdk):
            if proc is None:
                continue
            for p in tree(proc.pid):
                try:
                    conns = p.net_connections(kind="inet")
                except psutil.Error:
                    continue
                for c in conns:
                    if c.status == psutil.CONN_LISTEN or (c.type == socket.SOCK_DGRAM):
                        found.append(f"{c.laddr.ip}:{c.laddr.port}")
        return sorted(set(found))

    def figures(self) -> dict[str, Any]:
        assert self.server is not None and self.sdk is not None
        server = tree_figures(self.server.pid)
        sdk = tree_figures(self.sdk.pid)
        apparent, allocated = dir_bytes(self.data_dir)
        figures: dict[str, Any] = {
            "server_rss_mb": server["rss_mb"],
            "server_peak_rss_mb": server["peak_rss_mb"],
            "server_threads": server["threads"],
            "sdk_rss_mb": sdk["rss_mb"],
            "sdk_peak_rss_mb": sdk["peak_rss_mb"],
            "sdk_threads": sdk["threads"],
            "sdk_processes": sdk["processes"],
            "rss_mb": round(server["rss_mb"] + sdk["rss_mb"], 1),
            "threads": server["threads"] + sdk["threads"],
            "data_dir_bytes": apparent,
            "data_dir_alloc_bytes": allocated,
        }
        if server["peak_rss_mb"] is not None and sdk["peak_rss_mb"] is not None:
            figures["peak_rss_mb"] = round(server["peak_rss_mb"] + sdk["peak_rss_mb"], 1)
        return figures

    def stop(self) -> None:
        """Idempotent; a second caller (the watchdog's thread) waits for the first."""
        with self._stop_lock:
            if not self._stopped:
                self._stop()
                self._stopped = True

    def _stop(self) -> None:
        # The server first: hypercorn waits for the server's open HTTP/2 connections to close.
        kill_group(self.server, "restate-server", KILL_GRACE_S)
        # SIGINT: the SDK app takes SIGTERM over from hypercorn (to drain its invocations).
        kill_group(self.sdk, "hypercorn", KILL_GRACE_S, signal.SIGINT)
        for _ in range(10):
            shutil.rmtree(self.tmp, ignore_errors=True)
            if not self.tmp.exists():
                break
            time.sleep(0.1)


LIVE: list[Stack] = []
LIVE_LOCK = threading.Lock()
WATCHDOG_FIRED = threading.Event()


def stop_all() -> None:
    with LIVE_LOCK:
        stacks = list(LIVE)
        LIVE.clear()
    for stack in stacks:
        try:
            stack.stop()
        except Exception as e:  # pragma: no cover - best effort at teardown
            log(f"teardown failed: {e!r}")


# --------------------------------------------------------------------------- ingress client


class IngressClient:
    """A minimal HTTP/1.1 keep-alive client for the measured calls to the ingress.

    httpx costs about 1 ms of CPU per request here (a few hundred requests/s in this
    process on a 2-core machine, against ~10,000/s for this loop): the client would be the
    bottleneck, and would take its CPU from the server and the SDK it measures. httpx still
    does the unmeasured admin calls. One request per connection at a time; a connection
    that errs or times out is dropped, never reused.
    """

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def request(
        self, method: str, path: str, body: bytes = b"", timeout_s: float | None = None
    ) -> tuple[int, bytes]:
        async with asyncio.timeout(timeout_s if timeout_s is not None else self.timeout_s):
            if self._idle:
                conn = self._idle.pop()
            else:
                conn = await asyncio.open_connection(self.host, self.port)
            try:
                status, data, keep = await self._roundtrip(conn, method, path, body)
            except BaseException:
                conn[1].close()
                raise
        if keep:
            self._idle.append(conn)
        else:
            conn[1].close()
        return status, data

    async def _roundtrip(
        self,
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        method: str,
        path: str,
        body: bytes,
    ) -> tuple[int, bytes, bool]:
        reader, writer = conn
        # No content-type without a body: the ingress rejects one for a handler without input.
        typed = "content-type: application/json\r\n" if body else ""
        writer.write(
            f"{method} {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n{typed}"
            f"accept: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        status = int((await reader.readuntil(b"\r\n")).split()[1])
        length: int | None = None
        chunked = False
        keep = True
        while True:
            line = await reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                chunked = "chunked" in value
            elif name == "connection":
                keep = "close" not in value
        if chunked:
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":
                        pass  # trailers
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            return status, b"".join(parts), keep
        if length is None:
            return status, await reader.read(), False
        return status, await reader.readexactly(length), keep

    async def close(self) -> None:
        while self._idle:
            _, writer = self._idle.pop()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


# --------------------------------------------------------------------------- the bench


def expected_steps3(i: int) -> int:
    return (i + 1) * 2


@dataclass
class Bench:
    args: argparse.Namespace
    stack: Stack
    ingress: IngressClient
    admin: httpx.AsyncClient
    partial: dict[str, Any]
    announcements: Announcements
    invocations: dict[str, str] = field(default_factory=dict)  # key -> invocation id

    @property
    def service(self) -> str:
        return SERVICE[self.args.wait]

    # ----------------------------------------------------------------- helpers

    async def retry_until(
        self, what: str, attempt: Callable[[], Awaitable[bool]], timeout_s: float
    ) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            self.stack.check_alive()
            try:
                if await attempt():
                    return
            except httpx.HTTPError as e:
                last = repr(e)
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{what}: not ready after {timeout_s:.0f}s {last}")

    async def sql(self, query: str) -> list[dict[str, Any]]:
        r = await self.admin.post(
            "/query", json={"query": query}, headers={"accept": "application/json"}
        )
        if r.status_code != 200:
            raise RuntimeError(f"admin query failed ({r.status_code}): {r.text[:300]}")
        rows: list[dict[str, Any]] = r.json()["rows"]
        return rows

    async def count_status(self, status: str) -> int:
        rows = await self.sql(
            "SELECT count(*) AS n FROM sys_invocation_status"
            f" WHERE target_service_name = '{self.service}' AND target_handler_name = 'run'"
            f" AND status = '{status}'"
        )
        return int(rows[0]["n"]) if rows else 0

    async def for_each(self, items: Sequence[Any], fn: Callable[[Any], Awaitable[None]]) -> None:
        """Run fn over items with --inflight calls in flight."""
        it = iter(items)

        async def worker() -> None:
            for item in it:
                await fn(item)

        await asyncio.gather(*(worker() for _ in range(min(self.args.inflight, len(items)))))

    # ----------------------------------------------------------------- set-up

    async def setup(self) -> None:
        import httpx

        args = self.args

        async def admin_up() -> bool:
            return (await self.admin.get("/health")).status_code == 200

        async def sdk_up() -> bool:
            # hypercorn answers the SDK's discovery endpoint once the app is loaded.
            async with httpx.AsyncClient(timeout=5) as c:
                r = await c.get(f"{self.stack.sdk_url}/discover")
                return r.status_code in (200, 415)

        await self.retry_until("admin API", admin_up, args.startup_timeout)
        await self.retry_until("SDK app", sdk_up, args.startup_timeout)
        r = await self.admin.post(
            "/deployments",
            json={"uri": self.stack.sdk_url, "use_http_11": self.stack.variant == "rr"},
        )
        if r.status_code not in (200, 201):
            raise RuntimeError(f"registering the deployment failed ({r.status_code}): {r.text}")
        deployment = r.json()
        self.stack.deployment = {"id": deployment.get("id")}
        r = await self.admin.get("/deployments")
        for d in r.json().get("deployments", []):
            if d.get("id") == deployment.get("id"):
                self.stack.deployment.update(
                    protocol_type=d.get("protocol_type"),
                    http_version=d.get("http_version"),
                    sdk_version=d.get("sdk_version"),
                )
        log(f"[{self.stack.variant}] registered {self.stack.deployment}")

        async def ingress_up() -> bool:
            try:
                status, _ = await self.ingress.request("POST", "/BenchSteps/run", b"0", 5.0)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                return False
            return status == 200

        await self.retry_until("ingress", ingress_up, args.startup_timeout)
        listening = self.stack.listening()
        outside = [a for a in listening if not a.startswith(("127.", "::1", "[::1]"))]
        if outside:
            raise RuntimeError(f"refusing to run: listening beyond loopback on {outside}")
        self.partial["listening"] = listening
        await self.warmup()

    async def warmup(self) -> None:
        """Calls that are not measured: first requests, connections, partition leaders."""
        for i in range(self.args.warmup):
            await self.call_steps3(i)
        keys = [f"warm-{i}" for i in range(min(self.args.warmup, 20))]
        await self.for_each(keys, self.start_parker)
        await self.wait_announced(keys, 60.0)
        for i, key in enumerate(keys):
            await self.resolve(key, i)
            await self.attach(key, i)

    # ----------------------------------------------------------------- primitives

    async def call_steps3(self, i: int) -> None:
        status, data = await self.ingress.request("POST", "/BenchSteps/run", dumps(i))
        if status != 200 or loads(data) != expected_steps3(i):
            raise RuntimeError(f"steps3({i}) answered {status}: {data[:300]!r}")

    async def start_parker(self, key: str) -> None:
        if self.args.wait == "awakeable":
            status, data = await self.ingress.request("POST", "/BenchAwake/run/send", dumps(key))
        else:
            status, data = await self.ingress.request("POST", f"/BenchPromise/{key}/run/send")
        answer = loads(data)
        if status not in (200, 202) or not isinstance(answer, dict):
            raise RuntimeError(f"send {key} answered {status}: {data[:300]!r}")
        self.invocations[key] = answer["invocationId"]

    async def resolve(self, key: str, value: int) -> None:
        if self.args.wait == "awakeable":
            path = f"/restate/awakeables/{self.announcements.ids[key]}/resolve"
        else:
            path = f"/BenchPromise/{key}/signal"
        status, data = await self.ingress.request("POST", path, dumps(value))
        if status not in (200, 202):
            raise RuntimeError(f"resolve {key} answered {status}: {data[:300]!r}")

    async def attach(self, key: str, value: int, timeout_s: float | None = None) -> None:
        if self.args.wait == "awakeable":
            url = f"/restate/invocation/{self.invocations[key]}/attach"
        else:
            url = f"/restate/workflow/BenchPromise/{key}/attach"
        status, data = await self.ingress.request("GET", url, timeout_s=timeout_s)
        if status != 200 or loads(data) != value:
            raise RuntimeError(f"attach {key} answered {status}: {data[:300]!r}")

    async def wait_announced(self, keys: Sequence[str], timeout_s: float) -> float:
        """Wait until every key's handler has announced that it waits; returns the time."""
        deadline = time.perf_counter() + timeout_s
        wanted = set(keys)
        while True:
            self.announcements.poll()
            now = time.perf_counter()
            missing = len(wanted - self.announcements.ids.keys())
            if not missing:
                return now
            if now > deadline:
                raise TimeoutError(f"{missing}/{len(keys)} runs not parked after {timeout_s:.0f}s")
            self.stack.check_alive()
            await asyncio.sleep(ANNOUNCE_POLL_S)

    async def wait_count(self, status: str, n: int, timeout_s: float, poll_s: float) -> float:
        deadline = time.perf_counter() + timeout_s
        while True:
            count = await self.count_status(status)
            now = time.perf_counter()
            if count >= n:
                return now
            if now > deadline:
                raise TimeoutError(f"only {count}/{n} runs {status} after {timeout_s:.0f}s")
            self.stack.check_alive()
            await asyncio.sleep(poll_s)

    # ----------------------------------------------------------------- shapes

    async def steps3(self) -> dict[str, Any]:
        n = self.args.n
        latencies: list[float] = []
        t0 = time.perf_counter()
        for i in range(n):
            t = time.perf_counter()
            await self.call_steps3(i)
            latencies.append(time.perf_counter() - t)
        seq = time.perf_counter() - t0
        stats = latency_stats(latencies)
        figures: dict[str, Any] = {
            "sequential_wf_per_s": round(n / seq, 1),
            "sequential_seconds": round(seq, 4),
            "sequential_p50_ms": stats.get("p50_ms"),
            "sequential_p99_ms": stats.get("p99_ms"),
        }
        self.partial.update(figures)
        log(f"[{self.stack.variant}] steps3 sequential: {figures}")

        async def one(i: int) -> None:
            await self.call_steps3(n + i)

        t0 = time.perf_counter()
        await self.for_each(range(n), one)
        conc = time.perf_counter() - t0
        figures.update(
            concurrent_wf_per_s=round(n / conc, 1),
            concurrent_seconds=round(conc, 4),
        )
        mode = "concurrent" if conc < seq else "sequential"
        figures.update(
            mode=mode,
            wf_per_s=figures[f"{mode}_wf_per_s"],
            seconds=figures[f"{mode}_seconds"],
        )
        return figures

    async def park_runs(self, keys: list[str]) -> dict[str, Any]:
        """Start one run per key and wait until all are parked; the parking figures."""
        args = self.args
        t0 = time.perf_counter()
        await self.for_each(keys, self.start_parker)
        sent = time.perf_counter() - t0
        announced = await self.wait_announced(keys, args.park_timeout) - t0
        figures: dict[str, Any] = {
            "send_seconds": round(sent, 4),
            "announced_seconds": round(announced, 4),
        }
        if self.stack.variant == "rr":
            # Parked = durably suspended, as the server's own status table says.
            parked = await self.wait_count(
                "suspended", len(keys), max(1.0, args.park_timeout - announced), SQL_POLL_S
            )
            seconds = parked - t0
            figures["park_point"] = "suspended"
        else:
            seconds = announced
            figures["park_point"] = "waiting on an open stream"
        figures.update(seconds=round(seconds, 4), runs_per_s=round(len(keys) / seconds, 1))
        rows = await self.sql(
            "SELECT status, count(*) AS n FROM sys_invocation_status"
            f" WHERE target_service_name = '{self.service}' AND target_handler_name = 'run'"
            " GROUP BY status"
        )
        figures["statuses_when_parked"] = {str(r["status"]): int(r["n"]) for r in rows}
        return figures

    async def finish(self, keys: list[str], first_value: int = 0) -> dict[str, Any]:
        """Resolve every key and wait until all the service's runs have completed."""
        args = self.args
        t0 = time.perf_counter()
        values = {key: first_value + i for i, key in enumerate(keys)}

        async def go(key: str) -> None:
            await self.resolve(key, values[key])

        await self.for_each(keys, go)
        total = len(self.invocations)
        try:
            await self.wait_count("completed", total, args.finish_timeout, 0.1)
        except TimeoutError as e:
            log(str(e))
        return {
            "finish_s": round(time.perf_counter() - t0, 3),
            "finished_ok": await self.count_status("completed") - args.warmup_parkers,
        }

    async def park(self) -> dict[str, Any]:
        args = self.args
        baseline, _ = dir_bytes(self.stack.data_dir)
        keys = [f"p{i}" for i in range(args.n)]
        figures = await self.park_runs(keys)
        figures.update(self.stack.figures())
        figures.update(
            data_dir_baseline_bytes=baseline,
            bytes_per_run=round((figures["data_dir_bytes"] - baseline) / args.n, 1),
        )
        self.partial.update(figures)
        log(f"[{self.stack.variant}] parked {args.n}: {figures}")
        if args.finish == "send":
            figures.update(await self.finish(keys))
        return figures

    async def wake(self) -> dict[str, Any]:
        args = self.args
        keys = [f"w{i}" for i in range(args.n)]
        parked = await self.park_runs(keys)
        suspended = await self.count_status("suspended")
        self.partial.update(park_seconds=parked["seconds"], suspended_at_wake_start=suspended)
        latencies: list[float] = []
        self.partial["latencies"] = latencies
        start = time.perf_counter()
        for i, key in enumerate(keys):
            remaining = args.max_seconds - (time.perf_counter() - start)
            if remaining <= 0:
                break
            t = time.perf_counter()
            await self.resolve(key, i)
            await self.attach(key, i, timeout_s=min(args.request_timeout, remaining + 5))
            latencies.append(time.perf_counter() - t)
        seconds = time.perf_counter() - start
        figures: dict[str, Any] = {
            "park_seconds": parked["seconds"],
            "park_point": parked["park_point"],
            "suspended_at_wake_start": suspended,
            **latency_stats(latencies),
            "wake_loop_seconds": round(seconds, 3),
            "budget_exhausted": len(latencies) < args.n,
        }
        self.partial.pop("latencies", None)
        self.partial.update(figures)
        rest = keys[len(latencies) :]
        if args.finish == "send" and rest:
            figures.update(await self.finish(rest, len(latencies)))
        return figures


# --------------------------------------------------------------------------- drivers


def versions(binary: Path) -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "peer_version": binary_version(binary),
        "sdk_version": version("restate-sdk"),
        "hypercorn_version": version("hypercorn"),
        "httpx_version": version("httpx"),
    }


async def measure(
    args: argparse.Namespace, binary: Path, variant: str, partial: dict[str, Any]
) -> dict[str, Any]:
    import httpx

    stack = Stack(binary, variant, args.workers)
    with LIVE_LOCK:
        LIVE.append(stack)
    try:
        stack.start()
        ingress = IngressClient(LOOPBACK, stack.ports["ingress"], args.request_timeout)
        async with httpx.AsyncClient(base_url=stack.admin_url, timeout=args.request_timeout) as adm:
            bench = Bench(args, stack, ingress, adm, partial, Announcements(stack.announce_path))
            try:
                await bench.setup()
                runner = {"steps3": bench.steps3, "park": bench.park, "wake": bench.wake}
                figures = await runner[args.shape]()
            finally:
                await ingress.close()
            figures["deployment"] = stack.deployment
            figures["listening"] = partial.get("listening")
            return figures
    except Exception:
        if stack.server is not None:
            log(f"server log: {stack.log_tail('restate-server')}")
            log(f"sdk log: {stack.log_tail('hypercorn')}")
        raise
    finally:
        stack.stop()
        with LIVE_LOCK:
            if stack in LIVE:
                LIVE.remove(stack)


def base_result(args: argparse.Namespace, info: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "available": True,
        "peer": "restate",
        **info,
        "shape": args.shape,
        "n": args.n,
        "inflight": args.inflight,
        "workers": args.workers,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "loadavg_1m_before": round(os.getloadavg()[0], 2),
    }
    if args.shape in ("park", "wake"):
        result.update(wait=args.wait, finish=args.finish)
    return result


def run_variant(
    args: argparse.Namespace, binary: Path, variant: str, partial: dict[str, Any]
) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        figures = asyncio.run(measure(args, binary, variant, partial))
    except Exception as e:
        log(f"[{variant}] failed: {e!r}")
        latencies = partial.pop("latencies", None)
        figures = {**partial, "error": f"{type(e).__name__}: {e}"}
        if latencies:
            figures.update(latency_stats(latencies))
    figures["variant"] = variant
    figures["variant_wall_s"] = round(time.perf_counter() - t0, 3)
    figures["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    log(f"[{variant}] {figures}")
    return figures


def run(args: argparse.Namespace, out: Output) -> int:
    wall0 = time.perf_counter()
    try:
        binary = Path(args.server_bin) if args.server_bin else install_server(args.server_version)
        info = versions(binary)
    except Unavailable as e:
        out.emit({"available": False, "reason": str(e)})
        return 0
    result = base_result(args, info)
    sweep_stale_tmpdirs()
    partial: dict[str, Any] = {}
    current: dict[str, str] = {}

    def watchdog() -> None:
        WATCHDOG_FIRED.set()
        latencies = partial.pop("latencies", None)
        final = {**result, **partial, "variant": current.get("variant")}
        if latencies:
            final.update(latency_stats(latencies))
        final["error"] = f"watchdog: gave up after {args.timeout:.0f}s"
        final["wall_s"] = round(time.perf_counter() - wall0, 3)
        out.emit(final)
        try:
            stop_all()
        finally:
            sys.stderr.flush()
            os._exit(1)

    timer = threading.Timer(args.timeout, watchdog)
    timer.daemon = True
    timer.start()
    metric, higher = PRIMARY[args.shape]
    chosen = VARIANTS if args.variant == "best" else (args.variant,)
    variants: dict[str, dict[str, Any]] = {}
    try:
        for variant in chosen:
            if WATCHDOG_FIRED.is_set():
                break
            current["variant"] = variant
            partial.clear()
            variants[variant] = run_variant(args, binary, variant, partial)
    except (KeyboardInterrupt, SystemExit) as e:
        stop_all()
        latencies = partial.pop("latencies", None)
        final = {**result, **partial, "variant": current.get("variant"), "variants": variants}
        if latencies:
            final.update(latency_stats(latencies))
        final["error"] = f"interrupted ({type(e).__name__})"
        final["wall_s"] = round(time.perf_counter() - wall0, 3)
        out.emit(final)
        return e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 130
    finally:
        timer.cancel()
        stop_all()
    ok = {v: r for v, r in variants.items() if "error" not in r and metric in r}
    if not ok:
        errors = {v: r.get("error") for v, r in variants.items()}
        out.emit(
            {
                **result,
                "error": f"every variant failed: {errors}",
                "variants": variants,
                "wall_s": round(time.perf_counter() - wall0, 3),
            }
        )
        return 1
    best = (max if higher else min)(ok, key=lambda v: float(ok[v][metric]))
    final = {**result, **variants[best]}
    if len(variants) > 1:
        final["selected_by"] = f"{'max' if higher else 'min'} {metric}"
        final["variants"] = variants
    final["wall_s"] = round(time.perf_counter() - wall0, 3)
    out.emit(final)
    return 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.peers.restate_bench",
        description="Measure Restate on parkway's benchmark shapes; print one JSON line.",
    )
    p.add_argument("--shape", required=True, choices=SHAPES)
    p.add_argument("--n", type=int, default=None, help="runs (default: per shape)")
    p.add_argument("--inflight", type=int, default=100, help="requests in flight (concurrent)")
    p.add_argument("--variant", default="best", choices=("best", *VARIANTS))
    p.add_argument(
        "--wait",
        choices=tuple(SERVICE),
        default="awakeable",
        help="park/wake: what a run waits on",
    )
    p.add_argument("--workers", type=int, default=1, help="hypercorn processes for the SDK")
    p.add_argument("--warmup", type=int, default=50, help="unmeasured steps3 calls first")
    p.add_argument("--max-seconds", type=float, default=120.0, help="wake: resolving budget")
    p.add_argument("--park-timeout", type=float, default=600.0, help="bound on parking N runs")
    p.add_argument(
        "--finish",
        choices=("send", "shutdown"),
        default="send",
        help="park/wake: resolve every parked run and await it, or just shut down",
    )
    p.add_argument("--finish-timeout", type=float, default=120.0)
    p.add_argument("--request-timeout", type=float, default=60.0, help="bound on one request")
    p.add_argument("--startup-timeout", type=float, default=60.0)
    p.add_argument("--timeout", type=float, default=1800.0, help="watchdog for the whole run")
    p.add_argument("--server-version", default=SERVER_VERSION, help="npm version to install")
    p.add_argument(
        "--server-bin",
        default=os.environ.get("RESTATE_SERVER_BIN"),
        help="a restate-server binary to use instead of the npm one",
    )
    args = p.parse_args(argv)
    if args.n is None:
        args.n = DEFAULT_N[args.shape]
    if args.n <= 0 or args.inflight <= 0 or args.workers <= 0:
        p.error("--n, --inflight and --workers must be positive")
    if not args.server_version.startswith("1."):
        p.error("--server-version: a 1.x version")
    args.warmup = max(args.warmup, 0)
    args.warmup_parkers = min(args.warmup, 20)
    return args


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = Output()
    out.capture()
    missing = []
    for module in ("restate", "hypercorn", "httpx", "psutil"):
        try:
            __import__(module)
        except Exception as e:
            missing.append(f"{module} ({e!r})")
    if missing:
        out.emit(
            {
                "available": False,
                "reason": f"not importable: {', '.join(missing)}; pip install -e '.[restate]'",
            }
        )
        return 0
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        return run(args, out)
    finally:
        stop_all()


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    if WATCHDOG_FIRED.is_set():
        time.sleep(120)  # the watchdog is cleaning up; it exits the process itself
    os._exit(code)
