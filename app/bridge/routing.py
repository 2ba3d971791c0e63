"""A tab's reply: the Backend that answers it (app/backend: the local engine or a saved
remote server), its ChatRequest (app/request/tab.py), and the Generation the frame pump
coalesces for the view. Refusals are app.request's Refusal; `check_params` tells the
settings panel beforehand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.public import SamplingParams

from ..backend import Backend, LocalBackend, RemoteBackend
from ..output_format import APP_KEYS
from ..remote.backends import RemoteBackends, UnknownBackend
from ..request import Refusal, RefusalCode
from ..request.tab import tab_request
from .frames import FramePump
from .generation import Generation
from .hosting import BridgeState, ModelHost
from .local_target import LocalTarget
from .wait_poll import WaitPoll


def check_params(params: Mapping[str, Any]) -> str | None:
    """None if the sampling settings are valid, else the reason (for the settings panel)."""
    try:
        SamplingParams.from_dict({k: v for k, v in params.items() if k not in APP_KEYS})
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


class Router:
    """A tab's reply: its Backend (the local engine, or a saved connection by name), its
    ChatRequest (app/request/tab.py), and the Generation the frame pump follows."""

    def __init__(self, host: ModelHost, frames: FramePump, waits: WaitPoll,
                 remotes: RemoteBackends) -> None:
        self._host = host
        self._frames = frames
        self._waits = waits
        self.remotes = remotes
        # the local engine as the tabs reach it: refused while a switch waits or none serves
        self.local = LocalBackend(serving=self._tab_target, describe=lambda: host.description)

    def _tab_target(self) -> LocalTarget:
        host = self._host
        if host.refusing:  # a model switch waits for the running replies to end
            raise Refusal(RefusalCode.MODEL_NOT_READY, host.refusing)
        # while another model loads, the one loaded still serves
        if host.target is None or host.state not in (BridgeState.READY, BridgeState.LOADING):
            raise Refusal(RefusalCode.MODEL_NOT_READY, host.not_ready_reason())
        return host.target

    def backend(self, name: str | None) -> Backend:
        """The local engine (None) or the saved connection `name`; Refusal if it cannot
        take a request now."""
        if name is None:
            self._tab_target()  # refused before the request is looked at
            return self.local
        if self._host.state == BridgeState.STOPPED:
            raise Refusal(RefusalCode.SHUTTING_DOWN, "The app is shutting down.")
        try:
            return RemoteBackend(self.remotes.client(name, self._host.event_loop()))
        except UnknownBackend as exc:
            raise Refusal(RefusalCode.MODEL_NOT_FOUND, str(exc)) from None

    def submit(self, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
               tag: str | None = None, backend: str | None = None,
               share_prompt_with: Generation | None = None,
               tools: Sequence[Mapping[str, Any]] | None = None,
               tool_choice: str = "auto") -> Generation:
        """Start a reply; raise a Refusal (app.request) if it is refused.
        `backend` names a saved connection (a RemoteStream), None the local engine.
        `share_prompt_with`: a reply to the same messages started just before (N answers):
        the local engine prefills the prompt once for both; ignored for remote backends.
        `tools` (OpenAI's shape) and `tool_choice`: the reply may call them; its calls are
        parsed with `gen.call_format` (local) or arrive as `gen.stream.tool_calls` (remote)."""
        chosen = self.backend(backend)
        # a remote server gets the format and the tools as given (tab_request's `local`)
        request = tab_request(messages, params, tools, tool_choice, local=backend is None)
        lead = (share_prompt_with.request_id if share_prompt_with is not None
                and share_prompt_with.backend is None and backend is None else None)
        taken = chosen.submit(request, priority="interactive", tag=tag, share_prompt_with=lead)
        gen = Generation(taken.stream, tag, backend=backend, answered_by=chosen.description)
        if backend is None:  # a remote server sends its calls parsed (RemoteStream)
            gen.call_format = taken.call_format
            gen.tool_names = request.call_names
        self._frames.follow(gen)
        if backend is None:
            self._waits.watch()
        return gen
