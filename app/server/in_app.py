"""The window's Server toggle, Qt-free: an ApiServer on the model the bridge serves (so API
requests batch with the chat tabs and the simulator and show in the stats panel), on the
app's own loop, always on 127.0.0.1, with the port and key from the settings. Finished API
requests are saved to the history's request stats, and /v1/responses' stored responses to
the history (issue #53: they survive a restart), both through the history's one writer."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..events import Event
from .app import ApiServer, ServerConfig
from .model_names import aliases_of
from .responses_api.keeper import ResponseKeeper
from .serve import model_id

if TYPE_CHECKING:
    from engine.public import RequestStats

    from ..bridge import LocalTarget
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
        server = ApiServer(self._serving, self.model_id,
                           ServerConfig(host="127.0.0.1", port=s.server_port,
                                        api_key=s.server_api_key or None),
                           on_finished=self._record,
                           model_aliases=lambda: aliases_of(self.ctx.bridge.source),
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
