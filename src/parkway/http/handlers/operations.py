"""The routes of operations: workers, schedules, health, metrics, and the documents
(``/openapi.json``, the dashboard)."""

from __future__ import annotations

import math

from starlette.requests import Request
from starlette.responses import Response

from parkway import limits
from parkway.errors import MetricsDisabledError, ParkwayError, StoreError
from parkway.http import requests, responses
from parkway.http.dashboard import dashboard_response
from parkway.http.handlers.base import Handlers
from parkway.http.openapi import openapi_document
from parkway.http.parsing import Problem, json_response, parse_query, path_param, read_body
from parkway.http.responses import shaped


class OperationHandlers(Handlers):
    """``/workers``, ``/schedules``, ``/healthz``, ``/metrics``, ``/openapi.json``, ``/``."""

    async def workers(self, request: Request) -> Response:
        parse_query(request, requests.NoQuery)
        self._require_open()
        return json_response([worker.to_dict() for worker in await self.engine.workers()])

    async def schedules(self, request: Request) -> Response:
        self._require_open()
        return json_response(
            [shaped(i, responses.ScheduleOut) for i in await self.engine.schedules()]
        )

    async def pause_schedule(self, request: Request) -> Response:
        schedule_id = path_param(request, "id", limits.reference, "schedule id")
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        paused = await self.engine.pause_schedule(schedule_id)
        return json_response(shaped(paused, responses.ScheduleOut))

    async def resume_schedule(self, request: Request) -> Response:
        schedule_id = path_param(request, "id", limits.reference, "schedule id")
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        resumed = await self.engine.resume_schedule(schedule_id)
        return json_response(shaped(resumed, responses.ScheduleOut))

    async def healthz(self, request: Request) -> Response:
        self._require_open()
        try:  # a cheap read proves the store answers
            await self.engine.list_runs(limit=1)
        except ParkwayError as exc:
            wait = exc.retry_after if isinstance(exc, StoreError) else 5.0
            raise Problem(
                503,
                f"the store does not answer: {exc}",
                type(exc).__name__,
                {"Retry-After": f"{math.ceil(wait):d}"},
            ) from exc
        return json_response({"status": "ok"})

    async def metrics(self, request: Request) -> Response:
        self._require_open()
        try:
            body, content_type = await self.engine.render_metrics()
        except MetricsDisabledError as exc:
            raise Problem(404, str(exc), type(exc).__name__) from exc
        return Response(body, 200, media_type=content_type)

    async def openapi(self, request: Request) -> Response:
        # (The token is read on each request, so is whether the document says it is needed.)
        return json_response(openapi_document(token_required=bool(self.token())))

    async def dashboard(self, request: Request) -> Response:
        return dashboard_response()
