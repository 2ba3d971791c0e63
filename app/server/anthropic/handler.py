"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: an Anthropic body parsed into a
ChatRequest (request.py) and run on the server's one road (ApiServer.answering: the same
submit, the same Reply as the OpenAI routes), its events written as Anthropic's message
(message.py) or event stream (events.py). The `anthropic-version` header is taken and not
needed: one version of the API is spoken."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from aiohttp import web

from ...backend import LocalBackend
from ...request import RefusalCode
from .. import responses, schemas
from ..body import read_json
from ..dialect_reply import collect, ended_badly
from ..load_stream import sse_response
from . import message
from .events import Events
from .request import has_image_blocks, parse_count, parse_messages

if TYPE_CHECKING:
    from ...backend import LocalTarget
    from ...request import ChatRequest
    from ..app import ApiServer
    from ..choices import Choices
    from ..responses import Reply

log = logging.getLogger(__name__)

# the engine's finish reasons that end a reply without an answer: the server is stopping


async def messages(server: ApiServer, request: web.Request) -> web.StreamResponse:
    t0 = time.perf_counter()
    body = schemas.check_body(await read_json(request, server.config.max_body_bytes))
    target, model = server.serving(schemas.model_name(body))
    sees = LocalBackend(target).sees_images
    if has_image_blocks(body):  # images are decoded and checked off the loop (#52)
        parsed = await asyncio.to_thread(parse_messages, body, target.context_length,
                                         sees_images=sees)
    else:
        parsed = parse_messages(body, target.context_length, sees_images=sees)
    async with server.answering(target, model, parsed) as (choices, replies):
        if parsed.stream:
            return await _stream(server, request, target, parsed, choices, replies[0], t0)
        return await _whole(server, target, parsed, choices, replies[0], t0)


async def count_tokens(server: ApiServer, request: web.Request) -> web.Response:
    """The prompt's tokens as /v1/messages would run it (the same template, tools and
    thinking switch), without running it."""
    body = schemas.check_body(await read_json(request, server.config.max_body_bytes))
    target, _ = server.serving(schemas.model_name(body))
    backend = LocalBackend(target)
    tokens = backend.prompt_tokens(parse_count(body, sees_images=backend.sees_images))
    return web.json_response({"input_tokens": len(tokens)})


def _matched(target: LocalTarget, parsed: ChatRequest, choices: Choices,
             finish: str) -> str | None:
    """The stop sequence that ended the reply, if one did."""
    stops = getattr(parsed.params, "stop", ())  # parse_chat's SamplingParams
    if finish != "stop" or not stops:
        return None
    return message.stop_sequence(target.decode(choices.streams[0].tokens), stops)


async def _whole(server: ApiServer, target: LocalTarget, parsed: ChatRequest,
                 choices: Choices, reply: Reply, t0: float) -> web.Response:
    await collect(server, choices, reply, t0, "reply")
    openai = responses.full([reply], choices.streams)
    finish = openai["choices"][0]["finish_reason"]
    return web.json_response(message.whole(openai, message.message_id(), reply.model,
                                           _matched(target, parsed, choices, finish)))


async def _stream(server: ApiServer, request: web.Request, target: LocalTarget,
                  parsed: ChatRequest, choices: Choices, reply: Reply,
                  t0: float) -> web.StreamResponse:
    # the one opened while its model loaded (load_stream.py), or a new one
    response = sse_response(request, server.config.cors_origin)
    events = Events(message.message_id(), reply.model)
    try:
        await response.prepare(request)
        for data in events.start(len(choices.streams[0].prompt_tokens)):
            await response.write(data)
        last, finish = t0, "stop"
        async for _, event in choices.events():
            last = server.observe(event, t0, last)
            reply.add(event)
            refused = None if event.finish_reason is None \
                else ended_badly(event.finish_reason, event.error, "reply")
            if refused is not None:
                kind = "api_error" if refused.code is RefusalCode.ENGINE_ERROR \
                    else "overloaded_error"
                await response.write(events.error(kind, refused.message))
                await response.write_eof()
                return response
            for chunk in reply.chunks(event.text, None, event.finish_reason):
                choice = chunk["choices"][0]
                for data in events.delta(choice["delta"]):
                    await response.write(data)
                finish = choice["finish_reason"] or finish
        usage = message.usage(responses.usage([s.stats for s in choices.streams],
                                              reply.reasoning_tokens))
        matched = _matched(target, parsed, choices, finish)
        for data in events.finish(message.stop_reason(finish, matched), matched, usage):
            await response.write(data)
        await response.write_eof()
    except ConnectionError:
        # the client left between two of our writes (app.py's _stream says more)
        log.debug("a streaming client left before the end of its stream")
    return response
