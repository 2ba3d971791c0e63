"""`RemoteTarget`: a simulator `LoadTarget` (app/simulator/run.py) for any server, with the
number of requests in flight bounded on the client (what `max_concurrent` means here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .client import RemoteClient
from .limiter import Limiter

if TYPE_CHECKING:
    from engine.public import SamplingParams

    from .stream import RemoteStream


class RemoteTarget:
    def __init__(self, client: RemoteClient, max_concurrent: int = 16) -> None:
        self.client = client
        self.limiter = Limiter(max_concurrent)

    @property
    def description(self) -> str:
        return self.client.description

    @property
    def max_concurrent(self) -> int:
        return self.limiter.limit

    def set_max_concurrent(self, n: int) -> None:
        self.limiter.set_limit(n)

    def submit(self, messages: Sequence[Mapping[str, Any]], *,
               params: SamplingParams | Mapping[str, Any] | None = None,
               priority: Any = "background", tag: str | None = None) -> RemoteStream:
        """A request waits on the client for a free slot; that wait is its queue_s."""
        return self.client.submit(messages, params=params, priority=priority, tag=tag,
                                  limiter=self.limiter)
