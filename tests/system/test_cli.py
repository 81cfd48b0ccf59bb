"""The ``parkway`` command line, driven as users drive it: in a subprocess."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers import WorkerProcess, failed, ok_json, parkway, write_app

APP_SOURCE = """
from parkway import Engine

engine = Engine({url!r})


def check_numbers(value):
    if not isinstance(value, dict) or not isinstance(value.get("a"), int):
        raise ValueError("field 'a' must be a whole number")
    return value


def add(a, b):
    return a + b


@engine.workflow()
async def greet(ctx, input):
    name = await ctx.wait_for_signal("name")
    return f"hello {{name}} from {{input['from']}}"


@engine.workflow(validate_input=check_numbers)
async def total(ctx, input):
    return await ctx.step(add, input["a"], input.get("b", 0))


not_an_engine = {{"a": 1}}
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """A user's app module in ``tmp_path`` (the commands run there), on SQLite in ``tmp_path``."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    write_app(tmp_path, "shopapp", APP_SOURCE, url)
    return tmp_path


# -- demo ----------------------------------------------------------------------------------------


def test_demo_parks_restarts_and_resumes(tmp_path: Path) -> None:
    (tmp_path / "parkway-demo.db").write_bytes(b"left over from an earlier demo, not a database")
    began = time.monotonic()
    result = parkway("demo", cwd=tmp_path)
    elapsed = time.monotonic() - began
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert elapsed < 15, f"the demo took {elapsed:.1f}s"
    for section in (
        "1. Three orders are placed",
        "2. Every run is parked",
        "3. Restart",
        "4. The warehouse ships order-1001 and order-1002",
        "5. Timers fire",
        "6. Final state",
        "7. History of order-1003",
    ):
        assert section in out, out
    # The payment step fails once per order, then succeeds on its retry.
    assert out.count("gateway timed out (attempt 1)") == 3, out
    assert out.count("charged (attempt 2)") == 3, out
    parked, restarted = out.split("2. Every run is parked")[1].split("3. Restart")
    for text in (parked, restarted.split("4. The warehouse")[0]):
        assert text.count("parked     signal 'shipped'") == 3, out
        assert "cart-77-reminder         cart_reminder  parked     a timer" in text, out
    final = out.split("6. Final state")[1].split("7. History")[0]
    assert (
        "order-1001               order          completed  status=shipped, tracking=TRK-501"
        in final
    )
    assert (
        "order-1002               order          completed  status=shipped, tracking=TRK-502"
        in final
    )
    assert "order-1003               order          completed  status=refunded" in final
    assert "order-1001-receipt       send_receipt   completed" in final
    assert "cart-77-reminder         cart_reminder  completed  reminded" in final
    history = out.split("7. History of order-1003")[1]
    assert "signal        shipped         error   WaitTimeoutError" in history, history
    assert "refund_payment  done    REF-1003" in history, history
    # Each side effect happened once: the restart re-ran nothing that had been committed.
    assert out.count("reserve_stock    ") == 3 and out.count("refund_payment   ") == 1, out
    assert out.count("you left items in cart-77") == 1, out
    assert result.stderr == ""

    # The database it leaves behind is readable with the other commands.
    runs = ok_json(parkway("--url", "sqlite:///parkway-demo.db", "runs", "--json", cwd=tmp_path))
    assert {r["id"]: r["status"] for r in runs}["order-1003"] == "completed"


# -- start / signal / runs / show ----------------------------------------------------------------


def test_start_signal_runs_show_with_a_worker(app: Path) -> None:
    started = ok_json(
        parkway(
            "start", "greet", '{"from": "cli"}', "--id", "g1", "--app", "shopapp:engine", cwd=app
        )
    )
    assert started["id"] == "g1" and started["status"] == "pending"
    assert started["input"] == {"from": "cli"} and started["workflow"] == "greet"
    # Starting an existing id returns that run.
    again = ok_json(
        parkway("start", "greet", '{"from": "x"}', "--id", "g1", "--app", "shopapp:engine", cwd=app)
    )
    assert again["input"] == {"from": "cli"}

    listed = ok_json(parkway("runs", "--json", "--app", "shopapp:engine", cwd=app))
    assert [(r["id"], r["status"]) for r in listed] == [("g1", "pending")]
    assert (
        ok_json(
            parkway("runs", "--json", "--status", "completed", "--app", "shopapp:engine", cwd=app)
        )
        == []
    )

    # Without --app, --url names the store: the signal waits in the run's mailbox.
    url = f"sqlite:///{app / 'app.db'}"
    sent = ok_json(parkway("--url", url, "signal", "g1", "name", '"Ada"', cwd=app))
    assert sent == {"run": "g1", "signal": "name", "payload": "Ada", "status": "pending"}

    worker = WorkerProcess(app, "shopapp:engine", "--concurrency", "2", "--lease", "5s")
    try:
        deadline = time.monotonic() + 20
        while True:
            shown = ok_json(parkway("--url", url, "show", "g1", cwd=app))
            if shown["status"] == "completed" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert shown["status"] == "completed", shown
        assert shown["output"] == "hello Ada from cli"
        assert [(h["kind"], h["name"], h["status"], h["result"]) for h in shown["history"]] == [
            ("signal", "name", "done", "Ada")
        ]

        # --wait returns once the worker has finished the run.
        waited = ok_json(
            parkway(
                "start",
                "total",
                '{"a": 2, "b": 3}',
                "--id",
                "t1",
                "--wait",
                "--timeout",
                "20",
                "--app",
                "shopapp:engine",
                cwd=app,
            )
        )
        assert waited["status"] == "completed" and waited["output"] == 5
        log = worker.stop()
    finally:
        worker.kill()
    assert "parkway worker: started on sqlite:///" in log and "concurrency 2, lease 5s" in log
    assert "parkway worker: stopped (SIGTERM)" in log

    by_workflow = ok_json(parkway("--url", url, "runs", "--json", "--workflow", "total", cwd=app))
    assert [r["id"] for r in by_workflow] == ["t1"]
    limited = ok_json(parkway("--url", url, "runs", "--json", "--limit", "1", cwd=app))
    assert len(limited) == 1
    history = ok_json(parkway("show", "t1", "--app", "shopapp:engine", cwd=app))["history"]
    assert [(h["kind"], h["name"], h["result"]) for h in history] == [("step", "add", 5)]


def test_url_option_retargets_the_app_engine(app: Path) -> None:
    other = app / "other.db"
    url = f"sqlite:///{other}"
    ok_json(
        parkway(
            "--url",
            url,
            "start",
            "total",
            '{"a": 1}',
            "--id",
            "x",
            "--app",
            "shopapp:engine",
            cwd=app,
        )
    )
    assert other.exists() and not (app / "app.db").exists()
    assert [r["id"] for r in ok_json(parkway("--url", url, "runs", "--json", cwd=app))] == ["x"]


# -- bad input -----------------------------------------------------------------------------------


def test_bad_json_names_the_argument(app: Path) -> None:
    result = parkway("start", "greet", "{from: cli}", "--app", "shopapp:engine", cwd=app)
    failed(result, "Invalid value for 'JSON'", "is not valid JSON")
    assert result.returncode == 2
    url = f"sqlite:///{app / 'app.db'}"
    ok_json(
        parkway("start", "greet", '{"from": "x"}', "--id", "g", "--app", "shopapp:engine", cwd=app)
    )
    failed(parkway("--url", url, "signal", "g", "name", "Ada", cwd=app), "'JSON'", "not valid JSON")


def test_unknown_run_is_a_clean_error(app: Path) -> None:
    url = f"sqlite:///{app / 'app.db'}"
    ok_json(parkway("start", "greet", '{"from": "x"}', "--app", "shopapp:engine", cwd=app))
    for args in (("show", "nope"), ("signal", "nope", "name", '"x"')):
        result = parkway("--url", url, *args, cwd=app)
        failed(result, "no run with id 'nope'")
        assert result.returncode == 1
        assert result.stdout == ""


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("shopapp:nope", "module 'shopapp' has no attribute 'nope'"),
        (
            "shopapp:not_an_engine",
            "'shopapp:not_an_engine' is not a parkway Engine (it is of type dict)",
        ),
        ("missingmod:engine", "cannot import module 'missingmod'"),
        ("shopapp", "is not of the form module:attribute"),
    ],
)
def test_bad_app_names_app(app: Path, spec: str, message: str) -> None:
    for args in (("worker", spec), ("runs", "--app", spec)):
        result = parkway(*args, cwd=app)
        stderr = failed(result, message)
        assert "APP" in stderr or "--app" in stderr, stderr
        assert result.returncode == 2


def test_app_import_error_is_reported(app: Path) -> None:
    (app / "brokenapp.py").write_text("import not_installed_anywhere\n")
    failed(
        parkway("worker", "brokenapp:engine", cwd=app),
        "importing module 'brokenapp'",
        "No module named 'not_installed_anywhere'",
    )


def test_start_with_an_app_needs_a_known_workflow(app: Path) -> None:
    result = parkway("start", "nope", "{}", "--app", "shopapp:engine", cwd=app)
    failed(result, "no workflow named 'nope'", "registered: greet, total")
    assert result.returncode == 1


def test_start_without_an_app_leaves_version_and_input_to_the_worker(app: Path) -> None:
    # No database where the command looks: nothing is created, the error says where.
    failed(parkway("start", "total", '{"a": 1}', cwd=app), "no parkway database at 'parkway.db'")
    assert not (app / "parkway.db").exists()

    url = f"sqlite:///{app / 'app.db'}"
    # (This start creates app.db.)
    ok_json(
        parkway("start", "greet", '{"from": "x"}', "--id", "g0", "--app", "shopapp:engine", cwd=app)
    )
    # The store has never seen a run of "total": refused as a possible typo, unless forced.
    failed(
        parkway("--url", url, "start", "total", '{"a": 2}', cwd=app),
        "no run of workflow 'total'",
        "--force",
    )
    started = ok_json(
        parkway(
            "--url", url, "start", "total", '{"a": 2, "b": 5}', "--id", "t1", "--force", cwd=app
        )
    )
    assert (started["id"], started["status"], started["version"]) == ("t1", "pending", "")
    bad = ok_json(parkway("--url", url, "start", "total", '{"a": "two"}', "--id", "t2", cwd=app))
    assert bad["status"] == "pending"  # nobody here can judge the input: the worker will

    worker = WorkerProcess(app, "shopapp:engine", "--lease", "5s")
    try:
        waited = ok_json(
            parkway(
                "--url",
                url,
                "start",
                "total",
                '{"a": 1}',
                "--id",
                "t3",
                "--wait",
                "--timeout",
                "20",
                cwd=app,
            )
        )
        assert (waited["status"], waited["output"], waited["version"]) == ("completed", 1, "1")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            runs = {r["id"]: r for r in ok_json(parkway("--url", url, "runs", "--json", cwd=app))}
            if runs["t1"]["status"] == "completed" and runs["t2"]["status"] == "failed":
                break
            time.sleep(0.1)
        assert (runs["t1"]["status"], runs["t1"]["output"]) == ("completed", 7)
        assert runs["t1"]["version"] == "1"
        assert runs["t2"]["status"] == "failed"
        assert runs["t2"]["error"]["type"] == "InvalidInputError"
        assert "field 'a' must be a whole number" in runs["t2"]["error"]["message"]
    finally:
        worker.stop()


def test_rejected_input_is_a_clean_error(app: Path) -> None:
    result = parkway("start", "total", '{"a": "two"}', "--app", "shopapp:engine", cwd=app)
    failed(result, "invalid input for workflow 'total'", "field 'a' must be a whole number")
    assert result.returncode == 1


def test_reading_a_missing_database_does_not_create_it(tmp_path: Path) -> None:
    failed(parkway("runs", cwd=tmp_path), "no parkway database at 'parkway.db'")
    failed(
        parkway("--url", "sqlite:///elsewhere.db", "show", "x", cwd=tmp_path),
        "no parkway database at 'elsewhere.db'",
    )
    assert list(tmp_path.iterdir()) == []


def test_bad_url_is_a_clean_error(app: Path) -> None:
    failed(parkway("--url", "mysql://db", "runs", cwd=app), "unsupported store url 'mysql://db'")
    failed(parkway("--url", "sqlite://x.db", "worker", "shopapp:engine", cwd=app), "bad SQLite url")


def test_bad_options(app: Path) -> None:
    failed(parkway("runs", "--status", "sleeping", cwd=app), "'sleeping' is not one of")
    failed(
        parkway("worker", "shopapp:engine", "--lease", "soon", cwd=app), "'soon' is not a duration"
    )
    failed(parkway("worker", "shopapp:engine", "--concurrency", "0", cwd=app), "--concurrency")


def test_help_and_version() -> None:
    here = Path(__file__).parent
    result = parkway("--help", cwd=here)
    assert result.returncode == 0
    for command in ("demo", "worker", "start", "signal", "runs", "show"):
        assert command in result.stdout
    assert "parkway, version" in parkway("--version", cwd=here).stdout


def test_start_takes_a_priority(app: Path) -> None:
    started = ok_json(
        parkway(
            "start",
            "greet",
            '{"from": "x"}',
            "--id",
            "p1",
            "--priority",
            "9",
            "--app",
            "shopapp:engine",
            cwd=app,
        )
    )
    assert (started["id"], started["status"]) == ("p1", "pending")
    for bad in ["high", "1.5", str(2**63)]:
        result = parkway(
            "start",
            "greet",
            "{}",
            "--id",
            "p2",
            "--priority",
            bad,
            "--app",
            "shopapp:engine",
            cwd=app,
        )
        assert result.returncode == 2, result.stderr
        assert "--priority" in result.stderr
    listed = ok_json(parkway("runs", "--json", "--app", "shopapp:engine", cwd=app))
    assert [r["id"] for r in listed] == ["p1"]


def test_help_names_every_kind_of_store_url(tmp_path: Path) -> None:
    # --url takes a PostgreSQL URL as well as SQLite and memory ones: the help says so,
    # before the command and after it.
    for args in (["--help"], ["runs", "--help"]):
        done = parkway(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        text = " ".join(done.stdout.split())
        for scheme in ("sqlite:///", "postgresql://", "memory://"):
            assert scheme in text, (args, done.stdout)
