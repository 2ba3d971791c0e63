"""`POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`: a Responses body parsed into
a ChatRequest (request.py) and run on the server's one road (ApiServer.answering: the same
submit, the same Reply as the chat route), written as a response object (output.py) or its
event stream (events.py). A response is stored (`store`, default true as OpenAI's) with its
whole input, so `previous_response_id` continues from it (keeper.py: `batchchat serve`'s
file, or the app's history)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ...backend import LocalBackend
from ...request import Refusal, RefusalCode
from .. import errors, responses, schemas
from ..body import read_json
from ..dialect_reply import collect, ended_badly
from ..load_stream import sse_response
from . import output
from .events import Events
from .output import Envelope
from .request import has_images, input_items, parse_responses, previous_of, store_of

if TYPE_CHECKING:
    from ..app import ApiServer
    from ..choices import Choices
    from ..responses import Reply

log = logging.getLogger(__name__)



async def create(server: ApiServer, request: web.Request) -> web.StreamResponse:
    t0 = time.perf_counter()
    body = schemas.check_body(await read_json(request, server.config.max_body_bytes))
    store = store_of(body)
    items = await _earlier(server, previous_of(body)) + input_items(body.get("input"))
    target, model = server.serving(schemas.model_name(body))
    context = server.config.default_max_tokens or target.context_length
    sees = LocalBackend(target).sees_images
    if has_images(items):  # images are decoded and checked off the loop (#52)
        parsed = await asyncio.to_thread(parse_responses, body, items, context,
                                         sees_images=sees)
    else:
        parsed = parse_responses(body, items, context, sees_images=sees)
    envelope = Envelope(body, model)
    async with server.answering(target, model, parsed) as (choices, replies):
        if parsed.stream:
            return await _stream(server, request, envelope, items, store, choices,
                                 replies[0], t0)
        response = await _whole(server, envelope, choices, replies[0], t0)
    if store:
        await _put(server, response["id"], items, response)
    return web.json_response(response)


async def retrieve(server: ApiServer, request: web.Request) -> web.Response:
    stored = await server.stored_responses.get(request.match_info["id"])
    if stored is None:
        return _not_found(request.match_info["id"])
    return web.json_response(stored[1])


async def delete(server: ApiServer, request: web.Request) -> web.Response:
    response_id = request.match_info["id"]
    if not await server.stored_responses.delete(response_id):
        return _not_found(response_id)
    return web.json_response({"id": response_id, "object": "response", "deleted": True})


def _not_found(response_id: str) -> web.Response:
    """OpenAI's 404 for an unknown response id."""
    message = (f"no stored response with id '{response_id}' (it was not stored, was "
               "deleted, or is past the retention)")
    return web.json_response(errors.error_body(message, 404, code="not_found"), status=404)


async def _earlier(server: ApiServer, previous: str | None) -> list[dict[str, Any]]:
    """The conversation so far of `previous_response_id`: its input items and its output
    items (reasoning, messages, calls), as the next input continues them."""
    if previous is None:
        return []
    stored = await server.stored_responses.get(previous)
    if stored is None:
        raise Refusal(RefusalCode.INVALID_VALUE, f"'previous_response_id': no stored "
                      f"response with id '{previous}'", param="previous_response_id")
    items, response = stored
    return items + [_as_input(item) for item in response["output"]]


def _as_input(item: Mapping[str, Any]) -> dict[str, Any]:
    """An output item as the input item it becomes (ids and statuses dropped)."""
    if item["type"] == "message":
        return {"type": "message", "role": "assistant", "content": item["content"]}
    if item["type"] == "function_call":
        return {k: item[k] for k in ("type", "call_id", "name", "arguments")}
    return {"type": "reasoning", "content": item.get("content") or [], "summary": []}


async def _put(server: ApiServer, response_id: str, items: list[dict[str, Any]],
               response: dict[str, Any]) -> None:
    await server.stored_responses.put(response_id, items, response)


async def _whole(server: ApiServer, envelope: Envelope, choices: Choices, reply: Reply,
                 t0: float) -> dict[str, Any]:
    await collect(server, choices, reply, t0, "response")
    chat = responses.full([reply], choices.streams)
    choice = chat["choices"][0]
    return envelope.response("completed", output.items(choice["message"]),
                             output.usage(chat["usage"]), choice["finish_reason"])


async def _stream(server: ApiServer, request: web.Request, envelope: Envelope,
                  items: list[dict[str, Any]], store: bool, choices: Choices, reply: Reply,
                  t0: float) -> web.StreamResponse:
    # the one opened while its model loaded (load_stream.py), or a new one
    response = sse_response(request, server.config.cors_origin)
    events = Events(envelope)
    try:
        await response.prepare(request)
        for data in events.start():
            await response.write(data)
        last, finish = t0, "stop"
        async for _, event in choices.events():
            last = server.observe(event, t0, last)
            reply.add(event)
            refused = None if event.finish_reason is None \
                else ended_badly(event.finish_reason, event.error, "response")
            if refused is not None:
                await response.write(events.failed(refused.message))
                await response.write_eof()
                return response
            for chunk in reply.chunks(event.text, None, event.finish_reason):
                choice = chunk["choices"][0]
                for data in events.delta(choice["delta"]):
                    await response.write(data)
                finish = choice["finish_reason"] or finish
        usage = output.usage(responses.usage([s.stats for s in choices.streams],
                                             reply.reasoning_tokens, reply.dropped))
        done, whole = events.finish(usage, finish)
        if store:  # stored before the client reads the end: a next request can follow it
            await _put(server, whole["id"], items, whole)
        for data in done:
            await response.write(data)
        await response.write_eof()
    except ConnectionError:
        # the client left between two of our writes (app.py's _stream says more)
        log.debug("a streaming client left before the end of its stream")
    return response

