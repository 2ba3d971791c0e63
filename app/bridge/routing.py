"""Routing a request: a tab's reply to the local engine or to a saved remote server, and the
simulator's requests to the local engine; refusals become SubmitError or the engine's errors
(`check_params` tells the settings panel beforehand)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.public import (
    EngineStopped,
    Priority,
    QueueFullError,
    RequestRejected,
    RequestStream,
    SamplingParams,
)

from ..output_format import APP_KEYS, OutputFormatError, engine_params, remote_extras
from ..remote.backends import RemoteBackends, UnknownBackend
from ..tools import ToolSpecError
from .frames import FramePump
from .generation import Generation
from .hosting import BridgeState, ModelHost
from .tool_prompt import tool_request
from .wait_poll import WaitPoll


class SubmitError(Exception):
    """A request the engine would not take; `kind` is rejected | queue_full | not_ready."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


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
        """Start a reply; raise SubmitError (with the engine's reason) if it is refused.
        `backend` names a saved connection (a RemoteStream), None the local engine.
        `share_prompt_with`: a reply to the same messages started just before (N answers):
        the local engine prefills the prompt once for both; ignored for remote backends.
        `tools` (OpenAI's shape) and `tool_choice`: the reply may call them; its calls are
        parsed with `gen.call_format` (local) or arrive as `gen.stream.tool_calls` (remote)."""
        if backend is not None:
            return self._submit_remote(messages, params, tag, backend, tools, tool_choice)
        host = self._host
        if host.refusing:  # a model switch waits for the running replies to end
            raise SubmitError(host.refusing, "not_ready")
        # while another model loads, the one loaded still serves
        if host.target is None or host.state not in (BridgeState.READY, BridgeState.LOADING):
            raise SubmitError(host.not_ready_reason(), "not_ready")
        try:
            local_params = engine_params(params)
        except OutputFormatError as exc:
            raise SubmitError(str(exc), "rejected") from None
        what: dict[str, Any] = {"messages": list(messages)}
        fmt = None
        try:
            if tools:
                what, grammar, fmt = tool_request(host.target, messages, tools, tool_choice)
                if grammar is not None:
                    local_params["grammar"] = grammar
                share_prompt_with = None
            lead = (share_prompt_with.request_id if share_prompt_with is not None
                    and share_prompt_with.backend is None else None)
            stream = host.target.submit(**what, params=local_params,
                                        priority="interactive", tag=tag,
                                        share_prompt_with=lead)
        except ToolSpecError as exc:
            raise SubmitError(f"a tool cannot be offered: {exc}", "rejected") from None
        except QueueFullError as exc:
            raise SubmitError(str(exc), "queue_full") from None
        except RequestRejected as exc:
            raise SubmitError(str(exc), "rejected") from None
        except EngineStopped as exc:
            raise SubmitError(str(exc), "not_ready") from None
        gen = Generation(stream, tag, answered_by=host.description)
        gen.call_format = fmt
        gen.tool_names = [t["function"]["name"] for t in tools or []]
        self._frames.follow(gen)
        self._waits.watch()
        return gen

    def _submit_remote(self, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
                       tag: str | None, backend: str,
                       tools: Sequence[Mapping[str, Any]] | None = None,
                       tool_choice: str = "auto") -> Generation:
        if self._host.state == BridgeState.STOPPED:
            raise SubmitError("The app is shutting down.", "not_ready")
        try:
            client = self.remotes.client(backend, self._host.event_loop())
            # Remote messages carry no token ids: those are the local engine's own.
            plain = [{k: v for k, v in m.items() if k != "token_ids"} for m in messages]
            sampling, extra = remote_extras(params)
            if tools:
                extra |= {"tools": list(tools), "tool_choice": tool_choice if tool_choice in (
                    "auto", "none", "required") else {"type": "function",
                                                       "function": {"name": tool_choice}}}
            stream = client.submit(plain, params=sampling, tag=tag, extra_body=extra)
        except UnknownBackend as exc:
            raise SubmitError(str(exc), "not_ready") from None
        except ValueError as exc:  # no model chosen, or settings the client refuses
            raise SubmitError(str(exc), "rejected") from None
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
