"""The ``parkway`` command line (also ``python -m parkway``).

``APP`` names an engine the way uvicorn names an app: ``module:attribute``,
imported with the current directory on ``sys.path``. Commands that inspect or
steer runs print JSON on stdout (listings print a table, or JSON with
``--json``); errors go to stderr with a non-zero exit code.
"""

from __future__ import annotations

import click

# Each module adds its commands to the group.
from parkway.cli import (  # noqa: F401
    controls,
    fleet,
    mcp_server,
    publishing,
    repairs,
    runs,
    schedules,
    serving,
    tasks,
    tools,
)
from parkway.cli.common import load_app, url_option
from parkway.cli.group import cli


def _url_after(command: click.Command) -> None:
    """Every command takes ``--url`` after its name as well as before it."""
    for sub in command.commands.values() if isinstance(command, click.Group) else ():
        _url_after(sub)
    if command is not cli and not any(p.name == "url" for p in command.params):
        command.params.append(url_option())


_url_after(cli)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``parkway`` script and ``python -m parkway``."""
    cli.main(args=argv, prog_name="parkway")


__all__ = ["cli", "load_app", "main"]
