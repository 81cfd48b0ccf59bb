"""Every example in the README and the docs runs as shown.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_docs_examples.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.acceptance.test_docs_examples import (
    BLOCKS,
    EXPECTED,
    ROOT,
    SCRIPTS,
    Block,
    by_marker,
)


def run_script(source: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / "example.py"
    script.write_text(source, "utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("example", SCRIPTS, ids=lambda b: b.where)
def test_example_runs(example: Block, tmp_path: Path) -> None:
    done = run_script(example.body, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    # An example shows what happens, not a traceback among what it prints.
    assert "Traceback" not in done.stdout + done.stderr
    for marker, lines in EXPECTED.items():
        if marker in example.body:
            for expected in lines:
                assert expected in done.stdout, done.stdout


def test_the_first_workflow_runs_twice(tmp_path: Path) -> None:
    # The README says to run it twice: the second start returns the same, finished run.
    [first] = by_marker('engine = Engine("sqlite:///orders.db")')
    assert first.page.name == "README.md"
    assert run_script(first.body, tmp_path).returncode == 0
    again = run_script(first.body, tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == "completed"
    assert "'tracking': 'ZX-9'" in again.stdout


def project_files(page: str) -> dict[str, str]:
    return {
        b.mark.removeprefix("file: "): b.body
        for b in BLOCKS
        if b.page.relative_to(ROOT).as_posix() == page and b.mark.startswith("file: ")
    }


def test_every_project_file_belongs_to_a_checked_project() -> None:
    pages = {b.page.relative_to(ROOT).as_posix() for b in BLOCKS if b.mark.startswith("file:")}
    assert pages <= set(PROJECTS)


def test_testing_guide_project_passes_its_tests_with_warnings_as_errors(tmp_path: Path) -> None:
    files = project_files("docs/guides/testing.md")
    assert {"myapp.py", "pyproject.toml", "test_myapp.py"} <= set(files)
    for name, body in files.items():
        (tmp_path / name).write_text(body, "utf-8")
    env = {k: v for k, v in os.environ.items() if k not in {"PARKWAY_URL", "PYTEST_ADDOPTS"}}
    done = subprocess.run(
        # -W error: a deprecation the suggested configuration raised would fail here.
        [sys.executable, "-m", "pytest", "-q", "-W", "error", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout, done.stdout
    assert "warning" not in done.stdout.lower(), done.stdout


def test_tutorial_project_runs_under_a_worker_process(tmp_path: Path) -> None:
    files = project_files("docs/tutorial.md")
    assert "shop.py" in files
    for name, body in files.items():
        (tmp_path / name).write_text(body, "utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    env["PARKWAY_URL"] = f"sqlite:///{tmp_path / 'shop.db'}"
    parkway = [sys.executable, "-m", "parkway"]

    def run(*args: str) -> str:
        done = subprocess.run(
            [*parkway, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def status_becomes(status: str) -> None:
        deadline = time.monotonic() + 30
        while f'"status": "{status}"' not in run("show", "order-A-1"):
            assert time.monotonic() < deadline, run("show", "order-A-1")
            time.sleep(0.2)

    worker = subprocess.Popen(
        [*parkway, "worker", "shop:engine"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run(
            "start",
            "order",
            '{"id": "A-1", "amount": 42}',
            "--id",
            "order-A-1",
            "--app",
            "shop:engine",
        )
        status_becomes("parked")
        run("signal", "order-A-1", "shipped", '{"tracking": "ZX-9"}')
        status_becomes("completed")
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err


PROJECTS = {
    "docs/guides/testing.md": test_testing_guide_project_passes_its_tests_with_warnings_as_errors,
    "docs/tutorial.md": test_tutorial_project_runs_under_a_worker_process,
}
