"""The routes of people: callbacks (completed by a third party holding the token)
and human tasks."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from parkway import limits
from parkway.errors import InvalidInputError
from parkway.http import requests, responses
from parkway.http.handlers.base import Handlers
from parkway.http.parsing import (
    Invalid,
    field_error,
    json_at,
    json_path,
    json_response,
    json_value,
    parse_body,
    parse_query,
    path_param,
    read_body,
)
from parkway.http.responses import shaped


class PeopleHandlers(Handlers):
    """``/callbacks/{token}`` and ``/tasks``."""

    async def complete_callback(self, request: Request) -> Response:
        token = request.path_params["token"]
        value = json_value(await read_body(request), required=False)
        self._require_open()
        with json_at():
            done = await self.engine.complete_callback(token, value)
        return json_response(shaped(done, responses.CallbackOut))

    async def fail_callback(self, request: Request) -> Response:
        token = request.path_params["token"]
        body = await parse_body(request, requests.CallbackFailRequest)
        self._require_open()
        try:
            done = await self.engine.fail_callback(token, body.message)
        except InvalidInputError as exc:  # (a control character, say)
            error = field_error(["body", "message"], str(exc), type(exc).__name__)
            raise Invalid([error]) from None
        return json_response(shaped(done, responses.CallbackOut))

    async def tasks(self, request: Request) -> Response:
        query = parse_query(request, requests.TasksQuery)
        self._require_open()
        found = await self.engine.tasks(
            status=None if query.status == "all" else query.status,
            assignee=query.assignee,
            workflow=query.workflow,
            limit=query.limit,
        )
        return json_response([task.to_dict() for task in found])

    async def get_task(self, request: Request) -> Response:
        task_id = path_param(request, "id", limits.reference, "task id")
        self._require_open()
        return json_response((await self.engine.get_task(task_id)).to_dict())

    async def complete_task(self, request: Request) -> Response:
        task_id = path_param(request, "id", limits.reference, "task id")
        body = await parse_body(request, requests.CompleteTaskRequest)
        self._require_open()
        try:
            done = await self.engine.complete_task(task_id, body.result, by=body.by)
        except InvalidInputError as exc:  # the form's refusal: loc names the field
            loc: list[str | int] = ["body", "result", *json_path(exc.field)]
            raise Invalid([field_error(loc, str(exc), type(exc).__name__)]) from None
        return json_response(done.to_dict())
