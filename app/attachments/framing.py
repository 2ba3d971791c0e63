"""How attachments sit in the user message: each file as a `File: name` line and its text in
a code fence, before the question. The framing is a pure function of the file's text (the
fence's length from the text itself), so the same document gives the same tokens on a
follow-up and the engine's prefix cache reuses its KV: the document comes first in the
message, the question after it.

    File: notes.md
    ```markdown
    …the file's text…
    ```

    <the question>

A folder is a `Folder: name (N files)` line and each file framed under its path; a PDF's
pages are joined as they are (page markers belong to retrieved chunks, fit.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from ..plural import counted
from .attachment import Attachment
from .kinds import kind_of

_TICKS = re.compile(r"`{3,}")
# A message that is only files (#51): what the tab's message asks, and what retrieval looks
# for when an API message's files come without text
FILES_ONLY_QUESTION = "Summarize the attached files."


def fenced(text: str, language: str) -> str:
    """`text` in a backtick fence longer than any backtick run inside it (CommonMark)."""
    longest = max((len(m.group(0)) for m in _TICKS.finditer(text)), default=2)
    fence = "`" * max(3, longest + 1)
    info = "" if language in ("text", "pdf", "docx", "html") else language
    return f"{fence}{info}\n{text.rstrip()}\n{fence}"


def frame(att: Attachment) -> str:
    """One attachment as it goes into the prompt, whole."""
    if att.kind != "folder":
        return f"File: {att.name}\n{fenced(att.text, att.kind)}"
    files = [f"File: {att.name}/{p.source}\n"
             f"{fenced(p.text, kind_of(PurePosixPath(p.source or '')))}" for p in att.parts]
    head = f"Folder: {att.name} ({counted(len(att.parts), 'file')})"
    return "\n\n".join([head, *files])


def user_content(question: str, attachments: Sequence[Attachment],
                 framed: Sequence[str] | None = None) -> str:
    """The user message's text: the attachments framed (or `framed`, retrieved chunks
    already framed by fit.py), then the question."""
    blocks = list(framed) if framed is not None else [frame(a) for a in attachments]
    return "\n\n".join([*blocks, question] if question else blocks) if blocks else question
