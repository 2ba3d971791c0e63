"""One chat (one tab): its tree of messages, the path shown, its system prompt and settings.

Qt-free. Views subscribe to the events; every change to the messages goes through here.
The messages are a tree (app/message_tree.py): Regenerate and Edit add versions beside the
old ones, several answers at once are versions made in one batch, Compare asks several
targets at once, and a branch is a new chat with a copy of the path up to a message.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from dataclasses import dataclass
from typing import Any

from engine.public import lone_surrogate, repair_text

from .bridge import EngineBridge, Generation
from .events import Event
from .message_tree import ChatMessage, MessageTree, Removed
from .reply_tools import reply_calls, tool_result_text
from .request import Refusal
from .request.engine_input import choice_seed
from .titles import title_from_message
from .waiting import wait_note

__all__ = ["ChatMessage", "Conversation", "FINISH_NOTES", "MAX_ANSWERS", "ReplyTarget"]

_ids = itertools.count(1)
MAX_ANSWERS = 4  # several answers at once: 2 to this many


@dataclass(frozen=True)
class ReplyTarget:
    """Where one reply comes from: a backend (None: the local engine, else a saved
    connection's name) and the sampling settings; `label` names it in a compare view."""

    backend: str | None
    params: dict[str, Any]
    label: str = ""


FINISH_NOTES = {
    "length": "stopped at max tokens",
    "context": "the context is full: start a new chat or shorten this one",
    "cancelled": "stopped",
    "shutdown": "the engine shut down",
    "switched": "stopped by a model switch",
    "interrupted": "incomplete: BatchChat closed before this reply finished",
}


class Conversation:
    """Events about the shown path (indices into `messages`): `reset()` (the path was
    replaced: a version switched, a message deleted or restored), `added(index)`,
    `delta(index, text)`, `reply_finished(index)` (the reply has its stats and finish
    reason), `waiting(index)` (its wait_note changed).

    Events about any message of the tree, shown or not (the history and compare views
    follow these): `message_added(msg)`, `message_delta(msg, text)`,
    `message_finished(msg)`, `message_waiting(msg)`, `removed(list[msg])` (deleted; an
    undo adds them again with `message_added`), `shown_changed()` (the path's last
    message changed).

    And `busy_changed(bool)`, `notice(text)` (a sentence, or a reply's Refusal, which the
    window words: ui/refusals.py), `meta_changed()` (title, system prompt, settings or
    preset)."""

    def __init__(self, bridge: EngineBridge, *, title: str = "", system_prompt: str = "",
                 params: dict[str, Any] | None = None, session_id: str | None = None,
                 messages: list[ChatMessage] | None = None, preset: str | None = None,
                 backend: str | None = None, tree: MessageTree | None = None,
                 default_title: str = "") -> None:
        """`messages`: one path (each follows the one before); `tree`: a whole tree.
        `default_title`: the name it has until named (the workspace numbers new chats)."""
        self.id = next(_ids)
        # The title a chat has until it is named (by its first message or the user).
        self.default_title = default_title or f"Chat {self.id}"
        self.session_id = session_id or str(uuid.uuid4())  # its row in the history store
        self.bridge = bridge
        self.title = title or self.default_title
        self.system_prompt = system_prompt
        self.params: dict[str, Any] = dict(params or {})
        self.preset = preset
        self.backend = backend  # None: the local engine; else a saved connection's name
        # answers Send and Regenerate ask for (the tab's ×N), saved with the chat's settings
        self.answers = 1
        self.tree = tree if tree is not None else MessageTree.chain(messages or [])
        self.running: dict[str, Generation] = {}  # reply message id -> its Generation
        self.generations: list[Generation] = []  # the newest replies and any still running
        self._undo: list[Removed] = []
        self.reset, self.added, self.delta = Event(), Event(), Event()
        self.reply_finished, self.busy_changed, self.notice = Event(), Event(), Event()
        self.meta_changed = Event()
        self.waiting = Event()  # (index): a reply's wait_note changed
        self.message_added, self.message_delta = Event(), Event()
        self.message_finished, self.message_waiting = Event(), Event()
        self.removed, self.shown_changed = Event(), Event()
        # Tools (app.tool_runner fills `offered_tools`, OpenAI's shape, before a send when
        # the params name MCP servers): `tool_calls_found(msg)` when a reply called tools,
        # `tool_changed(index)` when a call's outcome changed (`message_tool_changed(msg)`
        # for any message of the tree, shown or not: the history saves it), and
        # `tools_stopped()` on Stop.
        self.message_tool_changed = Event()
        self.offered_tools: list[dict[str, Any]] = []
        self.tool_wait: dict[str, ChatMessage] = {}  # replies whose calls await outcomes
        self.tool_calls_found, self.tool_changed, self.tools_stopped = Event(), Event(), Event()

    @property
    def messages(self) -> list[ChatMessage]:
        """The path shown, first message to last."""
        return self.tree.path

    @property
    def tag(self) -> str:
        return f"tab-{self.id}"

    @property
    def is_busy(self) -> bool:
        return bool(self.running or self.tool_wait)

    @property
    def generation(self) -> Generation | None:
        """A reply still running (the first started), if any."""
        return next(iter(self.running.values()), None)

    @property
    def can_regenerate(self) -> bool:
        return not self.is_busy and any(m.role == "user" for m in self.messages)

    @property
    def can_undo_delete(self) -> bool:
        return bool(self._undo)

    def versions(self, index: int) -> tuple[int, int]:
        """(which version message `index` is, counting from 1; how many there are)."""
        return self.tree.version(self.messages[index])

    # -- sending ------------------------------------------------------------------------
    def send(self, text: str, n: int = 1) -> bool:
        """Add a user message and start `n` replies (versions, one batch). False (with a
        notice) if refused."""
        if not self._can_send(text) or not self._valid_n(n):
            return False
        if not self.tree.nodes and self.title == self.default_title:
            # named after its first message until the user renames it
            self.rename(title_from_message(text) or self.title)
        user = self._add(ChatMessage("user", text), self.tree.leaf)
        return self._start(user, self._same_targets(n))

    def regenerate(self, n: int = 1, index: int | None = None) -> bool:
        """New versions of reply `index` (default: the last reply, or the replies to a last
        user message): the old ones are kept beside them."""
        if not self.can_regenerate or not self._valid_n(n):
            return False
        parent = self._reply_parent(index)
        if parent is None:
            return False
        return self._start(parent, self._same_targets(n))

    def edit_and_resend(self, index: int, text: str, n: int = 1) -> bool:
        """A new version of user message `index`, and replies to it; the old message and
        everything after it stay as the other version."""
        if not self._can_send(text) or self.messages[index].role != "user" \
                or not self._valid_n(n):
            return False
        old = self.messages[index]
        parent = self.tree.nodes.get(old.parent_id or "")
        user = self._add(ChatMessage("user", text), parent)
        return self._start(user, self._same_targets(n))

    def compare(self, text: str, targets: list[ReplyTarget]) -> list[ChatMessage | Refusal]:
        """Send `text` once and ask every target at once; their replies are versions (the
        first started is shown). Per target, in order: its reply, or its Refusal.
        [] when nothing was sent (no targets, empty or invalid text, a reply running)."""
        if not targets or not self._can_send(text):
            return []
        if not self.tree.nodes and self.title == self.default_title:
            self.rename(title_from_message(text) or self.title)
        user = self._add(ChatMessage("user", text), self.tree.leaf)
        return self._start_each(user, targets)

    # -- the tree -----------------------------------------------------------------------
    def switch_version(self, index: int, step: int) -> bool:
        """Show the version `step` places from message `index` (-1: the one before)."""
        msg = self.messages[index]
        sibs = self.tree.siblings(msg)
        pos = sibs.index(msg) + step
        if step == 0 or not 0 <= pos < len(sibs):
            return False
        self.show(sibs[pos].id)
        return True

    def show(self, message_id: str) -> None:
        """Show the path through this message (a compare pick, a search hit)."""
        if self.tree.leaf is not None and message_id == self.tree.leaf.id:
            return
        self.tree.show(message_id)
        self.reset.emit()
        self.shown_changed.emit()

    def delete(self, index: int) -> bool:
        """Delete message `index` and everything after it (in every branch below it); the
        nearest version left is shown. `undo_delete` puts it back."""
        if self.is_busy or not 0 <= index < len(self.messages):
            if self.is_busy:
                self.notice.emit("Stop the reply before deleting messages.")
            return False
        removed = self.tree.remove(self.messages[index])
        self._undo = [*self._undo[-19:], removed]
        self.removed.emit(list(removed.messages))
        self.reset.emit()
        self.shown_changed.emit()
        return True

    def undo_delete(self) -> bool:
        """Put back the messages deleted last, and the path shown then."""
        if not self._undo:
            return False
        removed = self._undo.pop()
        self.tree.restore(removed)
        for msg in removed.messages:
            self.message_added.emit(msg)
        self.reset.emit()
        self.shown_changed.emit()
        return True

    def branch(self, index: int) -> Conversation:
        """A new chat with a copy of the path up to message `index` (same settings, same
        token ids, so the engine serves its prompt from the cached prefix)."""
        path = [copy.copy(m) for m in self.messages[:index + 1]]
        for m in path:
            m.id, m.streaming, m.wait_note, m.request_id = str(uuid.uuid4()), False, "", None
            if m.params is not None:
                m.params = dict(m.params)
            if m.token_ids is not None:
                m.token_ids = list(m.token_ids)
            # its own calls and outcomes: the original's change in place
            m.tool_calls = copy.deepcopy(m.tool_calls)
            m.tool_results = copy.deepcopy(m.tool_results)
        # named by a prefix: tabs cut long titles at the end, where a suffix would vanish
        return Conversation(self.bridge, title=f"Branch · {self.title}",
                            system_prompt=self.system_prompt, params=dict(self.params),
                            preset=self.preset, backend=self.backend, messages=path)

    # -- settings -----------------------------------------------------------------------
    # Titles and settings are never refused: text that is not valid Unicode (it could never
    # be saved) is repaired instead, each bad character becoming U+FFFD.
    def rename(self, title: str) -> None:
        self.title = repair_text(title)
        self.meta_changed.emit()

    def update_settings(self, system_prompt: str, params: dict[str, Any] | None = None,
                        preset: str | None = None) -> None:
        """New system prompt, and sampling settings when given (None: keep them)."""
        self.system_prompt = repair_text(system_prompt)
        if params is not None:
            self.params = params
        self.preset = preset
        self.meta_changed.emit()

    def set_answers(self, n: int) -> None:
        """How many answers the tab's Send and Regenerate ask for (1 to MAX_ANSWERS)."""
        n = max(1, min(MAX_ANSWERS, n))
        if n != self.answers:
            self.answers = n
            self.meta_changed.emit()

    def set_backend(self, backend: str | None) -> None:
        """Where the next reply comes from (a running reply finishes where it started)."""
        if backend != self.backend:
            self.backend = backend
            self.meta_changed.emit()

    def stop(self) -> None:
        for gen in list(self.running.values()):
            gen.cancel()
        if self.tool_wait:  # calls not answered yet: refused, and no reply follows
            waiting, self.tool_wait = list(self.tool_wait.values()), {}
            self.tools_stopped.emit()
            for msg in waiting:
                for call_id, outcome in msg.tool_results.items():
                    if outcome["status"] in ("pending", "running"):
                        msg.tool_results[call_id] = {"status": "denied",
                                                     "text": "Stopped by the user."}
                self._tool_changed(msg)
            if not self.is_busy:
                self.busy_changed.emit(False)

    def set_tool_result(self, msg: ChatMessage, call_id: str, status: str,
                        text: str = "") -> None:
        """A call's outcome (running, done, failed, denied); when every call of the reply
        has one, the results go back to the model and the reply continues."""
        if msg.id not in self.tool_wait or call_id not in msg.tool_results:
            return  # stopped meanwhile
        msg.tool_results[call_id] = {"status": status, "text": text}
        self._tool_changed(msg)
        if all(o["status"] in ("done", "failed", "denied") for o in msg.tool_results.values()):
            del self.tool_wait[msg.id]
            params = dict(msg.params or self.params) | {"tool_choice": "auto"}
            if not self._start(msg, [ReplyTarget(msg.backend, params)]) and not self.is_busy:
                self.busy_changed.emit(False)

    def _tool_changed(self, msg: ChatMessage) -> None:
        self.message_tool_changed.emit(msg)
        index = self.tree.index(msg)
        if index is not None:
            self.tool_changed.emit(index)

    def close(self) -> None:
        """The tab is closing: cancel the replies and stop listening to them."""
        running, self.running = list(self.running.values()), {}
        for gen in running:
            gen.detach()
            gen.cancel()

    def next_prompt(self, text: str, editing: int | None = None) -> list[dict[str, Any]]:
        """The messages that sending `text` would submit (as a new version of shown message
        `editing`, when given): the system prompt, the path before it, then `text`. Tools
        an MCP server offers are not in it (they are listed only when sending)."""
        if editing is None:
            before = self.prompt_messages()
        else:
            parent = self.tree.nodes.get(self.messages[editing].parent_id or "")
            before = self.prompt_messages(parent) if parent is not None \
                else self.prompt_messages(path=[])
        return [*before, {"role": "user", "content": text}]

    def prompt_messages(self, upto: ChatMessage | None = None,
                        path: list[ChatMessage] | None = None) -> list[dict[str, Any]]:
        """The chat as the engine takes it, through `upto` (default: the path shown; or
        the messages of `path`): replies carry their token ids."""
        if path is None:
            path = self.messages if upto is None else [*self.tree.ancestors(upto), upto]
        out: list[dict[str, Any]] = [{"role": "system", "content": self.system_prompt}] \
            if self.system_prompt.strip() else []
        for m in path:
            if m.tool_calls:  # the calls, then each one's result as a "tool" message
                out.append({"role": "assistant", "content": m.content,
                            "tool_calls": m.tool_calls})
                out.extend({"role": "tool", "tool_call_id": c["id"],
                            "name": c["function"]["name"],
                            "content": tool_result_text(m.tool_results.get(c["id"]))}
                           for c in m.tool_calls)
            elif m.content or m.role == "user":
                out.append({"role": m.role, "content": m.content}
                           | ({"token_ids": m.token_ids} if m.token_ids else {}))
        return out

    # -- internals ----------------------------------------------------------------------
    def _can_send(self, text: str) -> bool:
        if self.backend is None and self.bridge.refusing and text.strip():
            self.notice.emit(self.bridge.refusing)  # a model switch waits: nothing is added
            return False
        return not self.is_busy and bool(text.strip()) and self._valid_text(text)

    def _valid_text(self, text: str) -> bool:
        """False, with a notice naming the character, for text the model and the history
        cannot take (a lone surrogate); the user fixes it, nothing is sent or saved."""
        bad = lone_surrogate(text)
        if bad is not None:
            self.notice.emit(f"Not sent: the message {bad}. Remove or retype that character.")
        return bad is None

    def _valid_n(self, n: int) -> bool:
        if 1 <= n <= MAX_ANSWERS:
            return True
        self.notice.emit(f"Ask for 1 to {MAX_ANSWERS} answers at once (not {n}).")
        return False

    def _same_targets(self, n: int) -> list[ReplyTarget]:
        """`n` answers with the chat's settings; with a seed s, answer i uses seed s + i
        (as the API's `n` does), so each one can be made again alone."""
        seed = self.params.get("seed")
        return [ReplyTarget(self.backend, dict(self.params) | (
            {"seed": choice_seed(seed, i)} if isinstance(seed, int) and i else {}))
            for i in range(n)]

    def _reply_parent(self, index: int | None) -> ChatMessage | None:
        """The message new versions of reply `index` answer."""
        if index is None:
            leaf = self.tree.leaf
            if leaf is None:
                return None
            return self.tree.nodes.get(leaf.parent_id or "") if leaf.role == "assistant" \
                else leaf
        msg = self.messages[index]
        if msg.role != "assistant":
            return msg
        return self.tree.nodes.get(msg.parent_id or "")

    def _add(self, msg: ChatMessage, parent: ChatMessage | None) -> ChatMessage:
        """Add `msg` below `parent` and show it."""
        appended = self.tree.leaf is parent
        self.tree.add(msg, parent)
        self.tree.show(msg.id)
        self.message_added.emit(msg)
        if appended:
            self.added.emit(len(self.messages) - 1)
        else:  # a new version of an earlier message: the path after it changed
            self.reset.emit()
        self.shown_changed.emit()
        return msg

    def _start(self, parent: ChatMessage, targets: list[ReplyTarget]) -> bool:
        return any(isinstance(o, ChatMessage) for o in self._start_each(parent, targets))

    def _start_each(self, parent: ChatMessage,
                    targets: list[ReplyTarget]) -> list[ChatMessage | Refusal]:
        """Start one reply to `parent` per target, the first shown: per target, its reply
        or its Refusal (also a notice). Local replies to the same prompt share its
        prefill (the engine prefills it once)."""
        prompt = self.prompt_messages(parent)
        leader: Generation | None = None
        outcomes: list[ChatMessage | Refusal] = []
        for target in targets:
            tools = self.offered_tools if target.params.get("mcp_servers") else None
            try:
                gen = self.bridge.submit(prompt, target.params, tag=self.tag,
                                         backend=target.backend,
                                         share_prompt_with=leader if target.backend is None
                                         else None, tools=tools or None,
                                         tool_choice=target.params.get("tool_choice", "auto"))
            except Refusal as refusal:  # ui/refusals.py words it
                self.notice.emit(refusal)
                outcomes.append(refusal)
                continue
            if target.backend is None and leader is None:
                leader = gen
            outcomes.append(self._follow(gen, parent, target))
        started = [o for o in outcomes if isinstance(o, ChatMessage)]
        if started and self.tree.leaf is not started[0]:
            self.tree.show(started[0].id)
            self.reset.emit()
            self.shown_changed.emit()
        return outcomes

    def _follow(self, gen: Generation, parent: ChatMessage,
                target: ReplyTarget) -> ChatMessage:
        # Only replies still running, and the newest, keep their Generation (the history
        # finds a reply's stats by it until it has ended): each holds its prompt's ids (the
        # whole chat so far), its text and its tokens, which the messages keep anyway; kept
        # for every turn, a chat's memory grew with the square of its turns.
        self.generations = [g for g in self.generations if not g.is_finished]
        self.generations.append(gen)
        msg = ChatMessage("assistant", "", streaming=True, request_id=gen.request_id,
                          params=dict(target.params), backend=gen.backend,
                          answered_by=gen.answered_by)
        was_busy = self.is_busy
        self.tree.add(msg, parent)
        self.running[msg.id] = gen
        shown_below = self.tree.leaf is parent
        if shown_below:
            self.tree.show(msg.id)
        gen.delta.connect(lambda text: self._on_delta(msg, text))
        gen.finished.connect(lambda g: self._on_finished(msg, g))
        gen.waiting.connect(lambda progress: self._on_waiting(msg, progress))
        self.message_added.emit(msg)
        if shown_below:
            self.added.emit(len(self.messages) - 1)
            self.shown_changed.emit()
        if not was_busy:
            self.busy_changed.emit(True)
        return msg

    def _on_waiting(self, msg: ChatMessage, progress: Any) -> None:
        note = wait_note(progress)
        if note != msg.wait_note:
            msg.wait_note = note
            self.message_waiting.emit(msg)
            index = self.tree.index(msg)
            if index is not None:
                self.waiting.emit(index)

    def _on_delta(self, msg: ChatMessage, text: str) -> None:
        msg.wait_note = ""
        msg.content += text
        self.message_delta.emit(msg, text)
        index = self.tree.index(msg)
        if index is not None:
            self.delta.emit(index, text)

    def _on_finished(self, msg: ChatMessage, gen: Generation) -> None:
        msg.streaming = False
        msg.wait_note = ""
        msg.stats = gen.stats
        msg.finish_reason = gen.finish_reason
        msg.error = gen.error
        msg.token_ids = gen.tokens or None
        self.running.pop(msg.id, None)
        calls = (reply_calls(gen, msg.content)
                 if gen.finish_reason not in ("cancelled", "switched") else None)
        if calls:
            msg.content, msg.tool_calls = calls
            msg.token_ids = None  # the text shown is not all the model wrote
            msg.tool_results = {c["id"]: {"status": "pending", "text": ""}
                                for c in msg.tool_calls}
            self.tool_wait[msg.id] = msg
        self.message_finished.emit(msg)
        index = self.tree.index(msg)
        if index is not None:
            self.reply_finished.emit(index)
        if calls:
            self.tool_calls_found.emit(msg)
        if not self.is_busy:
            self.busy_changed.emit(False)
        if gen.finish_reason == "error" and gen.backend is not None:
            kept = " The partial reply is kept above." if msg.content else ""
            self.notice.emit(f"Server error: {gen.error or 'unknown'}.{kept}")
        elif gen.finish_reason == "error":
            self.notice.emit(f"Engine error: {gen.error or 'unknown'}")
        elif gen.finish_reason == "context":
            self.notice.emit("Context full: the reply was cut. Start a new chat or edit an "
                             "earlier message.")

