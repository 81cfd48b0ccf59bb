"""The Restate server and the SDK app's hypercorn, as one stack in a fresh temp dir.

Part of the Restate adapter (``benchmarks.peers.restate_bench``): installing the
server with npm, starting both processes on loopback ports, their figures, stopping
them (by process group, with the harness's helpers in ``benchmarks.procs``).
"""

from __future__ import annotations

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.procs import (
    LOOPBACK,
    PROJECT_ROOT,
    die_with_parent,
    dir_bytes,
    free_port,
    kill_group,
    logger,
    tree,
    tree_figures,
)

PEERS_DIR = PROJECT_ROOT / "benchmarks" / ".peers"
APP = "benchmarks.peers.restate_app:app"
ANNOUNCE_ENV = "RESTATE_BENCH_ANNOUNCE"  # the same name as restate_app.ANNOUNCE_ENV
KILL_GRACE_S = 5.0
NPM_ERROR_MARKS = ("npm error code", "FetchError", "notarget No matching", "EACCES")

log = logger("restate_bench")


class Unavailable(Exception):
    """Something this harness needs cannot be had here: reported, exit 0."""


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
        preexec = die_with_parent()
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
        kill_group(self.server, "restate-server", KILL_GRACE_S, log=log)
        # SIGINT: the SDK app takes SIGTERM over from hypercorn (to drain its invocations).
        kill_group(self.sdk, "hypercorn", KILL_GRACE_S, signal.SIGINT, log)
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
