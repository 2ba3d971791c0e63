"""A reply's end as the other API dialects (Anthropic's Messages, OpenAI's Responses) read
it: they answer one choice, and a reply cut short by a stopping server has no whole body."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..request import Refusal, RefusalCode

if TYPE_CHECKING:
    from .app import ApiServer
    from .choices import Choices
    from .responses import Reply

ENDED_EARLY = ("cancelled", "shutdown")  # the server is stopping


def ended_badly(finish: str, error: str | None, what: str) -> Refusal | None:
    """The refusal a finished `what` ("reply", "response") stands for, if any."""
    if finish == "error":
        return Refusal(RefusalCode.ENGINE_ERROR, f"generation failed: {error}")
    if finish in ENDED_EARLY:
        return Refusal(RefusalCode.SHUTTING_DOWN, f"the server is stopping: the {what} was "
                                                  "cut short")
    return None


async def collect(server: ApiServer, choices: Choices, reply: Reply, t0: float,
                  what: str) -> None:
    """The one choice's events into `reply` (and the server's metrics) to its end; the
    refusal if it ended badly."""
    last = t0
    async for _, event in choices.events():
        last = server.observe(event, t0, last)
        reply.add(event)
        if event.finish_reason is not None:
            refused = ended_badly(event.finish_reason, event.error, what)
            if refused is not None:
                raise refused
