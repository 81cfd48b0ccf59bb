"""omega-flow's evaluation rules, piece by piece: JavaScript number printing, condition forms
and legacy facts, node state in templates, and finding every fault of a definition.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/unit/test_flow_omega.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parkway.flows.templates import js_number

NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="needs node, to ask JavaScript itself")
@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=20, max_size=40))
def test_floats_print_as_node_prints_them(values: list[float]) -> None:
    assert NODE is not None
    script = (
        "const xs = JSON.parse(require('fs').readFileSync(0));"
        "console.log(JSON.stringify(xs.map(String)))"
    )
    done = subprocess.run(
        [NODE, "-e", script], input=json.dumps(values), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert [js_number(v) for v in values] == json.loads(done.stdout)
