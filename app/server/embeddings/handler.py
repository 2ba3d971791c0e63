"""POST /v1/embeddings: a decoder's pooled hidden states (pooled.py) for each input, in
OpenAI's reply shape; the model is source.py's choice.

The forward runs on forward_thread's thread, never the event loop's: the chat engine's
thread keeps ticking meanwhile (the OS shares the cores between the two, as between the
fleet's engines), and requests' forwards queue there one after another. Over the served
chat model the weights are its engine's (read-only, no second copy)."""

from __future__ import annotations

import base64
import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from ..body import read_json
from ..errors import invalid
from . import forward_thread, pooled, source
from .request import parse

if TYPE_CHECKING:
    from ..app import ApiServer


def route(server: ApiServer) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The route's handler for `server` (a coroutine function, as aiohttp wants)."""
    async def handle(request: web.Request) -> web.Response:
        return await create(server, request)

    return handle


async def create(server: ApiServer, request: web.Request) -> web.Response:
    body = await read_json(request, server.config.max_body_bytes)
    name = body.get("model") if isinstance(body, dict) else None
    if not isinstance(name, str) or not name:
        raise invalid("model", "'model' must be a non-empty string")
    chosen = await _model(server, name)
    width, vocab = pooled.width_of(chosen.model), pooled.vocab_size_of(chosen.model)
    if pooled.body_of(chosen.model) is None or width is None or vocab is None:
        raise invalid("model", f"the model '{chosen.name}' has no transformer body this "
                               f"server can pool for embeddings")
    parsed = parse(body, chosen.encode, vocab, chosen.context_length, width)
    try:
        vectors = await forward_thread.run(
            lambda: pooled.embed(chosen.model, parsed.inputs, parsed.dimensions))
    except RuntimeError as exc:
        if "Stream" not in str(exc):
            raise
        # a weight loaded lazily on the loading thread (a GGUF's mlx-lm copy, which its
        # engine never runs) can be evaluated on that thread only
        raise invalid("model", f"the chat model '{chosen.name}' cannot be pooled from this "
                               f"thread (its weights load lazily); start the server with "
                               f"--embedding-model SOURCE") from None
    tokens = sum(len(ids) for ids in parsed.inputs)
    return web.json_response({
        "object": "list", "model": chosen.name,
        "data": [{"object": "embedding", "index": i,
                  "embedding": _encoded(v, parsed.encoding_format)}
                 for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


async def _model(server: ApiServer, name: str) -> source.EmbeddingModel:
    """The embedding model the server was given, else the chat model it serves."""
    if server.config.embedding_model:
        return await source.dedicated(server.config.embedding_model)
    target, served = server.serving(name)
    return source.served(target, served)


def _encoded(vector: list[float], fmt: str) -> list[float] | str:
    """float: the numbers; base64: their little-endian float32 bytes (what OpenAI sends and
    its clients decode)."""
    if fmt == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
