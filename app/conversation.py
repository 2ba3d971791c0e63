"""One chat (one tab): its tree of messages, the path shown, its system prompt and settings.

Qt-free. Views subscribe to the events; every change to the messages goes through here.
The messages are a tree (app/message_tree.py): Regenerate and Edit add versions beside the
old ones, several answers at once are versions made in one batch, Compare asks several
targets at once, and a branch is a new chat with a copy of the path up to a message
(app/branch_copy.py copies it). A reply that calls tools waits for their outcomes and then
goes on (app/conversation_tools.py).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.public import lone_surrogate, repair_text

from .attachments import Attachment
from .attachments.framing import FILES_ONLY_QUESTION
from .attachments.messages import ATTACHMENTS, has_attachments
from .branch_copy import branch_title, copy_path
from .bridge import EngineBridge, Generation
from .conversation_tools import ToolTurns
from .events import Event
from .images.parts import has_images, with_images
from .images.refusal import IMAGES_WITH_TOOLS, images_refused
from .message_tree import ChatMessage, MessageTree, Removed
from .reasoning.reply import take_text
from .reply_tools import tool_result_text
from .request import Refusal, RefusalCode
from .request.engine_input import choice_seed
from .request.tab import tab_request
from .titles import title_from_message
from .waiting import load_note, wait_note

__all__ = ["ChatMessage", "Conversation", "FINISH_NOTES", "MAX_ANSWERS", "MessageChange",
           "ReplyTarget"]

log = logging.getLogger(__name__)
_ids = itertools.count(1)
MAX_ANSWERS = 4  # several answers at once: 2 to this many
# said at the input when a send's files take this long to make ready (indexing, embedding)
FILES_NOTE = "Finding the passages of the attached files…"
IMAGES_NOTE = "Preparing the images for the model…"
FILES_NOTE_AFTER_S = 0.5
# what changed in a message: its streamed text, its wait note, or a tool call's outcome
MessageChange = Literal["text", "waiting", "tools"]


@dataclass(frozen=True)
class ReplyTarget:
    """Where one reply comes from: a backend (None: the local engine, else a saved
    connection's name) and the sampling settings; `label` names it in a compare view;
    `model`: a local reply on a library model other than the default one (issue #50)."""

    backend: str | None
    params: dict[str, Any]
    label: str = ""
    model: str | None = None


FINISH_NOTES = {
    "length": "stopped at max tokens",
    "context": "the context is full: start a new chat or shorten this one",
    "cancelled": "stopped",
    "shutdown": "the engine shut down",
    "switched": "stopped by a model switch",
    "interrupted": "incomplete: BatchChat closed before this reply finished",
}


class Conversation:
    """Events about the messages of the tree, shown or not (the tab, the history, the
    sidebar and the compare view all follow these; the tab finds a message's place on the
    path shown with `tree.index`):

    - `message_added(msg)`: a message joined the tree (sent, a reply started, an undo put
      it back);
    - `message_changed(msg, what)`: `what` (a MessageChange) is "text" (streamed text),
      "waiting" (its wait_note) or "tools" (a call's outcome);
    - `message_finished(msg)`: a reply ended, with its stats and finish reason;
    - `messages_removed(list[msg])`: deleted (an undo adds them again with
      `message_added`);
    - `path_changed()`: the path shown (`messages`) changed: a message added at its end,
      a version switched, a delete or an undo.

    And about the chat: `busy_changed(bool)`, `notice(text)` (a sentence, or a Refusal:
    a reply's, or a check's before anything is added, which the window words:
    ui/refusals.py), `meta_changed()` (title, system
    prompt, settings or preset). Tool-call turns have their own two (`tool_turns`)."""

    def __init__(self, bridge: EngineBridge, *, title: str = "", system_prompt: str = "",
                 params: dict[str, Any] | None = None, session_id: str | None = None,
                 messages: list[ChatMessage] | None = None, preset: str | None = None,
                 backend: str | None = None, tree: MessageTree | None = None,
                 default_title: str = "", model: str | None = None) -> None:
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
        # the local engine's model this tab asks (None: the default one); loaded on demand
        self.model = model
        self._loading: asyncio.Task[None] | None = None  # a send waiting for its model
        # answers Send and Regenerate ask for (the tab's ×N), saved with the chat's settings
        self.answers = 1
        self.tree = tree if tree is not None else MessageTree.chain(messages or [])
        self.running: dict[str, Generation] = {}  # reply message id -> its Generation
        self.generations: list[Generation] = []  # the newest replies and any still running
        self._undo: list[Removed] = []
        self.message_added, self.message_changed = Event(), Event()
        self.message_finished, self.messages_removed = Event(), Event()
        self.path_changed = Event()
        self.busy_changed, self.notice, self.meta_changed = Event(), Event(), Event()
        # replies that called tools (app.tool_runner offers the tools and sets outcomes)
        self.tool_turns = ToolTurns(changed=lambda msg: self.message_changed.emit(msg, "tools"),
                                    resume=self._answer_tools)

    @property
    def messages(self) -> list[ChatMessage]:
        """The path shown, first message to last."""
        return self.tree.path

    @property
    def tag(self) -> str:
        return f"tab-{self.id}"

    @property
    def tool_wait(self) -> dict[str, ChatMessage]:
        """Replies whose tool calls await outcomes, by message id (ToolTurns.waiting)."""
        return self.tool_turns.waiting

    @property
    def is_busy(self) -> bool:
        return bool(self.running or self.tool_wait or self._loading is not None)

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
    def send(self, text: str, n: int = 1, attachments: Sequence[Any] = (),
             images: Sequence[Any] = ()) -> bool:
        """Add a user message (with its attached files, app.attachments' Attachments, and
        its images, app.images' ImageData) and start `n` replies (versions, one batch).
        False (with a Refusal as notice) if refused: images for a model that reads text only are
        refused before anything is added. Files without text ask FILES_ONLY_QUESTION."""
        if attachments and not text.strip():  # the message is its files (#51)
            text = FILES_ONLY_QUESTION
        if not self._can_send(text) or not self._valid_n(n) \
                or not self._sees_images(images, self._same_targets(n), self.messages):
            return False
        if not self.tree.nodes and self.title == self.default_title:
            # named after its first message until the user renames it
            self.rename(title_from_message(text) or self.title)
        user = self._add(ChatMessage("user", text, attachments=tuple(attachments),
                                     images=tuple(images)), self.tree.leaf)
        return self._start(user, self._same_targets(n))

    def regenerate(self, n: int = 1, index: int | None = None) -> bool:
        """New versions of reply `index` (default: the last reply, or the replies to a last
        user message): the old ones are kept beside them."""
        if not self.can_regenerate or not self._valid_n(n):
            return False
        parent = self._reply_parent(index)
        if parent is None:
            return False
        targets = self._same_targets(n)
        if not self._sees_images((), targets, [*self.tree.ancestors(parent), parent]):
            return False
        return self._start(parent, targets)

    def edit_and_resend(self, index: int, text: str, n: int = 1) -> bool:
        """A new version of user message `index`, and replies to it; the old message and
        everything after it stay as the other version."""
        if not self._can_send(text) or self.messages[index].role != "user" \
                or not self._valid_n(n):
            return False
        old = self.messages[index]
        if not self._sees_images(old.images, self._same_targets(n), self.messages[:index]):
            return False
        parent = self.tree.nodes.get(old.parent_id or "")
        # the new version asks about the same files and images
        user = self._add(ChatMessage("user", text, attachments=old.attachments,
                                     images=old.images), parent)
        return self._start(user, self._same_targets(n))

    def compare(self, text: str, targets: list[ReplyTarget],
                images: Sequence[Any] = ()) -> list[ChatMessage | Refusal]:
        """Send `text` (and `images`, to every target) once and ask every target at once;
        their replies are versions (the first started is shown). Per target, in order: its
        reply, or its Refusal. [] when nothing was sent (no targets, empty or invalid
        text, a reply running, images for a target that reads text only)."""
        if not targets or not self._can_send(text) \
                or not self._sees_images(images, targets, self.messages):
            return []
        if not self.tree.nodes and self.title == self.default_title:
            self.rename(title_from_message(text) or self.title)
        user = self._add(ChatMessage("user", text, images=tuple(images)), self.tree.leaf)
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
        self.path_changed.emit()

    def delete(self, index: int) -> bool:
        """Delete message `index` and everything after it (in every branch below it); the
        nearest version left is shown. `undo_delete` puts it back."""
        if self.is_busy or not 0 <= index < len(self.messages):
            if self.is_busy:
                self.notice.emit("Stop the reply before deleting messages.")
            return False
        removed = self.tree.remove(self.messages[index])
        self._undo = [*self._undo[-19:], removed]
        self.messages_removed.emit(list(removed.messages))
        self.path_changed.emit()
        return True

    def undo_delete(self) -> bool:
        """Put back the messages deleted last, and the path shown then."""
        if not self._undo:
            return False
        removed = self._undo.pop()
        self.tree.restore(removed)
        for msg in removed.messages:
            self.message_added.emit(msg)
        self.path_changed.emit()
        return True

    def branch(self, index: int) -> Conversation:
        """A new chat with a copy of the path up to message `index` (same settings, same
        token ids, so the engine serves its prompt from the cached prefix)."""
        return Conversation(self.bridge, title=branch_title(self.title),
                            system_prompt=self.system_prompt, params=dict(self.params),
                            preset=self.preset, backend=self.backend, model=self.model,
                            messages=copy_path(self.messages[:index + 1]))

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

    def set_model(self, model: str | None) -> None:
        """The local model the next reply comes from (None: the default one; it loads at
        the next send); the tab's replies running on another model finish there."""
        if model != self.model:
            self.model = model
            self.meta_changed.emit()

    def stop(self) -> None:
        if self._loading is not None:  # a send waiting for its model: given up (the load
            self._loading.cancel()  # itself goes on: the model manager's, for everyone)
        for gen in list(self.running.values()):
            gen.cancel()
        # calls not answered yet: refused, and no reply follows
        if self.tool_turns.stop() and not self.is_busy:
            self.busy_changed.emit(False)

    def _answer_tools(self, msg: ChatMessage) -> None:
        """Every call of reply `msg` has its outcome: the next reply answers them, where
        `msg` came from and with its settings (the model may call tools again)."""
        params = dict(msg.params or self.params) | {"tool_choice": "auto"}
        if not self._start(msg, [ReplyTarget(msg.backend, params, model=msg.model)]) \
                and not self.is_busy:
            self.busy_changed.emit(False)

    def close(self) -> None:
        """The tab is closing: cancel the replies and stop listening to them."""
        loading, self._loading = self._loading, None
        if loading is not None:
            loading.cancel()
        running, self.running = list(self.running.values()), {}
        for gen in running:
            gen.detach()
            gen.cancel()

    def next_prompt(self, text: str, editing: int | None = None,
                    attachments: Sequence[Any] = (), images: Sequence[Any] = ()
                    ) -> list[dict[str, Any]]:
        """The messages that sending `text` would submit (as a new version of shown message
        `editing`, when given): the system prompt, the path before it, then `text`. Tools
        an MCP server offers are not in it (they are listed only when sending)."""
        if editing is None:
            before = self.prompt_messages()
        else:
            parent = self.tree.nodes.get(self.messages[editing].parent_id or "")
            before = self.prompt_messages(parent) if parent is not None \
                else self.prompt_messages(path=[])
        if editing is not None and not attachments:
            attachments = self.messages[editing].attachments
        if editing is not None and not images:
            images = self.messages[editing].images
        return [*before, {"role": "user", "content": with_images(text, tuple(images))}
                | _files(attachments)]

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
                            "tool_calls": m.tool_calls}
                           | ({"reasoning_content": m.reasoning} if m.reasoning else {}))
                out.extend({"role": "tool", "tool_call_id": c["id"],
                            "name": c["function"]["name"],
                            "content": tool_result_text(m.tool_results.get(c["id"]))}
                           for c in m.tool_calls)
            elif m.content or m.role == "user":
                # a user message's images: its text part, then image_url parts
                out.append({"role": m.role, "content": with_images(m.content, m.images)}
                           | ({"token_ids": m.token_ids} if m.token_ids else {})
                           | _files(m.attachments)  # made text on the request road
                           # earlier thinking: the template keeps or drops it
                           | ({"reasoning_content": m.reasoning} if m.reasoning else {}))
        return out

    # -- internals ----------------------------------------------------------------------
    def _can_send(self, text: str) -> bool:
        if self.backend is None and self.bridge.refusing and text.strip():
            # a model switch waits: nothing is added
            self.notice.emit(Refusal(RefusalCode.MODEL_NOT_READY, self.bridge.refusing))
            return False
        return not self.is_busy and bool(text.strip()) and self._valid_text(text)

    def _valid_text(self, text: str) -> bool:
        """False, with a Refusal naming the character, for text the model and the history
        cannot take (a lone surrogate); the user fixes it, nothing is sent or saved."""
        bad = lone_surrogate(text)
        if bad is not None:
            self.notice.emit(Refusal(RefusalCode.BAD_CHARACTER, f"the message {bad}",
                                     param="content"))
        return bad is None

    def image_refusal(self, images: Sequence[Any], targets: list[ReplyTarget],
                      before: Sequence[ChatMessage] = ()) -> Refusal | None:
        """Why `images` (or the images of the messages `before` them, which go in the
        prompt too) cannot go to `targets` (one's model reads text only: param "images" for
        these, "messages" for earlier ones; or a local one is offered the chat's tools), or
        None."""
        earlier = any(m.images for m in before)
        if not images and not earlier:
            return None
        for target in targets:
            try:
                route = self.bridge.route(target.backend, target.model)
            except Refusal:
                continue  # not ready, or loaded first: said when it is started
            if not route.backend.sees_images:
                return Refusal(RefusalCode.IMAGES_NOT_READ,
                               images_refused(route.backend.description, sent=bool(images),
                                              lead=""),
                               param="images" if images else "messages")
            if route.local and target.params.get("mcp_servers"):
                return Refusal(RefusalCode.IMAGES_WITH_TOOLS, IMAGES_WITH_TOOLS,
                               param="tools")
        return None

    def _sees_images(self, images: Sequence[Any], targets: list[ReplyTarget],
                     before: Sequence[ChatMessage] = ()) -> bool:
        """False, with a Refusal at the input, when `images` (or those of the messages
        `before` them) go to a target whose model reads text only (nothing is added: the
        draft and its images stay)."""
        refusal = self.image_refusal(images, targets, before)
        if refusal is not None:
            self.notice.emit(refusal)
        return refusal is None

    def _valid_n(self, n: int) -> bool:
        if 1 <= n <= MAX_ANSWERS:
            return True
        self.notice.emit(Refusal(RefusalCode.ANSWER_COUNT,
                                 f"n must be 1 to {MAX_ANSWERS}, not {n}", param="n",
                                 detail={"n": n, "most": MAX_ANSWERS}))
        return False

    def _same_targets(self, n: int) -> list[ReplyTarget]:
        """`n` answers with the chat's settings; with a seed s, answer i uses seed s + i
        (as the API's `n` does), so each one can be made again alone."""
        seed = self.params.get("seed")
        model = self.model if self.backend is None else None
        return [ReplyTarget(self.backend, dict(self.params) | (
            {"seed": choice_seed(seed, i)} if isinstance(seed, int) and i else {}),
            model=model) for i in range(n)]

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
        self.tree.add(msg, parent)
        self.tree.show(msg.id)
        self.message_added.emit(msg)
        self.path_changed.emit()  # appended, or a new version of an earlier message
        return msg

    def _start(self, parent: ChatMessage, targets: list[ReplyTarget],
               files_ready: bool = False) -> bool:
        if self._load_first(parent, targets):
            return True
        if not files_ready and self._fit_files_first(parent, targets):
            return True
        return any(isinstance(o, ChatMessage) for o in self._start_each(parent, targets))

    def _fit_files_first(self, parent: ChatMessage, targets: list[ReplyTarget]) -> bool:
        """The prompt has attached files or images and a local model answers: the files'
        indexes and the question's vector (an embedding model takes seconds), and the
        images' processing (decoding, resizing: #52), are made off the UI thread first,
        then the replies start; the chat is busy meanwhile. False otherwise."""
        prompt = self.prompt_messages(parent)
        if not (has_attachments(prompt) or has_images(prompt)) \
                or all(t.backend is not None for t in targets):
            return False
        was_busy = self.is_busy
        self._loading = asyncio.ensure_future(self._start_after_files(parent, targets, prompt))
        if not was_busy:
            self.busy_changed.emit(True)
        return True

    async def _start_after_files(self, parent: ChatMessage, targets: list[ReplyTarget],
                                 prompt: list[dict[str, Any]]) -> None:
        me = asyncio.current_task()
        noted: list[bool] = []

        def note() -> None:  # only a slow one is said: most take milliseconds
            noted.append(True)
            self.notice.emit(FILES_NOTE if has_attachments(prompt) else IMAGES_NOTE)

        slow = asyncio.get_running_loop().call_later(FILES_NOTE_AFTER_S, note)
        try:
            for model in dict.fromkeys(t.model for t in targets if t.backend is None):
                target = next(t for t in targets if t.backend is None and t.model == model)
                tools = self.tool_turns.offered if target.params.get("mcp_servers") else None
                try:
                    route = self.bridge.route(None, model)
                    request = tab_request(prompt, target.params, tools or None,
                                          target.params.get("tool_choice", "auto"),
                                          local=True)
                    await self.bridge.fit_files(request, route)
                except Refusal:
                    continue  # the send itself refuses it, and says why
                except Exception:  # noqa: BLE001 - the send meets it again and says so
                    log.exception("preparing the attached files for %s failed", self.tag)
        except asyncio.CancelledError:  # Stop, or the tab closed
            slow.cancel()
            if self._loading is me:
                self._loading = None
                if noted:
                    self.notice.emit("")
                if not self.is_busy:
                    self.busy_changed.emit(False)
            raise
        slow.cancel()
        if self._loading is not me:
            return
        self._loading = None
        if noted:
            self.notice.emit("")
        if not self._start(parent, targets, files_ready=True) and not self.is_busy:
            self.busy_changed.emit(False)

    def _load_first(self, parent: ChatMessage, targets: list[ReplyTarget]) -> bool:
        """A target's model is not loaded: load it (other tabs keep streaming), then start
        the replies; the chat is busy meanwhile. False when every model is loaded."""
        models = list(dict.fromkeys(t.model for t in targets if t.backend is None
                                    and t.model is not None and self.bridge.needs_load(t.model)))
        if not models:
            return False
        was_busy = self.is_busy
        self._loading = asyncio.ensure_future(self._start_after_load(parent, targets, models))
        self.notice.emit(load_note(", ".join(models)))
        if not was_busy:
            self.busy_changed.emit(True)
        return True

    async def _start_after_load(self, parent: ChatMessage, targets: list[ReplyTarget],
                                models: list[str]) -> None:
        me = asyncio.current_task()
        try:
            for model in models:
                try:
                    await self.bridge.load_model(
                        model, lambda share, m=model: self.notice.emit(load_note(m, share)))
                except Exception as exc:  # noqa: BLE001 - UnknownModel, NoRoom, a bad file
                    log.warning("loading %s for %s failed: %s", model, self.tag, exc)
                    self._loading = None
                    self.notice.emit(f"Could not load {model}: {exc}")
                    if not self.is_busy:
                        self.busy_changed.emit(False)
                    return
        except asyncio.CancelledError:  # Stop (close() lets go of it first: no events)
            if self._loading is me:
                self._loading = None
                self.notice.emit("")
                if not self.is_busy:
                    self.busy_changed.emit(False)
            raise
        self._loading = None
        self.notice.emit("")
        if not self._start(parent, targets) and not self.is_busy:
            self.busy_changed.emit(False)

    def _start_each(self, parent: ChatMessage,
                    targets: list[ReplyTarget]) -> list[ChatMessage | Refusal]:
        """Start one reply to `parent` per target, the first shown: per target, its reply
        or its Refusal (also a notice). Local replies to the same prompt on the same model
        share its prefill (that model's engine prefills it once and batches them)."""
        prompt = self.prompt_messages(parent)
        leaders: dict[str | None, Generation] = {}  # by model: each model's engine its own
        outcomes: list[ChatMessage | Refusal] = []
        for target in targets:
            tools = self.tool_turns.offered if target.params.get("mcp_servers") else None
            try:
                # who answers first: "no model is ready" is said before a bad format
                route = self.bridge.route(target.backend, target.model)
                if not route.backend.sees_images and has_images(prompt):
                    # the chat holds images (sent to another model, or a switch since)
                    raise Refusal(RefusalCode.INVALID_VALUE,
                                  images_refused(route.backend.description, sent=False,
                                                 lead=""))
                # a remote server gets the format and the tools as given (`local`)
                request = tab_request(prompt, target.params, tools or None,
                                      target.params.get("tool_choice", "auto"),
                                      local=route.local)
                gen = self.bridge.submit(
                    request, route, tag=self.tag,
                    share_prompt_with=leaders.get(route.model) if route.local else None)
            except Refusal as refusal:  # ui/refusals.py words it
                self.notice.emit(refusal)
                outcomes.append(refusal)
                continue
            if route.local:
                leaders.setdefault(route.model, gen)
            outcomes.append(self._follow(gen, parent, target))
        started = [o for o in outcomes if isinstance(o, ChatMessage)]
        if started and self.tree.leaf is not started[0]:
            self.tree.show(started[0].id)
            self.path_changed.emit()
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
                          answered_by=gen.answered_by, model=gen.model)
        was_busy = self.is_busy
        self.tree.add(msg, parent)
        self.running[msg.id] = gen
        shown_below = self.tree.leaf is parent
        if shown_below:
            self.tree.show(msg.id)
        gen.delta.connect(lambda _text: self._on_delta(msg, gen))
        gen.finished.connect(lambda g: self._on_finished(msg, g))
        gen.waiting.connect(lambda progress: self._on_waiting(msg, progress))
        self.message_added.emit(msg)
        if shown_below:
            self.path_changed.emit()
        if not was_busy:
            self.busy_changed.emit(True)
        return msg

    def _on_waiting(self, msg: ChatMessage, progress: Any) -> None:
        note = wait_note(progress)
        if note != msg.wait_note:
            msg.wait_note = note
            self.message_changed.emit(msg, "waiting")

    def _on_delta(self, msg: ChatMessage, gen: Generation) -> None:
        msg.wait_note = ""
        take_text(msg, gen)  # the stream's text; a reasoning model's split from its thinking
        self.message_changed.emit(msg, "text")

    def _on_finished(self, msg: ChatMessage, gen: Generation) -> None:
        msg.streaming = False
        msg.wait_note = ""
        take_text(msg, gen, final=True)  # the message keeps it from now on
        msg.stats = gen.stats
        msg.finish_reason = gen.finish_reason
        msg.error = gen.error
        msg.token_ids = gen.tokens or None
        msg.citations = tuple(gen.citations)
        self.running.pop(msg.id, None)
        calls = self.tool_turns.take_calls(msg, gen)
        self.message_finished.emit(msg)
        if calls:
            self.tool_turns.calls_found.emit(msg)
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


def _files(attachments: Sequence[Any]) -> dict[str, Any]:
    """A message's files as the request road takes them (app/request/attachments.py); a
    file the history did not keep (a Refused) is left out."""
    files = tuple(a for a in attachments if isinstance(a, Attachment))
    return {ATTACHMENTS: files} if files else {}
