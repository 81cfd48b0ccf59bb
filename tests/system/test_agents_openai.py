"""Durable OpenAI Agents SDK runs (``parkway.integrations.openai_agents``), offline.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_agents_openai.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.acceptance.test_agents_openai import (
    _calls,  # noqa: F401  (a fixture)
)


def test_without_the_extra_the_import_names_it() -> None:
    script = textwrap.dedent("""
        import sys
        sys.modules["agents"] = None  # as if the extra were not installed
        try:
            import parkway.integrations.openai_agents
        except ImportError as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert "pip install 'parkway[openai-agents]'" in done.stdout, done.stderr
