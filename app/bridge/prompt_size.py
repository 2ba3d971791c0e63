"""How big a chat's next prompt is against the model's context, counted by the serving
model's own tokenizer (the prompt Engine.submit would make) on a worker thread, so the UI
thread never waits for a chat template or a tokenizer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.public import RequestRejected

from ..attachments.framing import frame
from ..attachments.index_progress import IndexProgress
from ..attachments.messages import ATTACHMENTS, has_attachments, shared_cache
from ..backend.local_target import LocalTarget
from ..request import ChatRequest, attachments

if TYPE_CHECKING:
    from ..backend import LocalBackend

log = logging.getLogger(__name__)

# One thread for every tab's counts: they come a few times a second at most, and one at a
# time keeps a long chat's count from competing with another's.
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batchchat-count")


@dataclass(frozen=True, slots=True)
class PromptSize:
    tokens: int
    context: int  # the model's context length

    @property
    def over(self) -> bool:
        """The engine refuses a prompt that leaves no room for one new token."""
        return self.tokens >= self.context


def with_files(target: LocalTarget, messages: Sequence[Mapping[str, Any]]
               ) -> list[Mapping[str, Any]]:
    """`messages` with their attached files as text, as a send puts them in (whole, or the
    passages that fit); unchanged without files."""
    if not has_attachments(messages):
        return list(messages)
    request, _ = attachments.fitted(ChatRequest(messages=messages), target)
    return list(request.messages or ())


def measure(target: LocalTarget, messages: Sequence[Mapping[str, Any]]) -> PromptSize | None:
    """The size of `messages`' prompt (0 for one with no text yet); None when the model's
    template refuses them (a send would say why)."""
    if not any(str(m.get("content") or "").strip() or m.get(ATTACHMENTS) for m in messages):
        return PromptSize(0, target.context_length)
    try:
        messages = with_files(target, messages)  # their text as a send puts it in
        return PromptSize(len(target.prompt_tokens(messages)), target.context_length)
    except RequestRejected:
        return None
    except Exception:  # noqa: BLE001 - a count must never break typing; a send shows errors
        log.exception("counting a prompt's tokens failed")
        return None


# (attachment's place in the list, stage, fraction): an index being built, on the worker
AttachmentProgress = Callable[[int, str, float], None]


def attachment_tokens(target: LocalTarget, atts: Sequence[Any],
                      progress: AttachmentProgress | None = None) -> list[int]:
    """Each attachment's tokens, framed as a send puts it in whole; one that cannot go in
    whole (as many tokens as the context) is indexed now, here off the UI thread, so a
    send finds its index cached; `progress(i, stage, fraction)` meanwhile."""
    counts = [len(target.encode(frame(a))) for a in atts]
    for i, (att, n) in enumerate(zip(atts, counts, strict=True)):
        if n >= target.context_length:
            shared_cache().get(att, _for(progress, i))
    return counts


def _for(progress: AttachmentProgress | None, i: int) -> IndexProgress | None:
    if progress is None:
        return None
    return lambda stage, fraction: progress(i, stage, fraction)


async def count_attachments(target: LocalTarget, atts: Sequence[Any],
                            progress: AttachmentProgress | None = None) -> list[int]:
    """`attachment_tokens` on the worker thread (`progress` is called there)."""
    return await asyncio.get_running_loop().run_in_executor(_WORKER, attachment_tokens,
                                                            target, list(atts), progress)


async def files_as_text(target: LocalTarget, messages: Sequence[Mapping[str, Any]]
                        ) -> list[Mapping[str, Any]]:
    """`with_files` on the worker thread (a file whose index left the cache is indexed
    again there, not on the caller's loop)."""
    messages = [dict(m) for m in messages]
    return await asyncio.get_running_loop().run_in_executor(_WORKER, with_files, target,
                                                            messages)


async def fit_files(backend: LocalBackend, request: ChatRequest) -> None:
    """`backend.fit_files(request)` on the worker thread: the indexes of files that do not
    fit whole and, with an embedding model, the question's vector made there and cached
    where the send (on the UI thread) finds them (issue #51)."""
    await asyncio.get_running_loop().run_in_executor(_WORKER, backend.fit_files, request)


async def count_prompt(target: LocalTarget,
                       messages: Sequence[Mapping[str, Any]]) -> PromptSize | None:
    """`measure` on the worker thread."""
    messages = [dict(m) for m in messages]  # a copy: the chat may change meanwhile
    return await asyncio.get_running_loop().run_in_executor(_WORKER, measure, target,
                                                            messages)
