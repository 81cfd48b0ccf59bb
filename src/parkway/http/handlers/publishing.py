"""The routes of events and messages: publish, correlate, browse, dead letters."""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from parkway.http import requests
from parkway.http.handlers.base import Handlers
from parkway.http.parsing import (
    from_validation,
    json_at,
    json_response,
    json_value,
    message_id_param,
    parse_body,
    parse_query,
    read_body,
    refuse_wide_integers,
)


class PublishingHandlers(Handlers):
    """``/events``, ``/messages`` and ``/subscriptions``."""

    async def publish(self, request: Request) -> Response:
        body = await parse_body(request, requests.PublishRequest)
        self._require_open()
        with json_at("payload"):
            result = await self.engine.publish(
                body.name, body.payload, id=body.id, domain=body.domain, subject=body.subject
            )
        return json_response(result.to_dict())

    async def correlate(self, request: Request) -> Response:
        body = await parse_body(request, requests.CorrelateRequest)
        self._require_open()
        with json_at("payload"):
            result = await self.engine.correlate(
                body.name, body.key, body.payload, message_id=body.message_id, ttl=body.ttl
            )
        return json_response(result.to_dict())

    async def events(self, request: Request) -> Response:
        query = parse_query(request, requests.EventsQuery)
        self._require_open()
        found = await self.engine.events(
            name=query.name, subject=query.subject, since=query.since, limit=query.limit
        )
        return json_response([event.to_dict() for event in found])

    async def subscriptions(self, request: Request) -> Response:
        query = parse_query(request, requests.SubscriptionsQuery)
        self._require_open()
        subs = await self.engine.subscriptions(run_id=query.run_id, name=query.name)
        return json_response([s.to_dict() for s in subs])

    async def messages(self, request: Request) -> Response:
        query = parse_query(request, requests.MessagesQuery)
        self._require_open()
        found = await self.engine.messages(status=query.status)
        return json_response([m.to_dict() for m in found])

    async def retry_message(self, request: Request) -> Response:
        message_id = message_id_param(request)
        raw = await read_body(request)
        data = json_value(raw, required=False, exact=False)
        try:
            body = requests.RetryMessageRequest.model_validate({} if data is None else data)
        except ValidationError as exc:
            raise from_validation("body", exc) from None
        refuse_wide_integers(raw)
        self._require_open()
        result = await self.engine.retry_message(message_id, ttl=body.ttl)
        return json_response(result.to_dict())

    async def discard_message(self, request: Request) -> Response:
        message_id = message_id_param(request)
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        await self.engine.discard_message(message_id)
        return json_response({"id": message_id})
