"""An OpenAI-compatible server as a Backend: a ChatRequest sent as OpenAI's body
(app/request/engine_input.py `remote_call`) through a RemoteClient, optionally with the
number of requests in flight bounded on the client (what `max_concurrent` means here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..remote.client import RemoteClient
from ..remote.limiter import Limiter
from ..request import ChatRequest, Refusal, RefusalCode, engine_input
from .protocol import Submission

if TYPE_CHECKING:
    from engine.public import Priority


class RemoteBackend:
    """`max_concurrent`: a request waits on the client for a free slot (that wait is its
    queue_s); None: no limit on the client (a chat tab's)."""

    def __init__(self, client: RemoteClient, max_concurrent: int | None = None) -> None:
        self.client = client
        self.limiter = Limiter(max_concurrent) if max_concurrent is not None else None

    @property
    def description(self) -> str:
        return self.client.description

    @property
    def sees_images(self) -> bool:
        return True  # a remote server decides for itself, and says so in its own error

    def submit(self, request: ChatRequest, *, priority: Priority | str = "interactive",
               tag: str | None = None, request_id: str | None = None,
               share_prompt_with: str | None = None) -> Submission:
        """One streamed reply (a server's own `n` is not asked for); failures on the way
        arrive on the stream. Refusal: no model chosen, or settings the client refuses."""
        messages, sampling, extra = engine_input.remote_call(request)
        try:
            stream = self.client.submit(messages, params=sampling, priority=priority, tag=tag,
                                        limiter=self.limiter, extra_body=extra)
        except ValueError as exc:
            raise Refusal(RefusalCode.INVALID_VALUE, str(exc)) from None
        return Submission([stream])

    @property
    def max_concurrent(self) -> int:
        if self.limiter is None:
            raise ValueError("no client-side limit on this backend")
        return self.limiter.limit

    def set_max_concurrent(self, n: int) -> None:
        if self.limiter is None:
            raise ValueError("no client-side limit on this backend")
        self.limiter.set_limit(n)
