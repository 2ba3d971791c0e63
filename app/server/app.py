"""The HTTP server: routes, middleware (errors, shutdown, auth, CORS), start and stop.

It serves whatever local model `target()` returns at request time (an app.bridge LocalTarget:
the app's, which can change model; None answers 503), on the running asyncio loop, so API
requests join the same continuous batch as the chat tabs and the simulator.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..backend import LocalBackend
from ..request import Refusal, RefusalCode, attachments
from ..storage.stored_responses import StoredResponses
from . import errors, file_parts, image_parts, model_names, openapi, responses, schemas, tooling
from .anthropic import errors as anthropic_errors
from .anthropic import handler as anthropic
from .body import read_json
from .choices import Choices
from .connection import Limits, Runner
from .embeddings import handler as embeddings
from .load_stream import sse_response
from .metrics import ServerMetrics
from .responses import Reply, sse
from .responses_api import handler as responses_api
from .responses_api.keeper import ResponseKeeper

if TYPE_CHECKING:
    from engine.public import EventStream, RequestStats

    from ..backend import LocalTarget
    from ..request import ChatRequest
    from .fleet_api import FleetApi

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPEN_PATHS = ("/health",)  # answered without a key (liveness probes)


@dataclass(slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000  # 0 = any free port (see ApiServer.port once started)
    api_key: str | None = None  # required as "Authorization: Bearer KEY" when set
    max_body_bytes: int = 4 << 20  # larger bodies get 413
    cors_origin: str | None = None  # no CORS headers unless set ("*" or one origin)
    retry_after_s: int = 1  # the Retry-After of a 429
    priority: str = "interactive"  # the engine priority class of API requests
    tag: str = "api"  # the engine tag: the stats panel's source column
    default_max_tokens: int | None = None  # chat without max_tokens: None = to the context end
    access_log: bool = False
    # a connection must send a whole request head within this long of connecting, or of the
    # head's first byte; a slower one is closed (a slowloris holds no connection for long)
    head_timeout_s: float = 10.0
    # and a request's whole body within this long of its head (408, then closed)
    body_timeout_s: float = 30.0
    # connections open at once; more are answered 503 and closed (None: half the process's
    # file-descriptor limit, at most 4096: running out of descriptors stops everything)
    max_connections: int | None = None
    log_interval_s: float = 10.0  # each of those conditions logs at most a line this often
    # `model`: any name while one model is served (llama-server's way; the reply names the
    # served id); strict: only the id and its aliases, else 404 listing them (model_names.py)
    strict_model_name: bool = False
    # /v1/embeddings' own model ("bundled", a .gguf, an mlx-lm dir); None: the chat model's
    embedding_model: str | None = None
    # when a chat outgrows the context and the request names no policy (overflow.py)
    context_overflow: str = "stop"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_address(config: ServerConfig) -> None:
    """ValueError for an address beyond loopback without an API key."""
    if not is_loopback(config.host) and not config.api_key:
        raise ValueError(f"refusing to listen on {config.host} without an API key: anyone on "
                         "the network could use the model (set an API key, or use 127.0.0.1)")


class ApiServer:
    def __init__(self, target: Callable[[], LocalTarget | None],
                 model_id: Callable[[], str | None],
                 config: ServerConfig | None = None,
                 on_finished: Callable[[RequestStats], None] | None = None,
                 model_aliases: Callable[[], Sequence[str]] | None = None,
                 fleet: FleetApi | None = None,
                 stored_responses: StoredResponses | ResponseKeeper | None = None) -> None:
        """`on_finished` gets each API request's engine stats when it ends (the app saves
        them to the history). `model_aliases()`: other names of the served model (its file
        name, its repo id: model_names.aliases_of). `fleet`: several models (issue #50,
        app/server/fleet_api.py), whose `target` and `model_id` are the two callables.
        `stored_responses`: where /v1/responses keeps responses (a StoredResponses:
        `batchchat serve`'s history file, called in a thread; a ResponseKeeper: the app's
        history; None: in memory, for this process only)."""
        self.config = config or ServerConfig()
        self._on_finished = on_finished
        self._target = target
        self._model_id = model_id
        self._model_aliases = model_aliases or (lambda: ())
        self.fleet = fleet
        if fleet is not None:  # its streams opened early while a model loads carry it too
            fleet.cors_origin = self.config.cors_origin
        self.stored_responses = stored_responses if isinstance(stored_responses, ResponseKeeper) \
            else ResponseKeeper(stored_responses or StoredResponses())
        self.metrics = ServerMetrics()
        self.closing = False
        self._runner: web.AppRunner | None = None
        self._streams: set[EventStream] = set()
        self._idle = asyncio.Event()
        self._token_text: tuple[Any, dict[int, str]] = (None, {})  # (target, id -> text)
        self.port: int | None = None

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._runner is not None

    @property
    def url(self) -> str:
        host = self.config.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    async def start(self) -> str:
        """Bind and serve on the running loop; the base URL. Refuses a non-loopback address
        without an API key (ValueError), and an address in use (OSError)."""
        cfg = self.config
        check_address(cfg)
        app = web.Application(client_max_size=cfg.max_body_bytes,
                              middlewares=[self._errors, self._cors, self._gate,
                                           *([self.fleet.middleware] if self.fleet else [])])
        app.add_routes([
            web.get("/health", self._health),
            web.get("/metrics", self._metrics),
            web.get("/v1/models", self._models),
            web.post("/v1/chat/completions", self._chat),
            web.post("/v1/completions", self._completions),
            web.post("/v1/messages", self._messages),
            web.post("/v1/messages/count_tokens", self._count_tokens),
            web.post("/v1/responses", self._responses),
            web.get("/v1/responses/{id}", self._get_response),
            web.delete("/v1/responses/{id}", self._delete_response),
            web.post("/v1/embeddings", embeddings.route(self)),
            web.get("/openapi.json", self._openapi),
            *(self.fleet.routes() if self.fleet else []),
        ])
        # handler_cancellation: a client that disconnects cancels its handler, which
        # cancels its engine request (the engine drops it on its next tick)
        # Runner: requests aiohttp cannot parse get JSON errors, slow heads and bodies time
        # out, connections beyond the cap are refused
        limits = Limits(head_timeout_s=cfg.head_timeout_s, body_timeout_s=cfg.body_timeout_s,
                        max_connections=cfg.max_connections, log_interval_s=cfg.log_interval_s)
        runner = Runner(app, limits=limits, handler_cancellation=True,
                        shutdown_timeout=2.0, access_log=log if cfg.access_log else None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, cfg.host, cfg.port, reuse_address=True)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        self.closing = False
        return self.url

    async def stop(self, grace_s: float = 0.0, linger_s: float = 0.0) -> None:
        """New requests get 503 at once; in-flight ones may finish for `grace_s`, then are
        cancelled (their streams end with finish reason "cancelled" and [DONE]); the port
        keeps answering 503 until at least `linger_s` after the call (a client that comes
        just after a SIGTERM is told the server is stopping, not refused); then the socket
        closes."""
        if self._runner is None or self.closing:
            return
        self.closing = True
        loop = asyncio.get_running_loop()
        close_at = loop.time() + linger_s
        if grace_s > 0:
            await self._until_idle(grace_s)
        for stream in list(self._streams):
            stream.cancel()
        if not await self._until_idle(5.0):  # the engine ends them on its next tick
            log.warning("%d API streams still open at shutdown", len(self._streams))
        await asyncio.sleep(max(0.0, close_at - loop.time()))
        await self._runner.cleanup()
        self._runner = None  # `running` until the port is released

    async def _until_idle(self, timeout: float) -> bool:
        """Wait until no request is in flight; False if some still are after `timeout`."""
        if not self._streams:
            return True
        self._idle.clear()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # -- middleware ---------------------------------------------------------------------
    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every error in OpenAI's shape (Anthropic's under /v1/messages), and a count per
        endpoint and status."""
        anthropic_shape = anthropic_errors.speaks_anthropic(request.path)
        try:
            response = await handler(request)
        except Refusal as refusal:
            response = (anthropic_errors if anthropic_shape else errors).response(
                refusal, self.config.retry_after_s)
        except web.HTTPException as exc:  # aiohttp's own: unknown route, wrong method
            if exc.status < 400:
                raise
            code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status)
            body = anthropic_errors.error_body(exc.reason, exc.status) if anthropic_shape \
                else errors.error_body(exc.reason, exc.status, code=code)
            response = web.json_response(body, status=exc.status, headers=_allow(exc))
        resource = getattr(request.match_info.route, "resource", None)
        endpoint = resource.canonical if resource is not None else "other"
        self.metrics.count_response(endpoint, response.status)
        return response

    @web.middleware
    async def _cors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = self.config.cors_origin
        if origin is None:
            return await handler(request)
        headers = {"Access-Control-Allow-Origin": origin,
                   # x-api-key and anthropic-version: Anthropic's clients send them
                   "Access-Control-Allow-Headers": "Authorization, Content-Type, x-api-key, "
                                                   "anthropic-version",
                   "Access-Control-Allow-Methods": "GET, POST, DELETE, OPTIONS"}
        if request.method == "OPTIONS":  # a preflight
            return web.Response(status=204, headers=headers)
        response = await handler(request)
        if not response.prepared:
            response.headers.update(headers)
        return response

    @web.middleware
    async def _gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.closing:
            raise Refusal(RefusalCode.SHUTTING_DOWN, "the server is shutting down")
        key = self.config.api_key
        if key and request.path not in OPEN_PATHS:
            given = request.headers.get("Authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer":  # Anthropic's clients send the key as x-api-key
                token = request.headers.get("x-api-key", "")
            # compare_digest: the time taken does not tell how much of a guess was right
            if not hmac.compare_digest(token.strip().encode(), key.encode()):
                raise Refusal(RefusalCode.INVALID_API_KEY, "missing or wrong API key: send "
                                                           "'Authorization: Bearer KEY' or "
                                                           "'x-api-key: KEY'")
        return await handler(request)

    # -- simple endpoints ---------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        if self.fleet is None and self._target() is None:  # several: loaded on demand
            raise Refusal(RefusalCode.MODEL_NOT_READY, "no model is loaded")
        return web.json_response({"status": "ok"})

    async def _metrics(self, request: web.Request) -> web.Response:
        target = self._target()
        text = self.fleet.metrics(self.metrics) if self.fleet is not None else \
            self.metrics.render(target.stats() if target else None)
        return web.Response(text=text,
                            content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Version": "0.0.4"})

    async def _openapi(self, request: web.Request) -> web.Response:
        """The description of this server as it validates now: the served model's names."""
        if self.fleet is not None:
            return web.json_response(self.fleet.document())
        served = self._model_id()
        names = [] if served is None else model_names.names(served, self._model_aliases())
        return web.json_response(openapi.document(names, any_name=not
                                                  self.config.strict_model_name))

    async def _models(self, request: web.Request) -> web.Response:
        if self.fleet is not None:
            return web.json_response(self.fleet.models())
        model = self._model_id()
        data = [] if model is None else [
            {"id": model, "object": "model", "created": 0, "owned_by": "batchchat"}]
        return web.json_response({"object": "list", "data": data})

    # -- completions --------------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "chat")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "completion")

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await anthropic.messages(self, request)

    async def _count_tokens(self, request: web.Request) -> web.Response:
        return await anthropic.count_tokens(self, request)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await responses_api.create(self, request)

    async def _get_response(self, request: web.Request) -> web.Response:
        return await responses_api.retrieve(self, request)

    async def _delete_response(self, request: web.Request) -> web.Response:
        return await responses_api.delete(self, request)

    async def _complete(self, request: web.Request, kind: str) -> web.StreamResponse:
        t0 = time.perf_counter()
        body = schemas.check_body(await read_json(request, self.config.max_body_bytes))
        target, model = self.serving(schemas.model_name(body))
        citations: tuple[Any, ...] = ()
        if kind == "chat" and (file_parts.has_files(body) or image_parts.has_images(body)):
            # files are read, and indexed when they do not fit, off the loop (#51); images
            # decoded and checked there too (#52)
            parsed = await asyncio.to_thread(schemas.parse_chat, body,
                                             self.config.default_max_tokens
                                             or target.context_length)
            parsed, files = await asyncio.to_thread(attachments.fitted, parsed, target)
            # the passages retrieved for the last message with files: `citations`
            citations = files[-1].citations if files else ()
        elif kind == "chat":
            parsed = schemas.parse_chat(body, self.config.default_max_tokens
                                        or target.context_length)
        else:
            parsed = schemas.parse_completion(body, 16)  # OpenAI's default for completions
        # a model that reads text only: a 400 naming the first image part (#52)
        image_parts.refuse_if_text_only(parsed.messages, LocalBackend(target).sees_images,
                                        model)
        if kind == "chat" and image_parts.has_images(body):
            # the model's image processor (decode, resize) off the loop: the submit below
            # finds its work done (engine/vision/prepared.py); a refusal is the 400 here
            await asyncio.to_thread(LocalBackend(target).prompt_tokens, replace(
                parsed, context_overflow=parsed.context_overflow
                or self.config.context_overflow))
        async with self.answering(target, model, parsed, citations) as (choices, replies):
            if parsed.stream:
                return await self._stream(request, choices, replies, parsed.include_usage, t0)
            return await self._whole(choices, replies, t0)

    @asynccontextmanager
    async def answering(self, target: LocalTarget, model: str, parsed: ChatRequest,
                        citations: tuple[Any, ...] = ()
                        ) -> AsyncIterator[tuple[Choices, list[Reply]]]:
        """`parsed` submitted (every API dialect's requests): its choices' streams and a
        Reply per choice, for the block; a choice that has not ended when the block is left
        (the client left) is cancelled and counted as an abort. `citations`: the passages
        of its files (#51), which each reply lists."""
        # the request's choices, all of them or none (LocalBackend.submit); "api-…" ids tell
        # API requests apart in the history's request stats
        if parsed.context_overflow is None:
            parsed = replace(parsed, context_overflow=self.config.context_overflow)
        taken = LocalBackend(target).submit(parsed, priority=self.config.priority,
                                            tag=self.config.tag,
                                            request_id=f"api-{uuid.uuid4().hex[:16]}")
        kind = parsed.kind
        choices, fmt = Choices(taken.streams, self._ended), taken.call_format
        first = Reply(kind, model, self._text_of(target), parsed.logprobs,
                      calls=tooling.call_stream(parsed, fmt), shape=taken.shape,
                      dropped=taken.dropped, citations=citations or taken.citations)
        replies = [first] + [Reply(kind, model, first.token_text, parsed.logprobs, index=i,
                                   id=first.id, created=first.created,
                                   calls=tooling.call_stream(parsed, fmt), shape=taken.shape,
                                   citations=first.citations)
                             for i in range(1, len(choices))]
        self._streams.update(choices.streams)
        try:
            yield choices, replies
        finally:
            for reply in replies:
                if reply.ended is None:  # the client left, or its socket broke, before the end
                    self.metrics.count_finish("abort")  # vLLM's name for it
            choices.cancel()  # no-op once finished; the disconnect path otherwise
            self._streams.difference_update(choices.streams)
            if not self._streams:
                self._idle.set()

    def _ended(self, stream: EventStream) -> None:
        """A choice's engine request ended (also after its client left): its stats go to
        `on_finished`, one record per choice."""
        if stream.stats is not None and self._on_finished is not None:
            self._on_finished(stream.stats)

    def serving(self, model: str) -> tuple[LocalTarget, str]:
        """(the model serving now, the id replies name) for a request naming `model`;
        a Refusal while none is ready, or for a name not served (--strict-model-name)."""
        target, served = self._target(), self._model_id()
        if target is None or served is None:
            raise Refusal(RefusalCode.MODEL_NOT_READY, "no model is ready to serve yet (one is "
                          "loading, or the app is switching models); try again shortly")
        if self.config.strict_model_name:
            aliases = self._model_aliases()
            if not model_names.known(model, served, aliases):
                listed = ", ".join(f"'{n}'" for n in model_names.names(served, aliases))
                raise Refusal(RefusalCode.MODEL_NOT_FOUND, f"the model '{model}' is not served "
                              f"here; the names that work: {listed}", param="model")
        return target, served  # any name: the reply names the served id

    async def _whole(self, choices: Choices, replies: list[Reply], t0: float) -> web.Response:
        last = [t0] * len(choices)
        async for i, event in choices.events():
            last[i] = self.observe(event, t0, last[i])
            replies[i].add(event)
            if event.finish_reason == "error":  # the others are cancelled on the way out
                raise Refusal(RefusalCode.ENGINE_ERROR, f"generation failed: {event.error}")
        return web.json_response(responses.full(replies, choices.streams))

    async def _stream(self, request: web.Request, choices: Choices, replies: list[Reply],
                      include_usage: bool, t0: float) -> web.StreamResponse:
        """SSE chunks of every choice as they come, each carrying its choice's index (each
        choice has its own role chunk and its own finish_reason chunk)."""
        # the one opened while its model loaded (load_stream.py), or a new one
        response = sse_response(request, self.config.cors_origin)
        try:
            await response.prepare(request)
            await self._send_events(response, choices, replies, include_usage, t0)
        except ConnectionError:
            # the client left (its socket reset) between two of our writes: the handler is
            # not cancelled until the loop sees the connection lost, so a write says so first
            log.debug("a streaming client left before the end of its stream")
        return response

    async def _send_events(self, response: web.StreamResponse, choices: Choices,
                           replies: list[Reply], include_usage: bool, t0: float) -> None:
        for reply in replies:
            first = reply.first_chunk()
            if first is not None:
                await response.write(sse(first))
        last = [t0] * len(choices)
        async for i, event in choices.events():
            last[i] = self.observe(event, t0, last[i])
            reply = replies[i]
            logprobs = reply.add(event)
            if event.finish_reason == "error":
                await response.write(sse(errors.refusal_body(Refusal(
                    RefusalCode.ENGINE_ERROR, f"generation failed: {event.error}"))))
                break
            for chunk in reply.chunks(event.text, logprobs, event.finish_reason):
                await response.write(sse(chunk))
        if include_usage:
            stats = [s.stats for s in choices.streams]
            await response.write(sse(replies[0].usage_chunk(
                stats, sum(r.reasoning_tokens for r in replies))))
        await response.write(sse("[DONE]"))
        await response.write_eof()

    def observe(self, event: Any, t0: float, last: float) -> float:
        """One event into the latency histograms and finish counts; the time of the
        request's latest token (`last`: the one before, t0 before the first)."""
        now = time.perf_counter()
        if event.token is not None:
            (self.metrics.ttft if last == t0 else self.metrics.itl).observe(now - last)
            last = now
        if event.finish_reason is not None:
            self.metrics.e2e.observe(now - t0)
            self.metrics.count_finish(event.finish_reason)
        return last

    def _text_of(self, target: LocalTarget) -> Callable[[int], str]:
        """A token's own text (for logprobs), cached per token while the model stays."""
        held = self._token_text[0]
        if held is None or held() is not target:  # another model: start afresh
            # a weak reference: an unloaded model is not kept alive for its token texts
            self._token_text = (weakref.ref(target), {})
        cache = self._token_text[1]

        def text(token: int) -> str:
            if token not in cache:
                cache[token] = target.decode([token])
            return cache[token]

        return text


def _allow(exc: web.HTTPException) -> dict[str, str]:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else {}
