"""One road from a request to the engine: the ChatRequest value, the one module that turns
it into engine input, and the one refusal type. The tab's maker is `app.request.tab` and
its output format `app.request.output_format` (imported by name: they build on this
package's values)."""

from .chat_request import ChatRequest, ResponseFormat
from .refusal import SUBMIT_ERRORS, Refusal, RefusalCode, refusal_of

__all__ = ["SUBMIT_ERRORS", "ChatRequest", "Refusal", "RefusalCode", "ResponseFormat",
           "refusal_of"]
