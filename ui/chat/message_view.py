"""The conversation view: one MessageWidget per message in a scroll area that follows the
newest text while the user is at the bottom. A message with versions shows `‹ 2/3 ›` in its
header; each message has its actions (edit or copy, and a "⋯" menu: regenerate, branch,
delete from here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.conversation import FINISH_NOTES, ChatMessage
from app.reasoning.reply import thinking_live

from ..mcp.tool_block import ToolCallBlock
from .image_views import MessageImages
from .menu_button import MenuButton
from .message_files import FilesLine, Sources
from .render_throttle import RenderThrottle
from .reply_body import ReplyBody
from .thinking_block import ThinkingBlock

COPY_LABEL = "Copy"
CONFIRM_MS = 1500
# a message's parts above its body, made when first wanted (MessageWidget._part), in order
ABOVE_BODY = ("files", "images", "thinking")
EDIT_TIP = "Edit — the old message and its replies stay as another version"
# the "⋯" menu: (action name, text) per role; the tab acts on the name
ACTIONS = {
    "assistant": (("regenerate", "Regenerate this reply"), ("branch", "Branch from here"),
                  ("delete", "Delete from here")),
    "user": (("branch", "Branch from here"), ("delete", "Delete from here")),
}
ACTION_TIPS = {
    "regenerate": "A new version of this reply; this one is kept beside it",
    "branch": "A new tab with the chat up to here (it reuses the cached prompt)",
    "delete": "Delete this message and everything after it (Undo brings it back)",
}


def strip_copy_links(text: str, body: ReplyBody) -> str:
    """The rendered text without the "Copy code" lines the view adds above code blocks."""
    labels = {f"{c.language} · Copy code" if c.language else "Copy code"
              for c in body.code_blocks}
    return "\n".join(line for line in text.split("\n") if line not in labels)


def stats_text(msg: ChatMessage) -> str:
    if msg.streaming:
        return "generating …"
    if msg.stats is None:
        if msg.finish_reason == "interrupted":  # restored from the history, never finished
            return FINISH_NOTES["interrupted"]
        return msg.finish_reason or ""
    text = msg.stats.summary()
    if msg.reasoning_tokens:  # a reasoning model's thinking, counted apart
        text += f" · {msg.reasoning_tokens} thinking"
    if msg.backend is not None and msg.answered_by:  # measured on this side of the network
        text += f" · from {msg.answered_by}"
    elif msg.model is not None:  # a library model beside the default one (issue #50)
        text += f" · {msg.model}"
    note = FINISH_NOTES.get(msg.finish_reason or "")
    if msg.finish_reason == "error":
        note = f"error: {msg.error or 'unknown'}"
        if msg.content:
            note = f"partial reply, {note}"
    return f"{text}  —  {note}" if note else text


def version_tip(k: int, n: int) -> str:
    return f"Version {k} of {n} — switch between the versions"


class VersionSwitch(QWidget):
    """`‹ 2/3 ›`: the version shown of a message and the arrows to the others (hidden while
    there is only one). `stepped(step)`: -1 the one before, 1 the one after."""

    stepped = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("versionSwitch")
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 0, 0, 0)
        row.setSpacing(0)
        self.prev_button = QPushButton("‹")
        self.label = QLabel()
        self.label.setObjectName("versionLabel")
        self.next_button = QPushButton("›")
        for button, step in ((self.prev_button, -1), (self.next_button, 1)):
            button.setObjectName("versionButton")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _=False, s=step: self.stepped.emit(s))
        self.prev_button.setAccessibleName("Previous version")
        self.next_button.setAccessibleName("Next version")
        row.addWidget(self.prev_button)
        row.addWidget(self.label)
        row.addWidget(self.next_button)
        self.set_version(1, 1)

    def set_version(self, k: int, n: int) -> None:
        self.label.setText(f"{k}/{n}")
        self.prev_button.setEnabled(k > 1)
        self.next_button.setEnabled(k < n)
        self.setToolTip(version_tip(k, n))
        self.setVisible(n > 1)


class MessageWidget(QFrame):
    """Role header, Markdown body, and (for replies) a stats line. Renders only when visible:
    text that streams into a hidden tab is drawn once, when the tab is shown. While a reply
    streams, its renders are throttled (render_throttle.py: at most 30 a second, fewer when
    a render is costly); its last text and its end render at once."""

    edit_requested = Signal(int)
    action_requested = Signal(str, int)  # ("regenerate" | "branch" | "delete", index)
    version_stepped = Signal(int, int)  # (index, step)
    tool_decided = Signal(object, str, bool, bool)  # (message, call id, allow, always)

    def __init__(self, index: int, message: ChatMessage, version: tuple[int, int] = (1, 1),
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.index = index
        self.message = message
        self._confirm_timer: QTimer | None = None
        self.setObjectName("userMessage" if message.role == "user" else "assistantMessage")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(4)
        self._header = header = QHBoxLayout()
        role = QLabel("You" if message.role == "user" else "Assistant")
        role.setObjectName("roleLabel")
        header.addWidget(role)
        # Parts most messages never show are made when first wanted (`_part`): a message
        # with all of them took ~460 KiB, and a long session's window keeps hundreds
        # (issue #46 item 14, docs/memory.md).
        self._parts: dict[str, QWidget] = {}
        self.set_version(*version)
        header.addStretch(1)
        if message.role == "user":
            self.edit_button = QPushButton("Edit")
            self.edit_button.setObjectName("flatButton")
            self.edit_button.setToolTip(EDIT_TIP)
            self.edit_button.clicked.connect(lambda: self.edit_requested.emit(self.index))
            header.addWidget(self.edit_button)
        else:
            self.copy_button = copy = MenuButton(COPY_LABEL, self._copy_menu)
            copy.setObjectName("flatButton")
            copy.setToolTip("Copy this reply as plain text or as Markdown")
            header.addWidget(copy)
        header.addWidget(self._more_button(message.role))
        layout.addLayout(header)
        self.body = ReplyBody(self)  # prose wraps; each code block scrolls sideways
        self.body.copied.connect(lambda what: self._confirm(f"{what} copied ✓"))
        layout.addWidget(self.body)
        self.tool_blocks: dict[str, ToolCallBlock] = {}  # a reply's calls, by call id
        self._tools_layout = QVBoxLayout()
        self._tools_layout.setSpacing(4)
        layout.addLayout(self._tools_layout)
        self.stats = QLabel()
        self.stats.setObjectName("statsLabel")
        self.stats.setVisible(message.role == "assistant")
        self.stats.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Wraps: unwrapped, a long line ("85 of 110 prompt tokens cached") sets the whole
        # chat's minimum width, and a narrow tab (stats dock open) cuts every message off.
        self.stats.setWordWrap(True)
        layout.addWidget(self.stats)
        self._dirty = True
        self.throttle = RenderThrottle(self._render_if_dirty, self)
        self.refresh()

    @property
    def versions(self) -> VersionSwitch:
        """`‹ 2/3 ›` in the header, made when the message has a second version."""
        return cast(VersionSwitch, self._part("versions", self._version_switch))

    def _version_switch(self, parent: QWidget) -> VersionSwitch:
        switch = VersionSwitch(parent)
        switch.stepped.connect(lambda step: self.version_stepped.emit(self.index, step))
        return switch

    @property
    def files(self) -> FilesLine:
        """A user message's attached files."""
        return cast(FilesLine, self._part("files", FilesLine))

    @property
    def images(self) -> MessageImages:
        """Its images: thumbnails, a click opens one."""
        return cast(MessageImages, self._part("images", MessageImages))

    @property
    def thinking(self) -> ThinkingBlock:
        """A reasoning model's thinking, folded above the answer."""
        return cast(ThinkingBlock, self._part("thinking", ThinkingBlock))

    @property
    def sources(self) -> Sources:
        """The passages of files a reply was given, under it."""
        return cast(Sources, self._part("sources", Sources))

    def _part(self, name: str, make: Callable[[QWidget], QWidget]) -> QWidget:
        """The part `name`, made and put in its place the first time it is wanted: the
        version switch after the role, files, images and thinking above the body in that
        order, sources last."""
        part = self._parts.get(name)
        if part is None:
            part = self._parts[name] = make(self)
            layout = self.layout()
            if name == "versions":
                self._header.insertWidget(1, part)
            elif name in ABOVE_BODY:
                later = [self._parts[n] for n in ABOVE_BODY[ABOVE_BODY.index(name) + 1:]
                         if n in self._parts]
                layout.insertWidget(layout.indexOf((later or [self.body])[0]), part)
            else:
                layout.addWidget(part)
        return part

    def set_version(self, k: int, n: int) -> None:
        """Version `k` of `n` shown: the switch appears once there is a second one."""
        if n > 1 or "versions" in self._parts:
            self.versions.set_version(k, n)

    def _more_button(self, role: str) -> QPushButton:
        """"⋯": what can be done from this message on (a menu, as Copy's)."""
        self.more_button = more = MenuButton("⋯", self._more_menu)
        more.setObjectName("flatButton")
        more.setToolTip("Regenerate, branch or delete from here" if role == "assistant"
                        else "Branch or delete from here")
        return more

    # The menus are made when first opened (ui/chat/menu_button.py); what reads their
    # actions makes them too.
    @property
    def actions_by_name(self) -> dict[str, QAction]:
        """The "⋯" menu's actions by name ("regenerate", "branch", "delete")."""
        menu = self.more_button.ensure_menu()
        return {a.objectName(): a for a in menu.actions() if a.objectName()}

    @property
    def copy_plain_action(self) -> QAction:
        return self.copy_button.ensure_menu().actions()[0]

    @property
    def copy_markdown_action(self) -> QAction:
        return self.copy_button.ensure_menu().actions()[1]

    def _more_menu(self, button: QPushButton) -> QMenu:
        menu = QMenu(button)
        menu.setToolTipsVisible(True)
        for name, text in ACTIONS[self.message.role]:
            if name == "delete":
                menu.addSeparator()
            action = menu.addAction(text, lambda n=name: self.action_requested.emit(
                n, self.index))
            action.setObjectName(name)
            action.setToolTip(ACTION_TIPS[name])
        return menu

    def _copy_menu(self, button: QPushButton) -> QMenu:
        menu = QMenu(button)
        menu.addAction("Copy as plain text", lambda: self.copy_reply(markdown=False))
        menu.addAction("Copy as Markdown", lambda: self.copy_reply(markdown=True))
        return menu

    def copy_reply(self, markdown: bool) -> str:
        """The whole reply to the clipboard: its Markdown source, or the text as shown."""
        self._render()
        text = self.message.content if markdown else self.body.toPlainText()
        text = strip_copy_links(text, self.body) if not markdown else text
        QGuiApplication.clipboard().setText(text)
        self._confirm("Markdown copied ✓" if markdown else "Text copied ✓")
        return text

    def _confirm(self, text: str) -> None:
        """A brief confirmation in place of the Copy button's label."""
        button = getattr(self, "copy_button", None)
        if button is None:
            return
        button.setText(text)
        if self._confirm_timer is None:  # owned by the widget: it dies with it
            self._confirm_timer = QTimer(self)
            self._confirm_timer.setSingleShot(True)
            self._confirm_timer.timeout.connect(lambda: button.setText(COPY_LABEL))
        self._confirm_timer.start(CONFIRM_MS)  # a second copy restarts the wait

    def refresh(self) -> None:
        """Show the message's current state (deferred while hidden)."""
        self._dirty = True
        if self.isVisible() or not self.body.source_text:
            if self.message.streaming and (self.message.content or self.message.reasoning):
                self.throttle.request()
            else:  # the first text, a wait note, the finished reply: no waiting
                self.throttle.render_now()

    def _render_if_dirty(self) -> None:
        if self._dirty:
            self._render()

    def _render(self) -> None:
        self._dirty = False
        msg = self.message
        live = thinking_live(msg)
        if msg.reasoning or live or "thinking" in self._parts:
            self.thinking.show_thinking(msg.reasoning, live=live, seconds=msg.thinking_s,
                                        tokens=msg.reasoning_tokens)
        # a reply that only called tools: its blocks, no empty text above them; one that
        # is thinking: its block, no empty answer under it
        self.body.setVisible((bool(msg.content) or msg.streaming or not msg.tool_calls)
                             and not live)
        if msg.content or not msg.streaming:
            self.body.set_markdown(msg.content)
        else:  # never a silent wait: where the request stands until its first token
            self.body.set_markdown(f"*{msg.wait_note}*" if msg.wait_note else "…")
        self._render_tools()
        if msg.attachments or "files" in self._parts:
            self.files.show_files(msg.attachments)
        if msg.images or "images" in self._parts:
            self.images.show_images(msg.images)
        if msg.citations or "sources" in self._parts:
            self.sources.show_citations(msg.citations)
        text = stats_text(msg)
        if text != self.stats.text():
            self.stats.setText(text)
        # re-styled only when the look changes: a polish is a style-sheet match (~0.3 ms)
        failed = "true" if msg.finish_reason in ("error", "context") else "false"
        if self.stats.property("failed") != failed:
            self.stats.setProperty("failed", failed)
            self.stats.style().unpolish(self.stats)
            self.stats.style().polish(self.stats)

    def _render_tools(self) -> None:
        msg = self.message
        for call in msg.tool_calls or []:
            block = self.tool_blocks.get(call["id"])
            if block is None:
                block = self.tool_blocks[call["id"]] = ToolCallBlock(call)
                block.decided.connect(
                    lambda cid, allow, always: self.tool_decided.emit(msg, cid, allow, always))
                self._tools_layout.addWidget(block)
            block.update_outcome(msg.tool_results.get(call["id"]))

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self._dirty:
            self.throttle.render_now()


class MessageList(QScrollArea):
    edit_requested = Signal(int)
    action_requested = Signal(str, int)
    version_stepped = Signal(int, int)
    tool_decided = Signal(object, str, bool, bool)  # (message, call id, allow, always)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageList")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        inner = QWidget()
        inner.setObjectName("messageListInner")
        self._layout = QVBoxLayout(inner)
        self._layout.setContentsMargins(16, 12, 16, 12)
        self._layout.setSpacing(10)
        self.placeholder = QLabel("Start the conversation below.")
        self.placeholder.setObjectName("placeholder")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._layout.addWidget(self.placeholder)
        self._layout.addStretch(1)
        self.setWidget(inner)
        self.widgets: list[MessageWidget] = []
        self._stick = True
        self._hold: int | None = None  # where to stay while a rebuilt path lays out
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.actionTriggered.connect(self._let_go)
        bar.rangeChanged.connect(self._on_range)

    def set_messages(self, messages: list[ChatMessage],
                     versions: list[tuple[int, int]] | None = None,
                     hold: bool = False) -> None:
        """Show this path (`versions`: each message's (version, count)). `hold`: a version
        switched, so the messages above it are the same: the view stays where it is (the
        arrows clicked stay under the pointer); else it follows the newest text."""
        value = self.verticalScrollBar().value()
        for w in self.widgets:
            w.setParent(None)
            w.deleteLater()
        self.widgets.clear()
        for i in range(len(messages)):
            self.add(i, messages[i], versions[i] if versions else (1, 1))
        if hold and messages:
            self._stick, self._hold = False, value
            # room below: a shorter version must not pull the view (and the arrows) down
            # to the chat's new end; the room goes with the next message or rebuild
            self.widget().setMinimumHeight(value + self.viewport().height())
        self.placeholder.setVisible(not messages)

    def add(self, index: int, message: ChatMessage, version: tuple[int, int] = (1, 1)) -> None:
        widget = MessageWidget(index, message, version)
        widget.edit_requested.connect(self.edit_requested)
        widget.action_requested.connect(self.action_requested)
        widget.version_stepped.connect(self.version_stepped)
        widget.tool_decided.connect(self.tool_decided)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self.widgets.append(widget)
        self.placeholder.hide()
        self._stick = True
        self._hold = None
        self.widget().setMinimumHeight(0)  # no room kept from a version switch

    def refresh(self, index: int) -> None:
        if 0 <= index < len(self.widgets):
            self.widgets[index].refresh()

    def set_version(self, index: int, version: tuple[int, int]) -> None:
        """Message `index` has another version now (one more answer started)."""
        if 0 <= index < len(self.widgets):
            self.widgets[index].set_version(*version)

    def _on_scrolled(self, value: int) -> None:
        if self._hold is None:  # a rebuild's passing layouts do not make the view follow
            self._stick = value >= self.verticalScrollBar().maximum() - 24

    def _let_go(self, _action: int) -> None:
        self._hold = None  # the user scrolls: no more holding the old place

    def _on_range(self, _lo: int, hi: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(hi)
        elif self._hold is not None:
            self.verticalScrollBar().setValue(min(self._hold, hi))
