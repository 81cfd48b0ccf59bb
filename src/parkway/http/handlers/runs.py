"""The routes of runs: start, list, inspect, signal, update, stream, control, fork."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

from pydantic import ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from parkway import _json, limits
from parkway.errors import InvalidInputError
from parkway.http import requests
from parkway.http.handlers.base import Handlers, by
from parkway.http.parsing import (
    Invalid,
    field_error,
    from_validation,
    json_at,
    json_response,
    json_value,
    parse_body,
    parse_query,
    path_param,
    read_body,
    run_id_param,
)
from parkway.models import UNSET, RunStatus, StreamItem


class RunHandlers(Handlers):
    """``/runs`` and ``/runs/{id}/...``."""

    async def start(self, request: Request) -> Response:
        body = await parse_body(request, requests.StartRequest)
        self._require_open()
        with json_at("input"):  # (a client engine starts a name it does not know unchecked)
            handle = await self.engine.start(
                body.workflow,
                body.input,
                id=body.id,
                subject=body.subject,
                domain=body.domain,
                priority=body.priority,
                timeout=body.timeout,
            )
        return json_response({"id": handle.id}, 201)

    async def list_runs(self, request: Request) -> Response:
        query = parse_query(request, requests.RunsQuery)
        self._require_open()
        try:  # one run more than asked for tells whether another page follows
            runs = await self.engine.list_runs(
                workflow=query.workflow,
                status=query.status,
                subject=query.subject,
                domain=query.domain,
                limit=query.limit + 1,
                search=query.search,
                parent_id=query.parent_id,
                created_after=query.created_after,
                created_before=query.created_before,
                before=query.before,
            )
        except InvalidInputError as exc:
            if exc.field not in requests.RunsQuery.model_fields:
                raise
            error = field_error(["query", exc.field], str(exc), type(exc).__name__)
            raise Invalid([error]) from None
        headers = None
        if len(runs) > query.limit:
            runs = runs[: query.limit]
            # (Percent-encoded: a header holds latin-1 only, a run id any text.)
            headers = {requests.NEXT_PAGE_HEADER: quote(runs[-1].id, safe="")}
        unserved = set(await self.engine.unserved_runs()) if runs else set()
        listed = [{**r.to_dict(), "unserved": r.id in unserved} for r in runs]
        return json_response(listed, headers=headers)

    async def run_counts(self, request: Request) -> Response:
        parse_query(request, requests.NoQuery)
        self._require_open()
        return json_response(await self.engine.run_counts())

    async def get_run(self, request: Request) -> Response:
        run_id = run_id_param(request)
        self._require_open()
        info = await self.engine.get_run(run_id)
        return json_response(info.to_dict())

    async def history(self, request: Request) -> Response:
        run_id = run_id_param(request)
        self._require_open()
        entries = await self.engine.history(run_id)
        return json_response([e.to_dict() for e in entries])

    async def signal(self, request: Request) -> Response:
        run_id = run_id_param(request)
        name = path_param(request, "name", limits.name, "signal name")
        payload = json_value(await read_body(request), required=False)
        self._require_open()
        with json_at():
            await self.engine.signal(run_id, name, payload)
        return json_response({"id": run_id, "signal": name}, 202)

    async def values(self, request: Request) -> Response:
        run_id = run_id_param(request)
        self._require_open()
        return json_response(await self.engine.values(run_id))

    async def value(self, request: Request) -> Response:
        run_id = run_id_param(request)
        key = path_param(request, "name", limits.name, "value key")
        query = parse_query(request, requests.ValueQuery)
        self._require_open()
        with json_at():
            found = await self.engine.value(run_id, key, timeout=query.timeout)
        return json_response({"key": key, "value": found})

    async def stream(self, request: Request) -> Response:
        run_id = run_id_param(request)
        key = path_param(request, "key", limits.name, "stream key")
        query = parse_query(request, requests.StreamQuery)
        offset = _resume_offset(request, query.offset)
        self._require_open()
        if _wants_json(request):
            items = await self.engine.read_stream(run_id, key, offset=offset, limit=query.limit)
            return json_response([item.to_dict() for item in items])
        # The run must exist before the 200 (a stream cannot turn into a 404), and a
        # resume past the end of a run that has ended gets a 204, which tells an
        # EventSource not to reconnect. (Its status is read first: the items its
        # end committed with are then seen by the read after.)
        ended = (await self.engine.get_run(run_id)).status in _ENDED
        if ended and not await self.engine.read_stream(run_id, key, offset=offset, limit=1):
            return Response(status_code=204)
        follow = self.engine.stream(run_id, key, offset=offset)
        return EventSourceResponse(_events(follow, offset), ping=SSE_KEEPALIVE)

    async def update(self, request: Request) -> Response:
        run_id = run_id_param(request)
        name = path_param(request, "name", limits.name, "update name")
        body = await parse_body(request, requests.UpdateRequest)
        self._require_open()
        with json_at():
            result = await self.engine.update(
                run_id, name, body.payload, id=body.id, timeout=body.timeout, by=by(request)
            )
        return json_response({"result": result})

    async def cancel(self, request: Request) -> Response:
        run_id = run_id_param(request)
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        await self.engine.cancel(run_id, by=by(request))
        return json_response({"id": run_id}, 202)

    async def pause(self, request: Request) -> Response:
        run_id = run_id_param(request)
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        return json_response((await self.engine.pause(run_id, by=by(request))).to_dict())

    async def resume(self, request: Request) -> Response:
        run_id = run_id_param(request)
        await read_body(request)
        self._require_open()
        return json_response((await self.engine.resume(run_id, by=by(request))).to_dict())

    async def retry(self, request: Request) -> Response:
        run_id = run_id_param(request)
        await read_body(request)
        self._require_open()
        return json_response((await self.engine.retry(run_id, by=by(request))).to_dict())

    async def fork(self, request: Request) -> Response:
        run_id = run_id_param(request)
        data = json_value(await read_body(request), required=False)
        try:
            body = requests.ForkRequest.model_validate({} if data is None else data)
        except ValidationError as exc:
            raise from_validation("body", exc) from None
        self._require_open()
        given = "input" in body.model_fields_set
        with json_at("input"):
            handle = await self.engine.fork(
                run_id,
                at=body.at,
                input=body.input if given else UNSET,
                id=body.id,
                by=by(request),
            )
        return json_response((await handle.info()).to_dict(), 201)

    async def cancel_runs(self, request: Request) -> Response:
        body = await parse_body(request, requests.BulkRequest)
        self._require_open()
        count = await self.engine.cancel_runs(
            workflow=body.workflow,
            status=body.status,
            subject=body.subject,
            created_before=body.created_before,
            by=by(request),
        )
        return json_response({"count": count})

    async def retry_runs(self, request: Request) -> Response:
        body = await parse_body(request, requests.BulkRequest)
        self._require_open()
        count = await self.engine.retry_runs(
            workflow=body.workflow,
            status=body.status,
            subject=body.subject,
            created_before=body.created_before,
            by=by(request),
        )
        return json_response({"count": count})


_ENDED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
# Seconds between keep-alive comments on a quiet event stream (proxies drop idle ones).
SSE_KEEPALIVE = 15.0


def _wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/event-stream" not in accept


def _resume_offset(request: Request, offset: int) -> int:
    """Where an event stream resumes: after its ``Last-Event-ID`` (an EventSource
    reconnecting sends the last id it saw), else at ``?offset=``."""
    last = request.headers.get("last-event-id")
    if last is None or last == "":
        return offset
    if not limits.ascii_digits(last) or len(last) > 18:
        message = f"Last-Event-ID must be the offset of an item (digits), got {last[:40]!r}"
        raise Invalid([field_error(["header", "Last-Event-ID"], message, "offset")])
    return int(last) + 1


async def _events(items: AsyncIterator[StreamItem], offset: int) -> AsyncIterator[ServerSentEvent]:
    """The event stream: each item with its offset as id, then ``end``."""
    try:
        async for item in items:
            yield ServerSentEvent(_json.dumps(item.to_dict()).decode(), id=str(item.offset))
            offset = item.offset + 1
        yield ServerSentEvent(_json.dumps({"offset": offset}).decode(), event="end")
    finally:
        await items.aclose()  # type: ignore[attr-defined]
