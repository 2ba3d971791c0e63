"""Branch copying: the messages a branch starts with, copied from a chat's path (Qt-free).

A branch is a new chat holding a copy of the path up to a message (`Conversation.branch`).
Each copy is a new message of its own (new id, nothing running) that keeps the original's
text, settings, token ids (so the engine serves the branch's prompt from the cached prefix)
and tool calls with their outcomes.
"""

from __future__ import annotations

import copy
import uuid

from .message_tree import ChatMessage


def copy_path(path: list[ChatMessage]) -> list[ChatMessage]:
    """Copies of `path`'s messages, each following the one before (MessageTree.chain)."""
    copies = [copy.copy(m) for m in path]
    for m in copies:
        m.id, m.streaming, m.wait_note, m.request_id = str(uuid.uuid4()), False, "", None
        if m.params is not None:
            m.params = dict(m.params)
        if m.token_ids is not None:
            m.token_ids = list(m.token_ids)
        # its own calls and outcomes: the original's change in place
        m.tool_calls = copy.deepcopy(m.tool_calls)
        m.tool_results = copy.deepcopy(m.tool_results)
    return copies


def branch_title(title: str) -> str:
    """A branch's title: named by a prefix, as tabs cut long titles at the end, where a
    suffix would vanish."""
    return f"Branch · {title}"
