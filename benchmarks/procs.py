"""The harness's side of processes: spawning, stopping and measuring them, and the
one-JSON-line protocol every benchmark process (ours and the peers') speaks.

A peer harness (``benchmarks.peers``) is an adapter: it says how to run the peer's
workload; the rest is here. It prints exactly one JSON line on stdout (``Output``),
logs to stderr (``logger``), runs each variant of a shape (in a child process of its
own, ``run_child``, or in-process) and reports the best (``best_variant``), under a
watchdog (``watchdog``) that prints what was measured if the run hangs.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

PROJECT_ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"
PR_SET_PDEATHSIG = 1


def logger(tag: str) -> Callable[[str], None]:
    """A log function writing ``[tag] message`` lines to stderr (stdout is the JSON's)."""

    def log(msg: str) -> None:
        print(f"[{tag}] {msg}", file=sys.stderr, flush=True)

    return log


class Output:
    """Owns the real stdout, so that exactly one JSON line is ever written to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._emitted = False
        self._stream: TextIO = sys.stdout

    def capture(self) -> None:
        """Keep a private handle on stdout and point fd 1 at stderr for everyone else."""
        sys.stdout.flush()
        self._stream = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)

    def emit(self, obj: dict[str, Any]) -> bool:
        with self._lock:
            if self._emitted:
                return False
            self._emitted = True
            self._stream.write(json.dumps(obj) + "\n")
            self._stream.flush()
            return True


def last_json(stdout: str) -> dict[str, Any] | None:
    """The last JSON object line a benchmark process printed, or None."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        return None
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def python_env() -> dict[str, str]:
    """This environment, with the project root first on PYTHONPATH (``benchmarks.*``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    return env


def run_child(
    module: str, argv: Sequence[str], timeout: float, log: Callable[[str], None]
) -> dict[str, Any]:
    """``python -m module argv`` from the project root; its JSON line, or an ``error``."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", module, *argv],
            stdout=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
            env=python_env(),
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"available": True, "error": "child process timed out"}
    found = last_json(proc.stdout)
    if found is None:
        return {"error": f"child exited {proc.returncode} without output"}
    log(f"{module}: {found}")
    return found


def best_variant(
    variants: dict[str, dict[str, Any]], metric: str, higher: bool
) -> tuple[str | None, dict[str, dict[str, Any]]]:
    """The variant with the best ``metric`` among those that measured it, and those."""
    ok = {v: r for v, r in variants.items() if "error" not in r and metric in r}
    if not ok:
        return None, ok
    best = (max if higher else min)(ok, key=lambda v: float(ok[v][metric]))
    return best, ok


def watchdog(seconds: float, fire: Callable[[], None]) -> threading.Timer:
    """Call ``fire`` (which should emit what was measured and exit) after ``seconds``."""
    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def die_with_parent() -> Callable[[], None] | None:
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
    proc: subprocess.Popen[bytes] | None,
    name: str,
    grace_s: float,
    first: int = signal.SIGTERM,
    log: Callable[[str], None] | None = None,
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
        if log is not None:
            log(f"{name} still running {grace_s:g}s after {signal.Signals(first).name}: SIGKILL")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace_s)


def tree(pid: int) -> list[Any]:
    """The process and its descendants (psutil processes; empty once it is gone)."""
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
    """RSS, peak RSS, threads and processes of a process tree, summed."""
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


def own_figures() -> dict[str, Any]:
    """This process's OS threads and RSS, by psutil (nothing if it is not installed)."""
    try:
        import psutil
    except ImportError:
        return {}
    proc = psutil.Process()
    return {
        "os_threads": proc.num_threads(),
        "rss_mb": round(proc.memory_info().rss / (1024.0 * 1024.0), 1),
    }


def dir_bytes(path: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of every file under path."""
    apparent = allocated = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name), follow_symlinks=False)
            except OSError:
                continue  # a file rotated away mid-walk
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return apparent, allocated
