"""Several models behind one API server (issue #50, `batchchat serve --models-dir`).

- A completion naming a model loads it just in time (`middleware`: the request waits for
  the load, holds a lease on the model while it runs, and reaches it as the server's
  target through a context variable, so the completion handlers are those of one model).
- The paths of llama.cpp's router mode: `GET /models` (every model and its state),
  `GET /models/running` (those loaded, as `ollama ps` / `lms ps`), `POST /models/load` and
  `POST /models/unload`; a TTL per load or per request (`ttl`, LM Studio's, or
  `keep_alive`, Ollama's).
- `/v1/models` lists loaded and available models with their state; `/metrics` gives each
  loaded model's engine figures labelled `model="…"`.
- A streamed completion whose model is still loading gets the load's progress as SSE
  comment lines before its first chunk (load_stream.py).
- The window's own server (app/server/in_app.py) serves its default model beside the
  manager's (`DefaultModel`): a request naming it, or a name the manager does not know (as a
  server of one model answers any name), goes to that model, which the manager neither
  loads nor unloads.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..fleet import Lease, ModelInfo, ModelManager, NoRoom, UnknownModel
from ..fleet.manager import UNSET
from ..request import Refusal, RefusalCode
from . import openapi
from .body import read_json
from .load_stream import (
    error_event,
    forget,
    loaded_line,
    open_early,
    opened,
    progress_line,
    streams,
)
from .metrics import ServerMetrics, _engine_lines

if TYPE_CHECKING:
    from ..backend import LocalTarget

# the paths whose body names a model to answer with (Anthropic's too, where served)
COMPLETION_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/messages",
                              "/v1/messages/count_tokens", "/v1/responses",
                              "/v1/embeddings"})
# Ollama's durations: "30s", "5m", "1h", "-1" (ASCII digits: as the OpenAPI pattern reads)
DURATION = re.compile(r"(-?[0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?")
UNIT_S = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}



@dataclass(frozen=True)
class DefaultModel:
    """The model served beside the manager's (the window's default model): `info` as the
    listings show it, `target` None while it takes no request (a switch waits, none is
    loaded), `names` the names that mean it besides its id (aliases, the library's name)."""

    info: ModelInfo | None
    target: LocalTarget | None
    model_id: str | None
    names: tuple[str, ...] = ()

    def means(self, name: str) -> bool:
        wanted = name.casefold()
        return any(wanted == n.casefold() for n in (self.model_id or "", *self.names) if n)


class _OnDefault:
    """A request answered by the default model: held as a Lease is, with nothing to let go."""

    def __init__(self, default: DefaultModel) -> None:
        self.target = default.target
        self.name = default.model_id

    def release(self) -> None:
        pass


_current: ContextVar[Lease | _OnDefault | None] = ContextVar("batchchat_fleet_lease",
                                                             default=None)


def keep_alive(body: dict[str, Any]) -> Any:
    """The TTL a body asks for in seconds (None: kept until evicted; UNSET: not asked):
    `ttl` (LM Studio's: seconds) or `keep_alive` (Ollama's: seconds, or a duration such as
    "5m"); negative means for ever, 0 unloads the model once idle. A Refusal otherwise."""
    asked = [_seconds(field, body[field]) for field in ("ttl", "keep_alive") if field in body]
    return asked[0] if asked else UNSET  # both checked; `ttl` wins when both are given


def _seconds(field: str, value: Any) -> float | None:
    """One field's value: seconds, None for ever, or a Refusal."""
    match = DURATION.fullmatch(value) if field == "keep_alive" and isinstance(value, str) \
        else None
    if match is not None:
        seconds = float(match.group(1)) * UNIT_S[match.group(2)]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise Refusal(RefusalCode.INVALID_VALUE, f"'{field}' must be a number of seconds"
                      + (" or a duration such as \"5m\"" if field == "keep_alive" else ""),
                      param=field)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise Refusal(RefusalCode.INVALID_VALUE, f"'{field}' must be finite", param=field)
    return None if seconds < 0 else seconds


class FleetApi:
    """The model manager as the ApiServer serves it: `target()` / `model_id()` are the
    server's (the model of the request being answered). `default()`: the model served
    beside the manager's (the window's server), None for `serve --models-dir`."""

    def __init__(self, fleet: ModelManager, max_body_bytes: int = 4 << 20,
                 default: Callable[[], DefaultModel] | None = None) -> None:
        self.fleet = fleet
        self._limit = max_body_bytes
        self._default = default
        self.cors_origin: str | None = None  # the server's (ApiServer sets it): early SSE

    # -- the request's model ------------------------------------------------------------
    def target(self) -> LocalTarget | None:
        lease = _current.get()
        return lease.target if lease is not None else None

    def model_id(self) -> str | None:
        lease = _current.get()
        return lease.name if lease is not None else None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """A completion's model loaded (or found loaded) and held while it is answered."""
        if request.method != "POST" or request.path not in COMPLETION_PATHS:
            return await handler(request)
        try:
            body = await read_json(request, self._limit)
        except Refusal:
            return await handler(request)  # which says why, in its path's own shape
        name = body.get("model") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            return await handler(request)  # refused there: 'model' is required
        ttl_s = keep_alive(body)
        default = self._on_default(name)
        lease: Lease | _OnDefault | None
        if default is not None:
            lease = _OnDefault(default)
        elif streams(request.path, body) and not self._loaded(name):
            lease = await self._acquire_reporting(request, name, ttl_s)
            if lease is None:  # the load failed after the stream began, or the client left
                early = opened()
                forget()
                return early if early is not None else web.Response(status=499)
        else:
            lease = await self.acquire(name, ttl_s=ttl_s)
        token = _current.set(lease)
        try:
            return await handler(request)
        except Refusal as refusal:
            early = opened()
            if early is None:
                raise
            # the stream has begun: the refusal is its one error event, not a status
            await early.write(error_event(request.path, refusal))
            await early.write_eof()
            return early
        finally:
            _current.reset(token)
            forget()
            lease.release()

    def _loaded(self, name: str) -> bool:
        """Whether `name` is loaded now (an unknown name counts as loaded: acquire refuses
        it at once, with a status)."""
        try:
            return self.fleet.catalog.find(name).name in self.fleet.targets()
        except UnknownModel:
            return True

    async def _acquire_reporting(self, request: web.Request, name: str,
                                 ttl_s: Any) -> Lease | None:
        """`acquire`, with the load's progress as SSE comment lines: the request's SSE
        response opens at the first report (load_stream.py), so a refusal before the load
        begins (unknown model, no room) is still a status. None when the load failed after
        the stream began (its error event written) or the client left."""
        wanted = self.fleet.catalog.find(name).name
        reports: asyncio.Queue[tuple[str, float]] = asyncio.Queue()

        def on_progress(model: str, stage: str, fraction: float) -> None:
            if model == wanted:
                reports.put_nowait((stage, fraction))

        self.fleet.load_progress.connect(on_progress)
        acquiring = asyncio.ensure_future(self.acquire(name, ttl_s=ttl_s))
        early = None
        report: asyncio.Future[tuple[str, float]] | None = None
        handed = False
        try:
            while True:
                report = asyncio.ensure_future(reports.get())
                await asyncio.wait({acquiring, report}, return_when=asyncio.FIRST_COMPLETED)
                if not report.done():
                    break
                if early is None:
                    early = await open_early(request, self.cors_origin)
                await early.write(progress_line(wanted, *report.result()))
            lease = acquiring.result()
            if early is not None:
                await early.write(loaded_line(wanted))
            handed = True
            return lease
        except Refusal as refusal:
            if early is None:
                raise
            await early.write(error_event(request.path, refusal))
            await early.write_eof()
            return None
        except ConnectionError:  # the client left while its model loaded
            return None
        finally:
            self.fleet.load_progress.disconnect(on_progress)
            if report is not None:
                report.cancel()
            if not handed:
                _let_go(acquiring)

    def _on_default(self, name: str) -> DefaultModel | None:
        """The default model when `name` names it, or names no model the manager knows
        (any name: the default model answers, as a server of one model does)."""
        if self._default is None:
            return None
        named = self._default_named(name)
        if named is not None:
            return named
        try:
            self.fleet.catalog.find(name)
        except UnknownModel:
            return self._default()
        return None

    def _default_named(self, name: str) -> DefaultModel | None:
        """The default model when `name` is its id, one of its names, or its file."""
        default = self._default() if self._default is not None else None
        if default is None or default.means(name):
            return default
        try:
            entry = self.fleet.catalog.find(name)
        except UnknownModel:
            return None
        return default if default.info is not None and entry.source == default.info.source \
            else None

    async def acquire(self, name: str, *, ttl_s: Any = UNSET,
                      pin: bool | None = None) -> Lease:
        """A lease on `name`, loaded first; the manager's refusals as the API's."""
        try:
            return await self.fleet.acquire(name, ttl_s=ttl_s, pin=pin)
        except UnknownModel as exc:
            raise Refusal(RefusalCode.MODEL_NOT_FOUND, str(exc), param="model") from None
        except NoRoom as exc:
            if exc.need > exc.budget:  # never fits: the request's own fault
                raise Refusal(RefusalCode.INVALID_VALUE, str(exc), param="model") from None
            raise Refusal(RefusalCode.MODEL_NOT_READY, str(exc)) from None  # once others end
        except Refusal:
            raise
        except Exception as exc:  # noqa: BLE001 - a file the loader refused, say
            raise Refusal(RefusalCode.ENGINE_ERROR,
                          f"could not load the model '{name}': {exc}") from None

    # -- routes -------------------------------------------------------------------------
    def routes(self) -> list[web.RouteDef]:
        return [web.get("/models", self._all), web.get("/models/running", self._running),
                web.post("/models/load", self._load), web.post("/models/unload", self._unload)]

    async def _all(self, request: web.Request) -> web.Response:
        return web.json_response(self._listing(self.listed(self.fleet.models())))

    async def _running(self, request: web.Request) -> web.Response:
        return web.json_response(self._listing(self.listed(self.fleet.running())))

    def listed(self, infos: list[ModelInfo]) -> list[ModelInfo]:
        """`infos` with the default model first (the manager's entry for its file left out:
        one model, served once)."""
        default = self._default() if self._default is not None else None
        if default is None or default.info is None:
            return infos
        return [default.info, *(i for i in infos if i.source != default.info.source)]

    def _listing(self, infos: list[Any]) -> dict[str, Any]:
        return {"object": "list", "budget_bytes": self.fleet.budget_bytes,
                "used_bytes": self.fleet.used_bytes(), "max_models": self.fleet.max_models,
                "data": [info.as_json() for info in infos]}

    async def _load(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        name = _name(body)
        pin = body.get("pin")  # absent: as it is
        if "pin" in body and not isinstance(pin, bool):
            raise Refusal(RefusalCode.INVALID_VALUE, "'pin' must be true or false", param="pin")
        estimate_only = body.get("estimate_only", False)
        if not isinstance(estimate_only, bool):
            raise Refusal(RefusalCode.INVALID_VALUE, "'estimate_only' must be true or false",
                          param="estimate_only")
        ttl_s = keep_alive(body)  # checked even for an estimate: a bad body is refused
        default = self._default_named(name)
        if default is not None and default.info is not None and not estimate_only:
            return web.json_response({"model": default.info.as_json()})  # loaded, stays so
        if estimate_only:  # LM Studio's `lms load --estimate-only`
            try:
                need = self.fleet.estimate(name)
            except UnknownModel as exc:
                raise Refusal(RefusalCode.MODEL_NOT_FOUND, str(exc), param="model") from None
            return web.json_response({"model": name, "estimate_bytes": need.total,
                                      "estimate": need.describe(),
                                      "budget_bytes": self.fleet.budget_bytes,
                                      "used_bytes": self.fleet.used_bytes()})
        lease = await self.acquire(name, ttl_s=ttl_s, pin=pin)
        lease.release()
        info = next(i for i in self.fleet.running() if i.name == lease.name)
        return web.json_response({"model": info.as_json()})

    async def _unload(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        name = _name(body)
        cancel = body.get("cancel", False)
        if not isinstance(cancel, bool):
            raise Refusal(RefusalCode.INVALID_VALUE, "'cancel' must be true or false",
                          param="cancel")
        timeout = body.get("timeout")
        if "timeout" in body and (isinstance(timeout, bool)
                                    or not isinstance(timeout, (int, float))
                                    or not 0 <= timeout < 1e6):
            raise Refusal(RefusalCode.INVALID_VALUE, "'timeout' must be a number of seconds "
                          "from 0", param="timeout")
        if self._default_named(name) is not None:
            raise Refusal(RefusalCode.INVALID_VALUE, f"'{name}' is the window's default model: "
                          "switch or unload it in the window", param="model")
        try:
            unloaded = await self.fleet.unload(name, cancel=cancel, timeout_s=timeout)
        except UnknownModel as exc:
            raise Refusal(RefusalCode.MODEL_NOT_FOUND, str(exc), param="model") from None
        return web.json_response({"model": name, "unloaded": unloaded})

    async def _body(self, request: web.Request) -> dict[str, Any]:
        body = await read_json(request, self._limit)
        if not isinstance(body, dict):
            raise Refusal(RefusalCode.INVALID_VALUE, "the body must be a JSON object")
        return body

    # -- what the server's own endpoints say --------------------------------------------
    def models(self) -> dict[str, Any]:
        """/v1/models: OpenAI's list, every model with its `state` (loaded, loading,
        unloading, available) as LM Studio's list says it."""
        return {"object": "list", "data": [
            {"id": info.name, "object": "model", "created": 0, "owned_by": "batchchat",
             "state": info.state.value} for info in self.listed(self.fleet.models())]}

    def metrics(self, server: ServerMetrics) -> str:
        """Each loaded model's engine figures labelled model="…" (the default model's
        first), then the server's own."""
        heads: dict[str, list[str]] = {}
        samples: dict[str, list[str]] = {}
        default = self._default() if self._default is not None else None
        targets = {default.model_id: default.target} \
            if default is not None and default.model_id and default.target else {}
        for name, target in {**targets, **self.fleet.targets()}.items():
            label = name.replace("\\", "\\\\").replace('"', '\\"')
            for line in _engine_lines(target.stats()):
                metric = line.split()[2] if line.startswith("#") else line.split()[0]
                if line.startswith("#"):
                    heads.setdefault(metric, []).append(line)
                else:
                    samples.setdefault(metric, []).append(
                        f'{metric}{{model="{label}"}} {line.split()[1]}')
        out: list[str] = []
        for metric, lines in samples.items():
            out += list(dict.fromkeys(heads.get(metric, []))) + lines
        budget = "batchchat_models_memory_budget_bytes"
        used = "batchchat_models_memory_estimate_bytes"
        out += [f"# HELP {budget} what the loaded models' estimates may add up to",
                f"# TYPE {budget} gauge", f"{budget} {self.fleet.budget_bytes}",
                f"# HELP {used} the loaded models' estimates added up",
                f"# TYPE {used} gauge", f"{used} {self.fleet.used_bytes()}"]
        return "\n".join(out) + "\n" + server.render(None)

    def document(self) -> dict[str, Any]:
        """The OpenAPI description with every model's name in `model` and these paths."""
        from .fleet_openapi import extend

        names = [info.name for info in self.listed(self.fleet.models())]
        # beside a default model any other name is answered by it
        return extend(openapi.document(names, any_name=self._default is not None), names)


def _let_go(acquiring: asyncio.Future[Lease]) -> None:
    """A lease asked for and not handed on (the client left, the stream failed): the wait
    cancelled, or the lease released once it comes (the load itself goes on)."""
    def release(done: asyncio.Future[Lease]) -> None:
        if not done.cancelled() and done.exception() is None:
            done.result().release()

    acquiring.cancel()
    acquiring.add_done_callback(release)


def _name(body: dict[str, Any]) -> str:
    name = body.get("model")
    if not isinstance(name, str) or not name:
        raise Refusal(RefusalCode.INVALID_VALUE, "'model' is required: a name from GET "
                      "/models", param="model")
    return name
