"""A chat's messages as a tree, and the one path through it a tab shows. Qt-free, no engine.

Every message names its parent (None: a first message). Siblings are versions: replies
regenerated or answered several at once, user messages edited and sent again. `seq` is
the order messages were made in; siblings sort by it. Which child a path takes below a
message is remembered, so switching a version and back returns to the same branch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bridge import ReplyStats


@dataclass
class ChatMessage:
    role: str  # "user" | "assistant"
    # The text shown. A reply's, while it streams, is its stream's text as of the last
    # frame (Conversation._on_delta assigns it; nothing appends here), and the message keeps
    # it alone once the reply ended (docs/architecture.md, "A reply's text")
    content: str
    streaming: bool = False
    stats: ReplyStats | None = None
    finish_reason: str | None = None
    error: str | None = None
    request_id: str | None = None
    params: dict[str, Any] | None = None  # the sampling settings a reply was made with
    # A reply's generated token ids: handed back with the next prompt so the engine reuses
    # its cached KV exactly (engine/chat_prompt.py); None for user text and old replies.
    token_ids: list[int] | None = None
    wait_note: str = ""  # before the first token: "queued — 2 ahead", "reading prompt 40 %"
    # Who answered: the backend (None: the local engine, else a connection's name) and its
    # description ("SmolLM2 …" or "lab (qwen)"), saved with the reply's stats
    backend: str | None = None
    answered_by: str = ""
    # a local reply's library model when not the default one (issue #50), saved likewise
    model: str | None = None
    id: str = field(default_factory=lambda: str(uuid.uuid4()))  # its history row
    parent_id: str | None = None  # the message it follows (None: a first message)
    seq: int = 0  # when it was made, within its chat: versions sort by it
    # A reply that called tools: its calls (OpenAI's shape) and each call's outcome by id,
    # {"status": pending | running | done | failed | denied, "text": the result or why}
    tool_calls: list[dict[str, Any]] | None = None
    tool_results: dict[str, dict[str, str]] = field(default_factory=dict)
    # A reasoning model's reply (issue #49): its thinking apart from the answer (`content`),
    # how long it thought and in how many tokens (app/reasoning/reply.py; None: unknown)
    reasoning: str = ""
    thinking_s: float | None = None
    reasoning_tokens: int | None = None
    # A user message's files (issue #51): app.attachments' Attachment (read) or Refused
    # (a file whose text the history did not keep); only Attachments go in the prompt
    attachments: tuple[Any, ...] = ()
    # A user message's images (issue #52): app.images' ImageData, sent as image_url parts
    images: tuple[Any, ...] = ()
    # A reply to files that did not fit: the passages it was given, numbered as in its
    # prompt (app.attachments.fit's Citation), shown under the answer
    citations: tuple[Any, ...] = ()


@dataclass
class Removed:
    """What `MessageTree.remove` took out, for `restore` (undo)."""

    messages: list[ChatMessage]  # the message and everything below it, in seq order
    path_ids: list[str]  # the path shown before
    chosen: dict[str | None, str]


class MessageTree:
    """`nodes` (id → message, in seq order) and `path` (the messages shown, first to last)."""

    def __init__(self, messages: Iterable[ChatMessage] = (),
                 shown_leaf_id: str | None = None) -> None:
        self.nodes: dict[str, ChatMessage] = {}
        for msg in sorted(messages, key=lambda m: m.seq):
            self.nodes[msg.id] = msg
        for msg in self.nodes.values():
            # A parent that is gone, or not made before it (a damaged or hand-edited file;
            # it could close a loop): the message starts a chat.
            parent = self.nodes.get(msg.parent_id or "")
            if msg.parent_id is not None and (parent is None or parent.seq >= msg.seq):
                msg.parent_id = None
        self.path: list[ChatMessage] = []
        self._chosen: dict[str | None, str] = {}  # parent id -> the child last shown
        # parent id -> its children in seq order, and the next seq: kept with `nodes` so
        # that a tab's rebuild (a version label per message) is not a scan per message
        self._kids: dict[str | None, list[ChatMessage]] = {}
        self._next_seq = 0
        self._reindex()
        leaf = self.nodes.get(shown_leaf_id or "") or self.newest
        if leaf is not None:
            self.show(leaf.id)

    @classmethod
    def chain(cls, messages: Iterable[ChatMessage]) -> MessageTree:
        """A tree that is one path: each message follows the one before it."""
        tree, parent = cls(), None
        for msg in messages:
            tree.add(msg, parent)
            parent = msg
        if parent is not None:
            tree.show(parent.id)
        return tree

    # -- reading ------------------------------------------------------------------------
    @property
    def newest(self) -> ChatMessage | None:
        return max(self.nodes.values(), key=lambda m: m.seq, default=None)

    @property
    def leaf(self) -> ChatMessage | None:
        return self.path[-1] if self.path else None

    def children(self, parent_id: str | None) -> list[ChatMessage]:
        return list(self._kids.get(parent_id, ()))

    def siblings(self, msg: ChatMessage) -> list[ChatMessage]:
        """Its versions, itself included, oldest first."""
        return self.children(msg.parent_id)

    def version(self, msg: ChatMessage) -> tuple[int, int]:
        """(its place among its versions, counting from 1; how many there are)."""
        sibs = self.siblings(msg)
        return sibs.index(msg) + 1, len(sibs)

    def ancestors(self, msg: ChatMessage) -> list[ChatMessage]:
        """The messages before it, first to last (what its prompt is made of)."""
        out = []
        parent = self.nodes.get(msg.parent_id or "")
        while parent is not None:
            out.append(parent)
            parent = self.nodes.get(parent.parent_id or "")
        return out[::-1]

    def subtree(self, msg: ChatMessage) -> list[ChatMessage]:
        """The message and everything below it, in seq order."""
        ids = {msg.id}
        for m in self.nodes.values():  # seq order: a parent comes before its children
            if m.parent_id in ids:
                ids.add(m.id)
        return [m for m in self.nodes.values() if m.id in ids]

    def index(self, msg: ChatMessage) -> int | None:
        """Its place in the shown path (None: not shown)."""
        return next((i for i, m in enumerate(self.path) if m is msg), None)

    # -- changing -----------------------------------------------------------------------
    def add(self, msg: ChatMessage, parent: ChatMessage | None) -> None:
        """Add `msg` below `parent` (None: as a first message), newest of its versions (a
        saved seq that is later still is kept). The shown path is unchanged (`show` it)."""
        msg.parent_id = parent.id if parent is not None else None
        msg.seq = max(msg.seq, self._next_seq)
        self._next_seq = msg.seq + 1
        self.nodes[msg.id] = msg
        self._kids.setdefault(msg.parent_id, []).append(msg)

    def show(self, message_id: str) -> None:
        """Show the path through this message: the messages before it, it, then below it
        the branch shown there last (else the newest)."""
        msg = self.nodes[message_id]
        path = [*self.ancestors(msg), msg]
        while True:
            kids = self.children(path[-1].id)
            if not kids:
                break
            chosen = self._chosen.get(path[-1].id)
            path.append(next((k for k in kids if k.id == chosen), kids[-1]))
        for m in path:
            self._chosen[m.parent_id] = m.id
        self.path = path

    def remove(self, msg: ChatMessage) -> Removed:
        """Take out `msg` and everything below it; the path then shows the nearest version
        left (the one before it, else after it), else ends at its parent."""
        sibs = self.siblings(msg)
        pos = sibs.index(msg)
        removed = Removed(self.subtree(msg), [m.id for m in self.path], dict(self._chosen))
        for m in removed.messages:
            del self.nodes[m.id]
        self._reindex()
        rest = sibs[:pos][-1:] or sibs[pos + 1:pos + 2]
        if rest:
            self.show(rest[0].id)
        elif msg.parent_id is not None:
            self.show(msg.parent_id)
        else:
            self.path = []
        if self._chosen.get(msg.parent_id) == msg.id:
            del self._chosen[msg.parent_id]
        return removed

    def restore(self, removed: Removed) -> None:
        """Put back what `remove` took out, and show the path shown before."""
        merged = [*self.nodes.values(), *removed.messages]
        self.nodes = {m.id: m for m in sorted(merged, key=lambda m: m.seq)}
        self._reindex()
        self._chosen = dict(removed.chosen)
        leaf = next((i for i in reversed(removed.path_ids) if i in self.nodes), None)
        if leaf is not None:
            self.show(leaf)
        else:
            self.path = []

    def _reindex(self) -> None:
        self._kids = {}
        for m in self.nodes.values():  # seq order
            self._kids.setdefault(m.parent_id, []).append(m)
        self._next_seq = max((m.seq for m in self.nodes.values()), default=-1) + 1
