"""The CLI's event and message commands: publish, correlate, messages (retry, discard)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import failed, ok_json, parkway, write_app

APP_SOURCE = """
from parkway import Engine

engine = Engine({url!r})


@engine.workflow(on_event="order.created")
async def order(ctx, input):
    return await ctx.wait_for_event("order.paid", match={{"order_id": input["order_id"]}})


@engine.workflow()
async def loan(ctx, key):
    return await ctx.wait_for_message("score", key)
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path / 'events.db'}"
    write_app(tmp_path, "eventapp", APP_SOURCE, url)
    return tmp_path


def test_publish_starts_subscribers_and_reports_the_result(app: Path) -> None:
    result = ok_json(
        parkway(
            "publish",
            "order.created",
            '{"order_id": 7}',
            "--id",
            "e1",
            "--app",
            "eventapp:engine",
            cwd=app,
        )
    )
    assert result["started"] == ["evt:e1:order"]
    assert result["touched"] == 1 and result["duplicate"] is False
    again = ok_json(
        parkway(
            "publish",
            "order.created",
            '{"order_id": 7}',
            "--id",
            "e1",
            "--app",
            "eventapp:engine",
            cwd=app,
        )
    )
    assert again["duplicate"] is True and again["started"] == []


def test_publish_without_an_app_records_the_event_and_says_what_it_skips(app: Path) -> None:
    ok_json(parkway("publish", "order.created", "{}", "--app", "eventapp:engine", cwd=app))
    url = f"sqlite:///{app / 'events.db'}"
    bare = parkway(
        "--url", url, "publish", "order.created", '{"order_id": 9}', "--id", "e9", cwd=app
    )
    assert ok_json(bare)["started"] == []
    assert "no --app" in bare.stderr
    again = parkway("--url", url, "publish", "order.created", "{}", "--id", "e9", cwd=app)
    assert ok_json(again)["duplicate"] is True


def test_publish_needs_valid_json(app: Path) -> None:
    failed(
        parkway("publish", "order.created", "{oops", "--app", "eventapp:engine", cwd=app),
        "not valid JSON",
    )
    failed(parkway("publish", " ", "{}", "--app", "eventapp:engine", cwd=app), "event name")


def test_correlate_buffers_then_messages_lists_retries_and_discards(app: Path) -> None:
    buffered = ok_json(
        parkway("correlate", "score", "APP-1", '{"v": 1}', "--app", "eventapp:engine", cwd=app)
    )
    assert buffered == {"outcome": "buffered", "run_id": None}
    listed = ok_json(parkway("messages", "--json", "--app", "eventapp:engine", cwd=app))
    assert [(m["name"], m["key"], m["payload"], m["status"]) for m in listed] == [
        ("score", "APP-1", {"v": 1}, "buffered")
    ]
    message_id = listed[0]["id"]
    retried = ok_json(
        parkway("messages", "retry", str(message_id), "--app", "eventapp:engine", cwd=app)
    )
    assert retried["outcome"] == "buffered"
    newest = ok_json(
        parkway("messages", "--json", "--status", "buffered", "--app", "eventapp:engine", cwd=app)
    )
    assert len(newest) == 1
    # Buffered again, it is a new message: the retry printed its id.
    assert retried["id"] == newest[0]["id"] != message_id
    table = parkway("messages", "--app", "eventapp:engine", cwd=app)
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["ID", "NAME", "KEY", "STATUS", "RECEIVED", "EXPIRES", "REASON"]
    assert row.split()[:4] == [str(retried["id"]), "score", "APP-1", "buffered"]
    gone = ok_json(
        parkway("messages", "discard", str(newest[0]["id"]), "--app", "eventapp:engine", cwd=app)
    )
    assert gone == {"discarded": newest[0]["id"]}
    assert ok_json(parkway("messages", "--json", "--app", "eventapp:engine", cwd=app)) == []
    empty = parkway("messages", "--app", "eventapp:engine", cwd=app)
    assert empty.stdout.strip() == "no buffered messages or dead letters"


def test_correlate_bad_input_is_refused(app: Path) -> None:
    failed(
        parkway(
            "correlate", "score", "APP-1", "{}", "--ttl", "0", "--app", "eventapp:engine", cwd=app
        ),
        "no run waits for message 'score' with key 'APP-1'",
    )
    failed(
        parkway(
            "correlate",
            "score",
            "APP-1",
            "{}",
            "--ttl",
            "soon",
            "--app",
            "eventapp:engine",
            cwd=app,
        ),
        "soon",
    )
    failed(
        parkway("messages", "discard", "999", "--app", "eventapp:engine", cwd=app),
        "no buffered message or dead letter with id 999",
    )
    assert ok_json(parkway("messages", "--json", "--app", "eventapp:engine", cwd=app)) == []
