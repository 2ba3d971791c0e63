"""The Workspace with chat trees: a chat reopened without a history comes back with every
version and the path it showed, and a version cut off by closing reads as stopped even when
it is not the one shown."""

from __future__ import annotations

from app.bridge import EngineBridge
from app.conversation import ChatMessage, Conversation
from app.message_tree import MessageTree
from app.settings import Settings
from app.workspace import Workspace


def test_reopen_without_a_history_keeps_every_version_and_the_path_shown() -> None:
    ws = Workspace(EngineBridge(), Settings())
    q, a, b = ChatMessage("user", "q"), ChatMessage("assistant", "a"), \
        ChatMessage("assistant", "b", streaming=True)  # a version still answering
    tree = MessageTree.chain([q, a])
    tree.add(b, q)
    conv = ws.open(Conversation(ws.bridge, tree=tree))
    assert [m.content for m in conv.messages] == ["q", "a"]
    ws.open()
    ws.close(conv)
    assert not b.streaming and b.finish_reason == "cancelled"
    back = ws.reopen()
    assert back is not None and back is not conv
    assert list(back.tree.nodes) == [q.id, a.id, b.id]
    assert [m.content for m in back.messages] == ["q", "a"] and back.versions(1) == (1, 2)
    assert back.switch_version(1, 1) and [m.content for m in back.messages] == ["q", "b"]
