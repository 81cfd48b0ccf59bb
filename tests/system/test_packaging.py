"""What a base install holds, and what each extra adds: a feature whose extra is not
installed fails with a ParkwayError that names the extra to install. Each check runs
in a process of its own, with the extra's modules made unimportable
(``sys.modules[name] = None``), as on a machine where they were never installed. Then the
release itself: the wheel and sdist built, checked by twine, and holding what they must."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

EXTRAS = {
    "postgres": ["psycopg", "psycopg_pool"],
    "http": ["starlette", "uvicorn", "pydantic"],
    "metrics": ["prometheus_client"],
    "tracing": ["opentelemetry"],
}


def run_without(modules: list[str], code: str, *args: str, cwd: Path | None = None) -> str:
    """Run ``code`` where ``modules`` cannot be imported; its stdout (it must exit 0)."""
    blocked = "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    program = "import sys\n" + blocked + textwrap.dedent(code)
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    result = subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def every_extra() -> list[str]:
    return [m for modules in EXTRAS.values() for m in modules]


def test_the_base_install_is_what_an_sqlite_user_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {d.split(">")[0].split("[")[0].strip() for d in project["dependencies"]}
    # (cronsim: schedules' cron expressions, ~600 lines of pure Python, no dependencies.)
    assert base == {"orjson", "click", "cronsim"}
    extras = project["optional-dependencies"]
    assert {"postgres", "http", "metrics", "tracing"} <= set(extras)
    assert any(d.startswith("psycopg[binary]") for d in extras["postgres"])
    assert any(d.startswith("prometheus_client") for d in extras["metrics"])
    assert any(d.startswith("opentelemetry-api") for d in extras["tracing"])
    # make test and CI install dev: every extra comes with it.
    assert "parkway[postgres,http,metrics,tracing]" in extras["dev"]


def test_parkway_runs_a_workflow_on_sqlite_with_no_extra_installed(tmp_path: Path) -> None:
    out = run_without(
        every_extra(),
        """
        import asyncio
        from parkway import Engine

        engine = Engine(sys.argv[1])

        @engine.workflow()
        async def hello(ctx, input):
            return await ctx.step(lambda: f"hello {input}", name="greet")

        async def main():
            async with engine:
                print(await (await engine.start("hello", "ann")).result(timeout=10))

        asyncio.run(main())
        """,
        f"sqlite:///{tmp_path / 'app.db'}",
    )
    assert out.strip() == "hello ann"


CHECKS = {
    "postgres": (
        """
        from parkway import Engine
        Engine("postgresql://postgres@127.0.0.1/test")
        """,
        "the PostgreSQL store needs the 'postgres' extra (psycopg is not installed): "
        "pip install 'parkway[postgres]'",
    ),
    "http": (
        "import parkway.http\n",
        "parkway.http needs the 'http' extra (pydantic is not installed): "
        "pip install 'parkway[http]'",
    ),
    "metrics": (
        """
        from parkway import Engine
        Engine("memory://", metrics=True)
        """,
        "Engine(metrics=...) needs the 'metrics' extra (prometheus_client is not installed): "
        "pip install 'parkway[metrics]'",
    ),
    "tracing": (
        """
        from parkway import Engine
        Engine("memory://", tracing=True)
        """,
        "Engine(tracing=...) needs the 'tracing' extra (opentelemetry-api is not installed): "
        "pip install 'parkway[tracing]'",
    ),
}


@pytest.mark.parametrize("extra", sorted(CHECKS))
def test_a_feature_without_its_extra_names_the_extra(extra: str) -> None:
    code, message = CHECKS[extra]
    attempt = textwrap.indent(textwrap.dedent(code).strip(), "    ")
    program = (
        "from parkway import ParkwayError\n"
        "from parkway.errors import MissingExtraError\n"
        f"try:\n{attempt}\n"
        "except MissingExtraError as exc:\n"
        "    assert isinstance(exc, ParkwayError) and isinstance(exc, ImportError)\n"
        "    print(exc.extra)\n"
        "    print(exc)\n"
        "else:\n"
        "    print('no error')\n"
    )
    assert run_without(EXTRAS[extra], program).splitlines() == [extra, message]


def test_starlette_missing_is_named_too() -> None:
    out = run_without(
        ["starlette"],
        """
        try:
            import parkway.http
        except ImportError as exc:
            print(type(exc).__name__, exc)
        """,
    )
    assert out.strip() == (
        "MissingExtraError parkway.http needs the 'http' extra (starlette is not installed): "
        "pip install 'parkway[http]'"
    )


def test_tracing_left_to_its_default_needs_no_extra() -> None:
    out = run_without(
        EXTRAS["tracing"],
        """
        import asyncio
        from parkway import Engine

        async def main():
            async with Engine("memory://") as engine:  # (tracing=None: on only with an SDK)
                print(engine.is_open)

        asyncio.run(main())
        """,
    )
    assert out.strip() == "True"


def test_worker_metrics_without_the_extra_is_a_clean_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    (tmp_path / "tinyapp.py").write_text(f"from parkway import Engine\nengine = Engine({url!r})\n")
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    program = (
        "import sys\nsys.modules['prometheus_client'] = None\n"
        "from parkway.cli import main\n"
        "main(['worker', 'tinyapp:engine', '--metrics-port', '0'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "--metrics-port: Engine(metrics=...) needs the 'metrics' extra" in result.stderr
    assert "pip install 'parkway[metrics]'" in result.stderr
    assert "Traceback" not in result.stderr


# -- the release: wheel and sdist ---------------------------------------------------------------


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The wheel and the sdist, built as a release would build them."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        # --no-isolation: the backend (hatchling) comes with the dev install, so the
        # build needs no network.
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = out.glob("parkway-*.whl")
    [sdist] = out.glob("parkway-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_twine_finds_the_wheel_and_sdist_fit_to_publish(dists: dict[str, Path]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, dists.values())],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_holds_the_license_and_the_typed_marker(dists: dict[str, Path]) -> None:
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        names = wheel.namelist()
        assert "parkway/py.typed" in names
        [license_file] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert "MIT License" in wheel.read(license_file).decode()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = wheel.read(metadata).decode()
    # What PyPI shows: the license, the project's links, the classifiers.
    assert "License-Expression: MIT" in meta
    for label in ("Homepage", "Documentation", "Source", "Changelog"):
        assert f"Project-URL: {label}, https://" in meta
    for classifier in (
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Framework :: AsyncIO",
        "Typing :: Typed",
    ):
        assert f"Classifier: {classifier}" in meta
    # The migrations and the dashboard's files ship with the code.
    assert any(n.startswith("parkway/store/sqlite/migrations/") for n in names)
    assert any(n.startswith("parkway/http/static/") for n in names)


def test_the_sdist_holds_the_license_and_the_typed_marker(dists: dict[str, Path]) -> None:
    with tarfile.open(dists["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "pyproject.toml", "src/parkway/py.typed"} <= names
