"""The simulator's way in: the local engine's own streams, uncoalesced (it times every token)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.public import EngineStopped, Priority, RequestStream, SamplingParams

from .hosting import ModelHost
from .routing import Router


class StreamClient:
    """Requests to the model the bridge serves. Shaped as app.simulator.run's LoadTarget
    (`submit`, `max_concurrent`, `set_max_concurrent`, `description`)."""

    def __init__(self, host: ModelHost, router: Router) -> None:
        self._host = host
        self._router = router

    @property
    def description(self) -> str:
        """What a simulator summary names as its target (compared with servers' runs)."""
        return f"local engine ({self._host.description or 'no model'})"

    def submit(self, messages: Sequence[Mapping[str, Any]], *,
               params: SamplingParams | Mapping[str, Any] | None = None,
               priority: Priority | str = "interactive",
               tag: str | None = None) -> RequestStream:
        """Refusals raise the engine's errors (EngineStopped while no model is serving)."""
        return self._router.open_stream(messages, params=params, priority=priority, tag=tag)

    @property
    def max_concurrent(self) -> int:
        target = self._host.target
        if target is None:
            raise EngineStopped(self._host.not_ready_reason())
        return target.max_concurrent

    def set_max_concurrent(self, n: int) -> None:
        """Change the limit (ValueError if out of range); without a model, nothing to do."""
        target = self._host.target
        if target is not None:
            target.set_max_concurrent(n)
