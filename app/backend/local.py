"""The local engine as a Backend: a ChatRequest made into engine input (app/request/
engine_input.py) and submitted to a LocalTarget, one engine request per choice."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..images.parts import has_images
from ..request import (
    SUBMIT_ERRORS,
    ChatRequest,
    Refusal,
    attachments,
    engine_input,
    reasoning,
    refusal_of,
)
from .local_target import LocalTarget, load_target
from .protocol import Submission

if TYPE_CHECKING:
    from engine.public import EventStream, Priority


class LocalBackend:
    """Submits to `target`, or to what `serving()` returns at each submit (the app's model
    changes; it raises a Refusal while none takes requests). `describe()` names what
    answers (default: the model's description)."""

    def __init__(self, target: LocalTarget | None = None, *,
                 serving: Callable[[], LocalTarget] | None = None,
                 describe: Callable[[], str] | None = None) -> None:
        if (target is None) == (serving is None):
            raise TypeError("give a target or serving(), not both")
        self._serving = serving or (lambda: target)  # type: ignore[return-value]
        self._describe = describe

    @property
    def target(self) -> LocalTarget:
        """The LocalTarget a submit would use now (Refusal while none serves)."""
        return self._serving()

    @property
    def description(self) -> str:
        return self._describe() if self._describe is not None else self.target.description

    @property
    def sees_images(self) -> bool:
        """Whether the model serving now reads images (a VLM); False while none serves."""
        try:
            return self._serving().sees_images
        except Refusal:
            return False

    def submit(self, request: ChatRequest, *, priority: Priority | str = "interactive",
               tag: str | None = None, request_id: str | None = None,
               share_prompt_with: str | None = None) -> Submission:
        """One engine request per choice, the first leading (the others reuse its
        prefilled prompt); all of them, or none: a refusal cancels those already queued."""
        target = self._serving()
        if request.tool_road:  # a prompt rendered here: no other request's to share
            share_prompt_with = None
        streams: list[EventStream] = []
        try:
            request, shape = reasoning.prepared(request, target)
            # attached files made text here (engine_input.prompt would do it too), for
            # the passages the reply may cite: the last message's that has files
            request, files = attachments.fitted(request, target)
            # then whole turns dropped by the context overflow policy, if it must
            request, dropped = engine_input.overflow_fitted(request, target)
            what, fmt = engine_input.prompt(request, target)
            for i, params in enumerate(engine_input.choice_params(request)):
                streams.append(target.submit(
                    **what, params=params, priority=priority, tag=tag,
                    request_id=request_id if request_id is None or request.n == 1
                    else f"{request_id}-{i}",
                    share_prompt_with=streams[0].request_id if streams else share_prompt_with))
        except SUBMIT_ERRORS as exc:
            for stream in streams:
                stream.cancel()
            raise refusal_of(exc, _field(request)) from None
        return Submission(streams, fmt, shape, files[-1].citations if files else (), dropped)

    def fit_files(self, request: ChatRequest) -> None:
        """What `submit(request)` does first for its attached files, done now and thrown
        away (call it off the UI thread): the indexes it builds and the question's vector
        it embeds are then cached, and the submit finds them (issue #51); a vision model's
        images are processed (decoded, resized) and kept where the submit finds them
        (engine/vision/prepared.py, #52)."""
        target = self._serving()
        prepared, _ = reasoning.prepared(request, target)
        attachments.fitted(prepared, target)
        if target.sees_images and has_images(request.messages):
            self.prompt_tokens(request)

    def prompt_tokens(self, request: ChatRequest) -> list[int]:
        """The prompt `submit(request)` would run, without running it (the same reasoning
        switch, template and tools); a Refusal where the engine would refuse it."""
        target = self._serving()
        try:
            request, _ = reasoning.prepared(request, target)
            request, _ = engine_input.overflow_fitted(request, target)
            what, _ = engine_input.prompt(request, target)
            if "prompt_tokens" in what:
                return list(what["prompt_tokens"])
            return target.prompt_tokens(what["messages"], what.get("template_kwargs"),
                                        images=what.get("images"))
        except SUBMIT_ERRORS as exc:
            raise refusal_of(exc, _field(request)) from None

    # -- the concurrency a simulator run sets -----------------------------------------------
    @property
    def max_concurrent(self) -> int:
        return self._serving().max_concurrent

    def set_max_concurrent(self, n: int) -> None:
        """Change the limit (ValueError if out of range); without a model, nothing to
        change: the next one starts with its own limit."""
        try:
            target = self._serving()
        except Refusal:
            return
        target.set_max_concurrent(n)


def load_local(source: str, progress: Callable[[str, float], None] | None = None,
               **settings: Any) -> LocalBackend:
    """A LocalBackend on `source` loaded with EngineConfig `settings` (blocking: the
    terminal chat's; local_target.load_target). Not started: `backend.target` starts and
    stops it."""
    return LocalBackend(load_target(source, progress, **settings))


def _field(request: ChatRequest) -> str:
    """The field a rejected request is about (an API refusal's `param`)."""
    return "messages" if request.kind == "chat" else "prompt"
