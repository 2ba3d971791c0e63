"""Chat with files (issue #51): files read into text, Qt-free (read.py), framed into the user
message (framing.py), whole when they fit and retrieved in chunks when they do not
(chunks.py, index.py, fit.py). The UI, the API server and the history use this folder."""

from .attachment import Attachment, Part, RefusalReason, Refused
from .framing import frame, user_content
from .read import DEFAULT_MAX_BYTES, read_attachment

__all__ = ["Attachment", "Part", "Refused", "RefusalReason", "frame", "user_content",
           "read_attachment", "DEFAULT_MAX_BYTES"]
