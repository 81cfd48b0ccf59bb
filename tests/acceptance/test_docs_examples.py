"""Every example in the README and the docs runs as shown.

Each ```python block is run as a script of its own in an empty temporary directory,
and must exit 0; what some of them must print is in ``EXPECTED``. The line before a
fence may say what the block is:

- ``<!-- fragment -->``: a piece of a larger program, shown and not run;
- ``<!-- file: NAME -->``: a file of a small project (``myapp.py``, ``pyproject.toml``,
  ``test_myapp.py``), written into the page's project directory, which
  ``PROJECTS`` then checks (its tests run with pytest, for instance).

Each ``parkway ...`` command in a shell block (```sh, ```bash, ```console) must name
commands the CLI has, with options those commands take.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from parkway.cli import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(
    r"^(?:<!-- (?P<mark>[^>]*?) -->\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)^```", re.M | re.S
)


@dataclass(frozen=True)
class Block:
    page: Path
    lang: str
    mark: str
    body: str

    @property
    def where(self) -> str:
        line = self.page.read_text("utf-8").index(self.body)
        row = self.page.read_text("utf-8").count("\n", 0, line) + 1
        return f"{self.page.relative_to(ROOT)}:{row}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        for m in FENCE.finditer(page.read_text("utf-8")):
            found.append(Block(page, m["lang"], m["mark"] or "", m["body"]))
    return found


BLOCKS = blocks()
SCRIPTS = [b for b in BLOCKS if b.lang == "python" and not b.mark]
SHELL = [b for b in BLOCKS if b.lang in {"sh", "bash", "console", "shell"}]

# What some examples print, each found by a line only it has. (By marker, not by
# position: a section added above an example does not renumber the rest.)
EXPECTED = {
    # README: the first workflow (run it twice: see test_the_first_workflow_runs_twice).
    'engine = Engine("sqlite:///orders.db")': ["parked", "'tracking': 'ZX-9'"],
    "async def back_in_stock(": ["1 product:456", "emailed client:5: Blue mug is back"],
    '@engine.action("send_email")': ["to client:5: product 456 is back", "1"],
    "async def loan(": ["approved declined", "outcome='buffered'"],
    "PRICES = {": [
        "https://pay.example/7?amount=12",
        "rejected: unknown code 'NOPE'",
        "discounted: 10.8",
        "'outcome': 'paid', 'total': 10.8",
        "order 8 cancelled",
    ],
    "async def reminder(": ["reminded"],
    "history_threshold=50": ["{'total': 120, 'journal': "],
    'return await ctx.wait_for_signal("approve")': [
        "[['order-4', 'order-3'], ['order-2', 'order-1'], ['order-0']]",
        "['order-3', 'order-1']",
        "{'approval': {'parked': 5}}",
    ],
    'return await ctx.wait_for_signal("reviewed")': [
        "pause by alice\nresume by bob\ncancel by carol\n"
    ],
    '@engine.workflow(name="order", version="2")': ["{'order': ['2']}\n42\n[]\n"],
    "from fastapi import FastAPI": ["{'order': {'id': 'A-7'}, 'decision': 'yes'}", "completed"],
    "from parkway import Engine, Schedule": [
        "sched:nightly_report:2030-03-10T07:00:00+00:00 2030-03-10T07:00:00+00:00",
        "ping-hourly True None sched:ping-hourly:2030-03-10T12:00:00+00:00",
    ],
    "from parkway import Concurrency, ConcurrencyLimitError, Engine, RateLimit": [
        "a-1 parked",
        "a-2 pending",
        "a-urgent pending",
        "b-1 parked",
        "after a-1: parked pending",
        "skipped: workflow 'nightly_report'",
        "waiting for the next window: ['call-2']",
    ],
    "from parkway import Engine, RunStateError": [
        "parked True\nparked\nfailed\n",
        "{'approved': True, 'payment': 'charged'}",
        "refused: cannot retry run 'A-1': it is completed",
        "cancelled 3",
        "left 0 3",
    ],
}


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


def by_marker(marker: str) -> list[Block]:
    """The examples holding ``marker``: one, or the same example shown on several pages."""
    found = [b for b in SCRIPTS if marker in b.body]
    assert found, f"no example holds {marker!r}"
    assert len({b.body for b in found}) == 1, f"{marker!r} is in {[b.where for b in found]}"
    return found


def test_each_expected_output_belongs_to_an_example() -> None:
    for marker in EXPECTED:
        by_marker(marker)


def test_no_fence_is_left_unclosed_or_unmarked() -> None:
    for page in PAGES:
        text = page.read_text("utf-8")
        assert text.count("\n```") % 2 == 0, f"{page}: a fence is not closed"
        for mark in re.findall(r"<!-- (fragment|file: [^>]*) -->\n(?!```)", text):
            pytest.fail(f"{page}: <!-- {mark} --> is not on the line before a fence")


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


# -- projects: the files of one page together ----------------------------------------------


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


# -- shell examples ----------------------------------------------------------------------------


def commands(block: Block) -> list[list[str]]:
    """The ``parkway ...`` commands of a shell block, as argument lists (after ``parkway``)."""
    text = block.body.replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line = line.strip().removeprefix("$ ")
        words = shlex.split(line, comments=True)
        while words and "=" in words[0]:  # VAR=value parkway ...
            words = words[1:]
        if words and words[0] == "parkway":
            found.append(words[1:])
    return found


SHELL_COMMANDS = [(b, args) for b in SHELL for args in commands(b)]


def test_the_docs_show_the_cli() -> None:
    assert len(SHELL_COMMANDS) >= 20


@pytest.mark.parametrize(
    ("block", "args"), SHELL_COMMANDS, ids=[f"{b.where} {' '.join(a)}" for b, a in SHELL_COMMANDS]
)
def test_shell_example_names_real_commands_and_options(block: Block, args: list[str]) -> None:
    command: click.Command = cli
    options = {o for p in cli.params for o in p.opts + p.secondary_opts}
    rest, path = list(args), []
    while rest and isinstance(command, click.Group):
        if rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in {"--url"} else rest[1:]
            continue
        sub = command.commands.get(rest[0])
        if sub is None:
            break
        command, rest, path = sub, rest[1:], [*path, rest[0]]
        options |= {o for p in command.params for o in p.opts + p.secondary_opts}
    assert command is not cli, f"{block.where}: parkway {' '.join(args)} names no command"
    if isinstance(command, click.Group):
        # A group shown bare (`parkway schedules`) runs its default listing.
        assert command.invoke_without_command, f"{block.where}: {args} needs a subcommand"
    for word in rest:
        if word.startswith("--"):
            assert word.split("=")[0] in options, f"{block.where}: {word} is no option of {args}"
    assert run_cli([*path, "--help"]).exit_code == 0


def run_cli(args: list[str]) -> click.testing.Result:
    from click.testing import CliRunner

    return CliRunner().invoke(cli, args, prog_name="parkway")
