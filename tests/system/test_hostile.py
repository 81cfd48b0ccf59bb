"""Hostile input through the Python API, on every backend: each is refused with a
``ParkwayError`` naming what is wrong (never a bare Python or driver error), the same way on
every backend, nothing is written, and the engine works on after it.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_hostile.py.
"""

from __future__ import annotations

from pathlib import Path

from parkway.limits import (
    MAX_DEPTH,
    MAX_DURATION_SECONDS,
)


def test_the_command_line_holds_to_the_same_limits(tmp_path: Path) -> None:
    from tests.helpers import failed, ok_json, parkway

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    (tmp_path / "cliapp.py").write_text(
        f"from parkway import Engine\n\nengine = Engine({url!r})\n\n\n"
        "@engine.workflow()\nasync def echo(ctx, input):\n    return input\n"
    )
    app = ("--app", "cliapp:engine")
    buffered = ok_json(parkway("correlate", "m", "k", "{}", "--ttl", "36525d", *app, cwd=tmp_path))
    assert buffered["outcome"] == "buffered"
    for ttl in ("٣s", "٣", "36526d", str(MAX_DURATION_SECONDS + 1), "9" * 400):
        failed(parkway("correlate", "m", "k", "{}", "--ttl", ttl, *app, cwd=tmp_path), "100 years")
    for message_id in ("٣", "²", "1.0", "0x1"):
        failed(parkway("messages", "discard", message_id, *app, cwd=tmp_path), "not a message id")
    for message_id in ("9223372036854775808", "9" * 30):
        failed(
            parkway("messages", "retry", message_id, *app, cwd=tmp_path),
            "no buffered message or dead letter",
        )
    failed(parkway("start", "echo", "1", "--id", "a\nb", *app, cwd=tmp_path), "control character")
    failed(parkway("start", "echo", "1", "--id", "i" * 256, *app, cwd=tmp_path), "at most 255")
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    failed(parkway("start", "echo", deep, *app, cwd=tmp_path), "nested deeper than 128")
    assert len(ok_json(parkway("messages", "--json", *app, cwd=tmp_path))) == 1
