"""The window's Server toggle, Qt-free: an ApiServer on the model the bridge serves (so API
requests batch with the chat tabs and the simulator and show in the stats panel), on the
app's own loop, always on 127.0.0.1, with the port and key from the settings. Finished API
requests are saved to the history's request stats, and /v1/responses' stored responses to
the history (issue #53: they survive a restart), both through the history's one writer.

With the window's ModelManager (issue #50) it serves every model as `serve --models-dir`
does (fleet_api.py): a request naming a library model loads it just in time under the
manager the tabs use; /v1/models lists the default model first, then the others with their
state; any other name is answered by the default model, as before."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..events import Event
from ..fleet import ModelInfo, ModelState
from .app import ApiServer, ServerConfig
from .fleet_api import DefaultModel, FleetApi
from .model_names import aliases_of
from .responses_api.keeper import ResponseKeeper
from .serve import model_id

if TYPE_CHECKING:
    from engine.public import RequestStats

    from ..backend import LocalTarget
    from ..context import AppContext

log = logging.getLogger(__name__)


class AppServer:
    """`changed()` fires after every start, failed start and stop."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.changed = Event()
        self.error = ""  # why the last start failed
        self._server: ApiServer | None = None
        self._busy = False  # starting or stopping

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.running

    @property
    def url(self) -> str | None:
        """The base URL clients use (…/v1), while running."""
        return f"{self._server.url}/v1" if self._server is not None and self.running else None

    @property
    def server(self) -> ApiServer | None:
        return self._server

    def model_id(self) -> str | None:
        target = self.ctx.bridge.serving
        return None if target is None else model_id(target, self.ctx.bridge.source or "model")

    async def start(self) -> bool:
        """Listen on 127.0.0.1 at the settings' port; False (and `error`) if it cannot."""
        if self.running:
            return True
        s = self.ctx.settings
        kept = self.ctx.api_responses  # the history's entry (None: no history, in memory)
        config = ServerConfig(host="127.0.0.1", port=s.server_port,
                              api_key=s.server_api_key or None)
        fleet = self.ctx.bridge.fleet  # the tabs' models too, loaded just in time (#50)
        api = FleetApi(fleet, config.max_body_bytes, self.default_model) \
            if fleet is not None else None
        server = ApiServer(api.target if api else self._serving,
                           api.model_id if api else self.model_id, config,
                           on_finished=self._record,
                           model_aliases=lambda: aliases_of(self.ctx.bridge.source), fleet=api,
                           stored_responses=None if kept is None
                           else ResponseKeeper(kept, on_loop=True))
        try:
            await server.start()
        except (OSError, ValueError) as exc:  # most likely: the port is taken
            self.error = f"Could not start the API server on port {s.server_port}: {exc}"
            log.warning("%s", self.error)
            self.changed.emit()
            return False
        self._server, self.error = server, ""
        self.changed.emit()
        return True

    async def stop(self) -> None:
        """In-flight API streams end (finish reason "cancelled"); the port is released."""
        server = self._server
        if server is not None:
            await server.stop()
            self._server = None
            self.changed.emit()

    async def toggle(self) -> bool:
        """Start or stop; a toggle while one is under way is ignored (True: serving)."""
        if self._busy:
            return self.running
        self._busy = True
        try:
            if self.running:
                await self.stop()
                return False
            return await self.start()
        finally:
            self._busy = False

    def default_model(self) -> DefaultModel:
        """The default model as the fleet's API serves it beside the manager's."""
        bridge, local = self.ctx.bridge, self.ctx.bridge.local
        if local is None:  # none loaded: any name is told no model is ready
            return DefaultModel(None, None, None)
        served = model_id(local, bridge.source or "model")
        held = bridge.models.held()  # its file's estimate, as the manager counts it
        need = held[0].need if held else None
        # pinned: the manager never unloads it (the window's model button does)
        info = ModelInfo(served, bridge.source or "", ModelState.LOADED,
                         need.total if need else 0, need.describe() if need else "",
                         pinned=True, running=len(local.live()))
        return DefaultModel(info, self._serving(), served,
                            (*aliases_of(bridge.source), bridge.default_model()))

    def _serving(self) -> LocalTarget | None:
        return self.ctx.bridge.serving

    def _record(self, stats: RequestStats) -> None:
        history = self.ctx.records  # the history's entry for records handed in
        if history is None:
            return
        from ..storage.records import RequestStatsRecord

        history.record_request_stats(RequestStatsRecord(
            request_id=stats.request_id, prompt_tokens=stats.prompt_tokens,
            cached_tokens=stats.cached_tokens, generated_tokens=stats.generated_tokens,
            ttft_s=stats.ttft_s, tokens_per_s=stats.tokens_per_s, queue_s=stats.queue_s,
            decode_s=stats.decode_s, finish_reason=stats.finish_reason,
            drafted_tokens=stats.drafted_tokens, accepted_tokens=stats.accepted_tokens,
            decode_steps=stats.decode_steps))
