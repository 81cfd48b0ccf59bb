"""The ``parkway`` command line (also ``python -m parkway``).

``APP`` names an engine the way uvicorn names an app: ``module:attribute``,
imported with the current directory on ``sys.path``. Commands that inspect or
steer runs print JSON on stdout; errors go to stderr with a non-zero exit code.
"""

from __future__ import annotations

# Each module adds its commands to the group.
from parkway.cli import intake, runs, schedules, serving, tools  # noqa: F401
from parkway.cli.common import load_app
from parkway.cli.group import cli


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``parkway`` script and ``python -m parkway``."""
    cli.main(args=argv, prog_name="parkway")


__all__ = ["cli", "load_app", "main"]
