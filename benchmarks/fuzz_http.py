"""The long fuzz of the HTTP API: schemathesis against ``parkway serve``, from its own document.

    python -m benchmarks.fuzz_http [--examples N] [--seed S] [--url STORE_URL]

Serves a small app (two workflows) on a free loopback port, once without a
token and once with one, and runs ``schemathesis run`` on each: every
operation, valid and invalid requests (``--examples`` each, 2,000 by default:
about 30,000 requests in all), with the checks the test suite's short run uses
(tests/system/test_schemathesis.py). Exits non-zero on the first server
error, undocumented status, media type or body, or invalid request accepted.
``--url`` serves it on another store (a ``postgresql://`` database, say); by
default a fresh SQLite file. Needs the dev extra (schemathesis).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

from benchmarks.procs import free_port

APP = """
from parkway import Engine

engine = Engine({url!r})


@engine.workflow()
async def approval(ctx, input):
    return {{"input": input, "decision": await ctx.wait_for_signal("x")}}


@engine.workflow(on_event="order.created")
async def shipment(ctx, order):
    return await ctx.wait_for_event("order.shipped")
"""
TOKEN = "fuzz-t0ken"
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "negative_data_rejection",
    ]
)


def serve(folder: Path, url: str, token: str | None) -> tuple[subprocess.Popen[bytes], str]:
    (folder / "fuzzapp.py").write_text(textwrap.dedent(APP.format(url=url)))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PARKWAY_URL", "PARKWAY_API_TOKEN")}
    if token:
        env["PARKWAY_API_TOKEN"] = token
    command = [
        sys.executable,
        "-m",
        "parkway",
        "serve",
        "fuzzapp:engine",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(command, cwd=folder, env=env, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2):
                return proc, base
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"parkway serve did not answer on {base} within 30 s")


def fuzz(base: str, examples: int, seed: int, token: str | None, phases: str) -> int:
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{base}/openapi.json",
        "--checks",
        CHECKS,
        "--max-examples",
        str(examples),
        "--seed",
        str(seed),
        "--mode",
        "all",
        "--request-timeout",
        "30",
        "--phases",
        phases,
    ]
    if token:
        command += ["--header", f"Authorization: Bearer {token}"]
    return subprocess.run(command, check=False).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000, help="per operation and mode")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--url", help="the store to serve on (default: a fresh SQLite file)")
    parser.add_argument(
        "--phases", default="examples,coverage,fuzzing", help="schemathesis's phases to run"
    )
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="parkway-fuzz-") as tmp:
        for token in (None, TOKEN):
            folder = Path(tmp) / ("token" if token else "open")
            folder.mkdir()
            store = args.url or f"sqlite:///{folder / 'fuzz.db'}"
            proc, base = serve(folder, store, token)
            try:
                print(f"fuzzing {base} ({'with' if token else 'without'} a token)", flush=True)
                failed |= fuzz(base, args.examples, args.seed, token, args.phases)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    return failed


if __name__ == "__main__":
    sys.exit(main())
