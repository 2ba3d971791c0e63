"""The one way a request for a reply is sent: `Backend.submit(ChatRequest) -> Submission`.

Two implementations: app/backend/local.py (the local engine, through a LocalTarget) and
app/backend/remote.py (an OpenAI-compatible server). Every caller (the API server, the
tabs and compare through EngineBridge, the simulator, the terminal chat) submits through
one of them and never builds engine input itself (app/request/engine_input.py does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..request.overflow import Dropped

if TYPE_CHECKING:
    from engine.public import EventStream, Priority

    from ..attachments.fit import Citation
    from ..request import ChatRequest
    from ..request.reasoning import Shape
    from ..tools import CallFormat


@dataclass(slots=True)
class Submission:
    """A request taken: one EventStream per choice (`n` of them, in choice order; a
    request's choices are its own streams, since each one ends on its own) and the format
    their tool calls are parsed in (None: no tools offered, or a server that sends the
    calls parsed: RemoteStream.tool_calls)."""

    streams: Sequence[EventStream]
    call_format: CallFormat | None = None
    # a reasoning model's reply: how its text splits into thinking and answer
    # (app/request/reasoning.py; None: all answer)
    shape: Shape | None = None
    # the passages of attached files the prompt was given, numbered as in it (a message's
    # files retrieved, app/attachments/fit.py; () when whole or none)
    citations: tuple[Citation, ...] = ()
    # what the context overflow policy left out of the prompt (app/request/overflow.py)
    dropped: Dropped = field(default_factory=Dropped)

    @property
    def stream(self) -> EventStream:
        """The first choice's stream (the only one unless `n` > 1)."""
        return self.streams[0]

    def cancel(self) -> None:
        """End every choice still running (no-op for those that ended)."""
        for stream in self.streams:
            stream.cancel()


class Backend(Protocol):
    """Where replies come from. `submit` raises app.request's Refusal for a request not
    taken, and then none of its choices runs."""

    @property
    def description(self) -> str:
        """What answers (a model's description, a server's name): shown with each reply."""
        ...

    @property
    def sees_images(self) -> bool:
        """Whether a request may carry images (`image_url` parts): False refuses them
        before sending, in the window and as the API's 400 naming the part."""
        ...

    def submit(self, request: ChatRequest, *, priority: Priority | str = "interactive",
               tag: str | None = None, request_id: str | None = None,
               share_prompt_with: str | None = None) -> Submission:
        """Start `request`'s `n` choices. `tag` says who asked (the stats panel's source);
        `request_id` names the request (choice i of several is `{request_id}-{i}`);
        `share_prompt_with`: a request started just before with the same prompt, whose
        prefill the local engine reuses (others ignore it)."""
        ...


class LoadBackend(Backend, Protocol):
    """A Backend a simulator run sets the concurrency of (app/simulator/run.py)."""

    @property
    def max_concurrent(self) -> int: ...

    def set_max_concurrent(self, n: int) -> None: ...
