"""Malformed flows are refused when loaded, with the node (or edge) and the field at fault.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_flows_definitions.py.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.acceptance.test_flows_definitions import add_condition, good, nodes, params

EXAMPLE = Path(__file__).parents[2] / "examples" / "flows" / "back_in_stock.json"


def parkway(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    return subprocess.run(
        [sys.executable, "-m", "parkway", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_validates_a_good_flow(tmp_path: Path) -> None:
    result = parkway("flows", "validate", str(EXAMPLE), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK")
    assert "4 nodes" in result.stdout and "4 edges" in result.stdout


def test_cli_names_the_node_and_field_of_a_bad_flow(tmp_path: Path) -> None:
    definition = good()
    params(definition, "wait-product").pop("duration")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(definition))
    result = parkway("flows", "validate", str(path), cwd=tmp_path)
    assert result.returncode == 1
    assert "'wait-product'" in result.stderr and "data.params.duration" in result.stderr
    assert result.stdout == ""


def test_cli_refuses_broken_json_and_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"id": ')
    result = parkway("flows", "validate", str(path), cwd=tmp_path)
    assert result.returncode == 1 and "not valid JSON" in result.stderr
    result = parkway("flows", "validate", "missing.json", cwd=tmp_path)
    assert result.returncode == 1 and "missing.json" in result.stderr


def test_cli_checks_handlers_and_node_types_with_an_app(tmp_path: Path) -> None:
    (tmp_path / "shopapp.py").write_text(
        textwrap.dedent(
            """
            from parkway import Engine, NodeModel, default_node_models

            class Ping(NodeModel):
                required_params = ("host",)

            engine = Engine("memory://", node_models={**default_node_models, "Ping": Ping})

            @engine.action("send_email")
            def send_email(params, context):
                return None
            """
        )
    )
    definition = copy.deepcopy(good())
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(definition))
    assert (
        parkway("flows", "validate", str(path), "--app", "shopapp:engine", cwd=tmp_path).returncode
        == 0
    )

    params(definition, "notify")["action"] = "send_sms"
    nodes(definition)["end"]["type"] = "Ping"
    path.write_text(json.dumps(definition))
    # Without the app, handlers are unknown: only the node type is wrong.
    result = parkway("flows", "validate", str(path), cwd=tmp_path)
    assert result.returncode == 1 and "'Ping'" in result.stderr
    nodes(definition)["end"]["data"] = {"params": {"host": "h"}}
    nodes(definition)["end"]["type"] = "Exit"
    path.write_text(json.dumps(definition))
    assert parkway("flows", "validate", str(path), cwd=tmp_path).returncode == 0
    result = parkway("flows", "validate", str(path), "--app", "shopapp:engine", cwd=tmp_path)
    assert result.returncode == 1
    assert "'notify'" in result.stderr and "data.params.action" in result.stderr


def test_cli_reports_every_fault_at_once(tmp_path: Path) -> None:
    """One run lists each fault of the file, each naming its node (or edge) and field."""
    definition = good()
    params(definition, "wait-product").update(duration=-1, match="product:1")
    nodes(definition)["end"].update(type="Finish")
    definition["flow"]["edges"].append({"id": "e9", "source": "notify", "target": "ghost"})
    add_condition(definition, {"fact": "trigger.total", "operator": "like", "value": 1})
    params(definition, "notify").update(to="{{customer.email}}")
    definition["options"].update(enabled="yes")
    path = tmp_path / "faulty.json"
    path.write_text(json.dumps(definition))
    result = parkway("flows", "validate", str(path), cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == f"{path}: 7 faults", result.stderr
    expected = [
        ["options.enabled"],
        ["'end'", "type", "'Finish'"],
        ["'e9'", "target", "'ghost'"],
        ["'wait-product'", "data.params.match"],
        ["'wait-product'", "data.params.duration", "milliseconds"],
        ["'notify'", "data.params.to", "'customer'"],
        ["'check'", "data.conditions.groups[0].conditions[0].operator", "'like'"],
    ]
    assert len(lines) == 1 + len(expected)
    for words in expected:
        assert any(all(w in line for w in words) for line in lines[1:]), (words, result.stderr)


def test_cli_validates_the_onboarding_example(tmp_path: Path) -> None:
    example = EXAMPLE.parent / "onboarding.json"
    result = parkway("flows", "validate", str(example), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "OK: flow 'user-onboarding': 8 nodes, 8 edges\n"
