"""A saved chat's messages as a tree: the path its tab shows and where versions exist.

One rule for everything that reads a saved chat (the tab, the Markdown export, the history
view): rows that name no parents at all were written as one path (an import of an export
from before trees, another program), each following the one before; otherwise the tree is
app/message_tree.py's, showing the session's `shown_leaf_id` (else the newest message).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.message_tree import ChatMessage, MessageTree
from app.storage import LoadedSession, Message


def message_tree(messages: list[ChatMessage], shown_leaf_id: str | None) -> MessageTree:
    """The tree of a saved chat's messages (as the tab shows them)."""
    if len(messages) > 1 and all(m.parent_id is None for m in messages):
        return MessageTree.chain(messages)
    return MessageTree(messages, shown_leaf_id)


@dataclass(frozen=True, slots=True)
class ShownMessage:
    """A message of the shown path, and which of its versions it is (k of n)."""

    message: Message
    version: int
    versions: int


def shown_path(loaded: LoadedSession) -> list[ShownMessage]:
    """The path the session's tab shows, first message to last, with version counts."""
    records = {m.id: m for m in loaded.messages}
    # Light copies: the tree links and renumbers its own messages, never the records.
    nodes = [ChatMessage(m.role, m.content, id=m.id, parent_id=m.parent_id, seq=m.seq)
             for m in loaded.messages]
    tree = message_tree(nodes, loaded.session.shown_leaf_id)
    return [ShownMessage(records[m.id], *tree.version(m)) for m in tree.path]


def shown_messages(loaded: LoadedSession) -> list[Message]:
    """The shown path's records, first to last."""
    return [s.message for s in shown_path(loaded)]
