"""One refusal for every road into a reply: a request that is not taken, with a code saying
why. The API server maps the code to an HTTP status and OpenAI's error body
(app/server/errors.py), the window to a sentence (ui/refusals.py); nothing else decides
either. Engine exceptions become refusals in one place, `refusal_of`. A tab's checks
before a request is made (app/conversation.py, ui/chat/token_count.py) refuse with the
same type, their figures in `detail` for the window's sentence."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from engine.public import EngineStopped, QueueFullError, RequestRejected


class RefusalCode(StrEnum):
    """Why a request was not taken; the value is the `code` of OpenAI's error body."""

    INVALID_VALUE = "invalid_value"  # a field the request's maker refuses
    INVALID_SCHEMA = "invalid_schema"  # a JSON schema no grammar can be built from
    INVALID_JSON = "invalid_json"  # a body that is not JSON, or one nested too deep
    INVALID_REQUEST = "invalid_request"  # the engine refused it (its prompt, its tokens)
    INVALID_API_KEY = "invalid_api_key"
    MODEL_NOT_FOUND = "model_not_found"  # a model name not served here
    REQUEST_TIMEOUT = "request_timeout"  # a body that came too slowly
    REQUEST_TOO_LARGE = "request_too_large"
    QUEUE_FULL = "queue_full"  # try again in a moment
    ENGINE_ERROR = "engine_error"  # generation failed after the request was taken
    MODEL_NOT_READY = "model_not_ready"  # none loaded yet, or a switch waits
    SHUTTING_DOWN = "shutting_down"  # the engine or the server is stopping
    # a tab's, before a request is made (the API server reads its bodies its own way)
    BAD_CHARACTER = "bad_character"  # text neither the model nor the history can take
    IMAGES_NOT_READ = "images_not_read"  # images for a model that reads text only
    IMAGES_WITH_TOOLS = "images_with_tools"  # images beside a local chat's tools
    ANSWER_COUNT = "answer_count"  # answers at once outside the tab's range
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"  # the draft over the model's context


class Refusal(Exception):
    """A request not taken: `code`, `message` (what went wrong, in the request's own
    terms), `param` (the field at fault, when one is) and `detail` (figures a sentence
    names, e.g. a prompt's tokens and the context)."""

    def __init__(self, code: RefusalCode, message: str, *, param: str | None = None,
                 detail: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param
        self.detail: dict[str, Any] = dict(detail or {})

    def __repr__(self) -> str:
        return f"Refusal({self.code.value}, {self.message!r}, param={self.param!r})"


# what Engine.submit (and so LocalTarget.submit) raises for a request it will not take
SUBMIT_ERRORS: tuple[type[Exception], ...] = (QueueFullError, RequestRejected, EngineStopped)


def refusal_of(exc: Exception, param: str | None = None) -> Refusal:
    """The refusal for one of SUBMIT_ERRORS; `param` names the field a rejection is about."""
    if isinstance(exc, QueueFullError):
        return Refusal(RefusalCode.QUEUE_FULL, str(exc))
    if isinstance(exc, RequestRejected):
        return Refusal(RefusalCode.INVALID_REQUEST, str(exc), param=param)
    if isinstance(exc, EngineStopped):
        return Refusal(RefusalCode.SHUTTING_DOWN, str(exc))
    raise TypeError(f"not a submit error of the engine: {exc!r}") from exc
