"""The served API against its own OpenAPI document, fuzzed by schemathesis.

A bounded, seeded run (so that it is the same run every time): valid and
invalid requests of every operation, generated from ``/openapi.json`` as the
server publishes it, sent to ``parkway serve`` over a socket, with a token and
without. Every response must be documented (status, media type, body schema),
nothing may be a 5xx, and invalid requests must be refused. The longer fuzz is
``python -m benchmarks.fuzz_http`` (see its docstring).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra")
import httpx  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.specs.openapi import checks  # noqa: E402

from parkway.http.openapi import openapi_document  # noqa: E402
from tests.helpers import Served, served_app  # noqa: E402

TOKEN = "fuzz-t0ken"
# Per mode and token: a few hundred requests in all, a few seconds each run.
EXAMPLES = 120
CHECKS = [
    schemathesis.checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
    # Not positive_data_acceptance: a request the document allows may still be refused
    # for what no schema says (a workflow that is not registered, a ttl past 100 years).
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """One server without a token, one with (``parkway serve`` on SQLite)."""
    servers = {}
    for name, env in (("open", {}), ("token", {"PARKWAY_API_TOKEN": TOKEN})):
        tmp = tmp_path_factory.mktemp(name)
        served_app(tmp)
        servers[name] = Served(tmp, "approvals:engine", env=env)
    try:
        for running in servers.values():
            running.wait_ready()
        yield servers
    finally:
        for running in servers.values():
            running.kill()


def fuzz(server: Served, mode: GenerationMode, headers: dict[str, str]) -> list[int]:
    """Send ``EXAMPLES`` generated requests; the statuses they got."""
    bearer = {"Authorization": f"Bearer {TOKEN}"}  # (the document is behind the token too)
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", headers=bearer)
    statuses: list[int] = []

    @seed(22)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(case=schema.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        response = case.call(base_url=server.url, headers=headers, timeout=30)
        statuses.append(response.status_code)
        case.validate_response(response, checks=CHECKS, headers=headers)

    run()
    return statuses


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("token", ["open", "token"])
def test_every_response_is_documented_and_none_is_a_server_error(
    server: dict[str, Served], mode: GenerationMode, token: str
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"} if token == "token" else {}
    statuses = fuzz(server[token], mode, headers)
    assert len(statuses) >= EXAMPLES // 2
    assert not [s for s in statuses if s >= 500]
    if mode is GenerationMode.NEGATIVE:  # (negative_data_rejection judged each one)
        assert sum(400 <= s < 500 for s in statuses) > len(statuses) // 2, sorted(set(statuses))


def test_without_the_token_every_route_but_healthz_is_refused(server: dict[str, Served]) -> None:
    statuses = fuzz(server["token"], GenerationMode.POSITIVE, {})
    # (The callback routes need no token: a token of their own finds no callback, 404,
    # and past their rate limit, 429.)
    assert set(statuses) <= {200, 400, 401, 404, 415, 422, 429}, sorted(set(statuses))
    assert 401 in statuses


def test_the_document_says_whether_the_token_is_needed(server: dict[str, Served]) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for name, required in (("open", False), ("token", True)):
        served = httpx.get(f"{server[name].url}/openapi.json", headers=bearer, timeout=10).json()
        assert served == openapi_document(token_required=required)
        runs = served["paths"]["/runs"]["get"]
        assert runs["security"] == ([{"bearer": []}] if required else [])
        assert "401" in runs["responses"]
