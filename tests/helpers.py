"""Helpers shared by the test tiers (tests/acceptance, tests/system, tests/store).

Waiting for a condition, free ports, the environment of a subprocess that must
import the parkway under test, the ``parkway`` command line run as users run it
(``parkway``, ``ok_json``, ``failed``, ``WorkerProcess``), ``parkway serve`` in a
subprocess (``Served``), and the small user apps those commands load
(``write_app``, ``served_app``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import parkway as parkway_package

# The folder of the apps that worker subprocesses load by module name (cwd=APPS).
APPS = Path(__file__).parent / "apps"


async def wait_for(
    check: Callable[[], Awaitable[bool]], what: str, timeout: float = 10, interval: float = 0.01
) -> None:
    """Wait until ``await check()`` is true; fail the test, naming ``what``, after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            pytest.fail(f"waited {timeout}s for {what}")
        await asyncio.sleep(interval)


def examples(full: int) -> int:
    """``full`` Hypothesis examples, scaled by the loaded profile: the default one runs
    ``full``; ``make check`` loads ``quick`` (tests/conftest.py), a fifth of them."""
    return max(1, full * settings.default.max_examples // 100)


def free_port() -> int:
    """A TCP port of 127.0.0.1 nobody listens on (as long as nobody takes it first)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def subprocess_env(**extra: str) -> dict[str, str]:
    """This environment for a subprocess, with the parkway under test first on its path:
    a relative PYTHONPATH would not reach it from the subprocess's working directory."""
    source = str(Path(parkway_package.__file__).resolve().parents[1])
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join([source, *filter(None, [env.get("PYTHONPATH")])])
    return env


def write_app(folder: Path, module: str, source: str, url: str) -> Path:
    """Write a user's app module ``folder/module.py`` from ``source`` (a template with
    ``{url}``); returns ``folder``, where the commands that load it run."""
    (folder / f"{module}.py").write_text(textwrap.dedent(source.format(url=url)))
    return folder


# -- the command line ----------------------------------------------------------------------------


def parkway(*args: str, cwd: Path, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``python -m parkway ARGS`` in ``cwd``, as a user runs it (no PARKWAY_URL)."""
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    return subprocess.run(
        [sys.executable, "-m", "parkway", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout)


def failed(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Assert a clean failure: non-zero exit, each fragment on stderr, no traceback."""
    assert result.returncode != 0, result.stdout
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


class WorkerProcess:
    """``python -m parkway worker ARGS`` in ``cwd``, its stderr kept in a file."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.stderr = cwd / "worker.stderr"
        env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "parkway", "worker", *args],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=15)
        text = self.stderr.read_text()
        assert code == 0, text
        return text

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# -- the HTTP API --------------------------------------------------------------------------------


SERVED_APP = """
from parkway import Engine

engine = Engine({url!r})


@engine.workflow()
async def approval(ctx, input):
    decision = await ctx.wait_for_signal("x")
    return {{"input": input, "decision": decision}}


@engine.workflow(on_event="order.created")
async def shipment(ctx, order):
    return await ctx.wait_for_event("order.shipped")
"""


def served_app(tmp_path: Path) -> Path:
    """A user's app module in ``tmp_path``, on SQLite in ``tmp_path``."""
    return write_app(tmp_path, "approvals", SERVED_APP, f"sqlite:///{tmp_path / 'app.db'}")


class Served:
    """``python -m parkway serve APP`` in a subprocess, on a free port."""

    def __init__(self, cwd: Path, app: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stderr_path = cwd / f"serve-{self.port}.stderr"
        full_env = {
            k: v for k, v in os.environ.items() if k not in ("PARKWAY_URL", "PARKWAY_API_TOKEN")
        }
        full_env.update(env or {})
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "parkway",
                    "serve",
                    app,
                    "--port",
                    str(self.port),
                    "--grace",
                    "5",
                    "--log-level",
                    "warning",
                    *args,
                ],
                cwd=cwd,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_ready(self, timeout: float = 30) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"parkway serve exited with {self.proc.returncode}:\n{self.stderr}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        pytest.fail(f"parkway serve did not answer /healthz within {timeout}s:\n{self.stderr}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
