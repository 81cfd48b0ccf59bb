"""The HTTP API's refusals: each names what is wrong, and a refused request writes nothing.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_http_errors.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
from tests.helpers import Served, served_app


def test_serve_without_the_http_extra_says_how_to_install_it(tmp_path: Path) -> None:
    # A uvicorn that cannot be imported, first on the path, stands for a missing extra.
    shadow = tmp_path / "shadow" / "uvicorn"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named uvicorn')\n")
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), env.get("PYTHONPATH", "")])
    served_app(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "parkway", "serve", "approvals:engine"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode != 0
    assert "pip install 'parkway[http]'" in result.stderr, result.stderr
    assert "uvicorn" in result.stderr and "Traceback" not in result.stderr


def test_serve_on_a_taken_port_fails_cleanly(tmp_path: Path) -> None:
    first = Served(served_app(tmp_path), "approvals:engine")
    try:
        first.wait_ready()
        env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "parkway",
                "serve",
                "approvals:engine",
                "--port",
                str(first.port),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 1
        assert f"cannot listen on 127.0.0.1:{first.port}" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert first.stop() == 0, first.stderr
    finally:
        first.kill()
