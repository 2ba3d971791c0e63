"""Routing a request: a tab's reply to the local engine or to a saved remote server, and the
simulator's requests to the local engine. A tab's reply is a ChatRequest (app/request/tab.py)
turned into engine input by app/request/engine_input.py; refusals are app.request's Refusal
(the simulator's streams raise the engine's errors; `check_params` tells the settings panel
beforehand)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.public import EngineStopped, Priority, RequestStream, SamplingParams

from ..output_format import APP_KEYS
from ..remote.backends import RemoteBackends, UnknownBackend
from ..request import SUBMIT_ERRORS, Refusal, RefusalCode, engine_input, refusal_of
from ..request.tab import tab_request
from .frames import FramePump
from .generation import Generation
from .hosting import BridgeState, ModelHost
from .wait_poll import WaitPoll


def check_params(params: Mapping[str, Any]) -> str | None:
    """None if the sampling settings are valid, else the reason (for the settings panel)."""
    try:
        SamplingParams.from_dict({k: v for k, v in params.items() if k not in APP_KEYS})
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


class Router:
    def __init__(self, host: ModelHost, frames: FramePump, waits: WaitPoll,
                 remotes: RemoteBackends) -> None:
        self._host = host
        self._frames = frames
        self._waits = waits
        self.remotes = remotes

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
        if backend is not None:
            return self._submit_remote(messages, params, tag, backend, tools, tool_choice)
        host = self._host
        if host.refusing:  # a model switch waits for the running replies to end
            raise Refusal(RefusalCode.MODEL_NOT_READY, host.refusing)
        # while another model loads, the one loaded still serves
        if host.target is None or host.state not in (BridgeState.READY, BridgeState.LOADING):
            raise Refusal(RefusalCode.MODEL_NOT_READY, host.not_ready_reason())
        request = tab_request(messages, params, tools, tool_choice)
        if request.tool_road:  # a prompt rendered here: nothing to share with
            share_prompt_with = None
        try:
            what, fmt = engine_input.prompt(request, host.target)
            [local_params] = engine_input.choice_params(request)
            lead = (share_prompt_with.request_id if share_prompt_with is not None
                    and share_prompt_with.backend is None else None)
            stream = host.target.submit(**what, params=local_params,
                                        priority="interactive", tag=tag,
                                        share_prompt_with=lead)
        except SUBMIT_ERRORS as exc:
            raise refusal_of(exc) from None
        gen = Generation(stream, tag, answered_by=host.description)
        gen.call_format = fmt
        gen.tool_names = request.call_names
        self._frames.follow(gen)
        self._waits.watch()
        return gen

    def _submit_remote(self, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
                       tag: str | None, backend: str,
                       tools: Sequence[Mapping[str, Any]] | None = None,
                       tool_choice: str = "auto") -> Generation:
        if self._host.state == BridgeState.STOPPED:
            raise Refusal(RefusalCode.SHUTTING_DOWN, "The app is shutting down.")
        try:
            client = self.remotes.client(backend, self._host.event_loop())
            request = tab_request(messages, params, tools, tool_choice, local=False)
            plain, sampling, extra = engine_input.remote_call(request)
            stream = client.submit(plain, params=sampling, tag=tag, extra_body=extra)
        except UnknownBackend as exc:
            raise Refusal(RefusalCode.MODEL_NOT_FOUND, str(exc)) from None
        except ValueError as exc:  # no model chosen, or settings the client refuses
            raise Refusal(RefusalCode.INVALID_VALUE, str(exc)) from None
        gen = Generation(stream, tag, backend=backend, answered_by=client.description)
        self._frames.follow(gen)
        return gen

    def open_stream(self, messages: Sequence[Mapping[str, Any]], *,
                    params: SamplingParams | Mapping[str, Any] | None = None,
                    priority: Priority | str = "interactive",
                    tag: str | None = None) -> RequestStream:
        """A request to the local engine answered with its own stream (no per-frame
        coalescing); refusals raise the engine's errors (EngineStopped while no model
        is serving)."""
        target = self._host.target
        if target is None:
            raise EngineStopped(self._host.not_ready_reason())
        return target.submit(messages, params=params, priority=priority, tag=tag)
