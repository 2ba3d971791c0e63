"""The one way into the engine: EngineBridge composes the bridge's parts for the app.

Chat tabs submit through it (coalesced per frame), the simulator through `streams` (a
LocalBackend over the model it serves: the engine's own streams, uncoalesced), the API
server and the stats panel read `serving`/`local` (the LocalTarget). Imports no Qt, and
the engine (hence mlx) only lazily, so `ui` never pulls in mlx. It runs on whatever
asyncio loop is current (qasync's, in the app).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.public import EngineStopped

from ..attachments.messages import has_attachments
from ..backend import LocalBackend
from ..backend.local_target import Loader, LocalTarget
from ..images.parts import has_images
from ..remote.backends import RemoteBackends
from ..request import ChatRequest, refusal_of
from .frames import FramePump
from .generation import Generation
from .hosting import BridgeState, ModelHost
from .prompt_size import (
    AttachmentProgress,
    PromptSize,
    count_attachments,
    count_prompt,
    files_as_text,
    fit_files,
)
from .routing import Route, Router
from .switch import Choice, ModelSwitch, PendingSwitch, Running
from .tab_models import TabModels
from .wait_poll import WaitPoll

if TYPE_CHECKING:
    from engine.public import EngineStats

    from ..backend.local_target import Engine
    from ..fleet import ModelManager


class EngineBridge:
    """Events: `state_changed(state, message)`, `frame()` after each flush,
    `load_progress(stage, fraction)` while a model loads, `load_failed(message)` when a load
    failed (the state is then READY again if the previous model kept serving, else FAILED).
    """

    def __init__(self, loader: Loader | None = None, frame_s: float = 0.016) -> None:
        self.host = ModelHost(loader, self._after_stop)
        self.frames = FramePump(self.host.event_loop, frame_s)
        self._waits = WaitPoll(lambda: self.host.target, self.frames, self.host.event_loop)
        # chats on OpenAI-compatible servers (app/remote); AppContext points it at settings
        self.remotes = RemoteBackends()
        # the library's other models a tab may name (issue #50): AppContext gives it the
        # window's ModelManager (`fleet`); without one only the default model serves
        self.models = TabModels(self.host)
        self._router = Router(self.host, self.remotes, self.models)
        # the simulator panel's backend: what it times is the engine's own streams
        self.streams = LocalBackend(
            serving=self._sim_target,
            describe=lambda: f"local engine ({self.host.description or 'no model'})")
        self.switcher = ModelSwitch(self.host, self.frames)
        self.switch_changed = self.switcher.changed
        self.state_changed = self.host.state_changed
        self.load_progress = self.host.load_progress
        self.load_failed = self.host.load_failed
        self.frame = self.frames.frame

    # -- the model and its state (app.bridge.hosting) -------------------------------------
    @property
    def loader(self) -> Loader:
        return self.host.loader

    @loader.setter
    def loader(self, loader: Loader) -> None:
        self.host.loader = loader

    @property
    def state(self) -> BridgeState:
        return self.host.state

    @property
    def message(self) -> str:
        return self.host.message

    @property
    def source(self) -> str | None:
        """The model serving now."""
        return self.host.source

    @property
    def attempted(self) -> str | None:
        """The last model asked for."""
        return self.host.attempted

    @property
    def description(self) -> str:
        return self.host.description

    @property
    def notes(self) -> tuple[str, ...]:
        """What the load said about how the model runs here, a line each."""
        return self.host.notes

    @property
    def progress(self) -> tuple[str, float] | None:
        """The load under way: stage, fraction."""
        return self.host.progress

    @property
    def load_error(self) -> str:
        """Why the last load failed ("" when it did not)."""
        return self.host.load_error

    @property
    def is_ready(self) -> bool:
        return self.host.state == BridgeState.READY

    @property
    def local(self) -> LocalTarget | None:
        """The local model serving now, also while another loads (None: no model)."""
        return self.host.target

    @property
    def serving(self) -> LocalTarget | None:
        """The local model while the bridge is READY and takes new requests (what the API
        server serves; None while a switch waits for the running replies)."""
        return self.host.target if self.is_ready and not self.host.refusing else None

    async def load(self, source: str) -> bool:
        """Load `source` in a background thread; True when it is ready to serve."""
        return await self.host.load(source)

    # -- switching without losing work (app.bridge.switch) --------------------------------
    def running(self) -> Running:
        """The local requests not ended yet, by where they come from."""
        return self.switcher.running()

    @property
    def refusing(self) -> str:
        """Why new local requests are refused now ("" when they are taken): a switch waits
        for the running replies."""
        return self.host.refusing

    @property
    def pending_switch(self) -> PendingSwitch | None:
        return self.switcher.pending

    async def switch(self, source: str, choice: Choice = Choice.FINISH) -> bool:
        """Load `source` once the running local replies finished (FINISH) or were stopped
        (STOP, they end "switched"); True when it serves (ModelSwitch.switch)."""
        return await self.switcher.switch(source, choice)

    async def use_engine(self, engine: Engine, source: str = "engine") -> None:
        """Serve with a ready Engine (tests, or after `load`)."""
        await self.host.use_engine(engine, source)

    async def shutdown(self, timeout: float = 3.0) -> None:
        """End every request (finish reason "shutdown") and stop the engine thread."""
        self.host.set_state(BridgeState.STOPPED, "Shutting down …")
        await self.remotes.close()  # remote replies end "cancelled", their sessions close
        if self.fleet is not None:  # the other models' replies end, their engines stop
            await self.fleet.close(timeout)
        await self.host.stop_target(timeout)

    def _sim_target(self) -> LocalTarget:
        # the simulator's requests are refused only without a model (not while a switch
        # waits: the switch counts them), as the engine refuses a stopped one
        if self.host.target is None:
            raise refusal_of(EngineStopped(self.host.not_ready_reason()))
        return self.host.target

    async def _after_stop(self, stopped: bool) -> None:
        if stopped:
            await self.frames.local_ends(timeout=1.0)
        self.frames.flush()
        self._waits.cancel()

    # -- replies (a Backend from app.bridge.routing, coalesced by app.bridge.frames) -----
    def route(self, backend: str | None = None, model: str | None = None) -> Route:
        """Who answers a tab's reply: the local engine (None) or the saved connection
        `backend`; Refusal if it takes no request now. A tab asks before it makes its
        request (app/request/tab.py), so "no model is ready" is said before anything wrong
        with the request itself (its output format, its tools). `model`: a local reply on
        a library model other than the default one (loaded first: `needs_load`,
        `load_model`)."""
        return self._router.route(backend, model)

    @property
    def fleet(self) -> ModelManager | None:
        """The window's ModelManager: the models tabs name beside the default one."""
        return self.models.fleet

    @fleet.setter
    def fleet(self, fleet: ModelManager | None) -> None:
        self.models.fleet = fleet

    def default_model(self) -> str:
        """The default model's name as the library says it ("": none loaded)."""
        return self.models.default_name()

    def other_models(self) -> list[str]:
        """The library's models a tab may pick beside the default one (the tab's picker)."""
        return self.models.others()

    def needs_load(self, model: str | None) -> bool:
        """`model` is another model than the default one and is not loaded yet."""
        return self.models.needs_load(model)

    async def load_model(self, model: str,
                         on_progress: Callable[[float], None] | None = None) -> None:
        """Load library model `model` beside the default one (ModelManager.acquire); the
        replies running on any model go on meanwhile; `on_progress(fraction)` as it loads."""
        await self.models.load(model, on_progress)

    def model_running(self, model: str) -> Running:
        """The replies running on library model `model` (loaded beside the default one)."""
        return self.models.running(model)

    async def unload_model(self, model: str, stop: bool = False) -> bool:
        """Unload library model `model` once its replies finished, or (`stop`) stopping
        them; the default model and the other models' replies run on."""
        return await self.models.unload(model, stop)

    def submit(self, request: ChatRequest, route: Route | None = None, *,
               tag: str | None = None,
               share_prompt_with: Generation | None = None) -> Generation:
        """Start a tab's reply to `request` where `route` goes (default: the local engine);
        raise a Refusal (app.request) if it is refused. `share_prompt_with`: a local reply
        to the same messages started just before (N answers): the engine prefills the
        prompt once for both (ignored for remote ones). A reply that may call tools has its
        calls parsed with `gen.call_format` (local) or arriving as `gen.stream.tool_calls`
        (remote)."""
        route = route if route is not None else self.route(None)
        # only a reply on the same engine shares its prefill (each model has its own)
        lead = (share_prompt_with.request_id if share_prompt_with is not None
                and share_prompt_with.backend is None and route.local
                and share_prompt_with.model == route.model else None)
        taken = route.backend.submit(request, priority="interactive", tag=tag,
                                     share_prompt_with=lead)
        # the view's side: a Generation the frame pump coalesces, one flush a frame
        gen = Generation(taken.stream, tag, backend=route.name,
                         answered_by=route.backend.description)
        gen.model = route.model
        if route.local:  # a remote server sends its calls parsed (RemoteStream)
            gen.call_format = taken.call_format
            gen.tool_names = request.call_names
            gen.shape = taken.shape
            gen.citations = taken.citations
            gen.dropped = taken.dropped
        self.frames.follow(gen)
        if route.local:
            self._waits.watch()
        return gen

    @property
    def active(self) -> list[Generation]:
        return self.frames.active

    @property
    def num_flushes(self) -> int:
        return self.frames.num_flushes

    async def save_kv(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Save the KV the engine holds for this conversation to disk (it outlives a
        restart); how many tokens it holds (0: no model, nothing cached, or no disk store)."""
        target = self.host.target
        if target is None or self.state != BridgeState.READY:
            return 0
        return await target.save_prefix(await files_as_text(target, messages))

    async def count_prompt(self, messages: Sequence[Mapping[str, Any]],
                           model: str | None = None) -> PromptSize | None:
        """How many tokens `messages` make as the prompt of local model `model` (None: the
        default one), and its context (counted off this thread); None while that model is
        not loaded, or when its template refuses them."""
        target = self.local_of(model)
        return await count_prompt(target, messages) if target is not None else None

    async def count_attachments(self, atts: Sequence[Any],
                                progress: AttachmentProgress | None = None,
                                model: str | None = None) -> list[int] | None:
        """Each attached file's tokens in the tokenizer of local model `model` (None: the
        default one; off this thread); None while that model is not loaded.
        `progress(i, stage, fraction)`, on the counting thread, while a file too long to go
        in whole is indexed."""
        target = self.local_of(model)
        return await count_attachments(target, atts, progress) if target is not None \
            else None

    async def fit_files(self, request: ChatRequest, route: Route) -> None:
        """A local reply's attached files and images made ready off this thread: the
        files' indexes built and the question embedded, the images processed by the
        model's processor, so `submit(request, route)` (on this thread) finds them cached;
        nothing for a remote route (its server gets them whole)."""
        if route.local and isinstance(route.backend, LocalBackend) and request.messages \
                and (has_attachments(request.messages) or has_images(request.messages)):
            await fit_files(route.backend, request)

    def stats(self, model: str | None = None) -> EngineStats | None:
        """The engine figures of local model `model` (None: the default one); None while it
        is not loaded."""
        target = self.local_of(model)
        return target.stats() if target is not None else None

    def local_of(self, model: str | None) -> LocalTarget | None:
        """The engine serving local model `model` (None, or the default model's name: the
        default one's); None while it is not loaded."""
        return self.host.target if self.models.is_default(model) \
            else self.models.loaded(model or "")

    # -- concurrency limit (the load simulator sets it for a run) ------------------------
    @property
    def max_concurrent(self) -> int | None:
        """How many requests the engine runs at once (None: no model)."""
        target = self.host.target
        return target.max_concurrent if target is not None else None

    @property
    def max_concurrent_limit(self) -> int | None:
        """The highest `set_max_concurrent` accepts (None: no model)."""
        target = self.host.target
        return target.max_concurrent_limit if target is not None else None

    def set_max_concurrent(self, n: int) -> None:
        """Change the limit (ValueError if out of range). Without a model there is nothing
        to change: the next one starts with its own limit."""
        self.streams.set_max_concurrent(n)
