"""One chat tab: the view of one Conversation (messages, input, settings).

The tab shows one path through the chat's tree: versions switch with `‹ ›`, each message's
"⋯" menu regenerates, branches (a new tab, opened by the window's workspace) or deletes
from there (with an undo bar), and the ×N button asks for several answers at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QScrollArea,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.bridge import check_params
from app.context import AppContext
from app.conversation import MAX_ANSWERS, ChatMessage, Conversation
from app.mcp import McpError
from app.request import Refusal
from app.tool_runner import ToolRunner

from ..connections_dialog import open_connections
from ..refusals import notice_text
from .attachment_chips import AttachmentChips
from .backend_picker import BackendPicker
from .image_chips import ImageChips, is_image_path
from .input_box import InputBox
from .message_view import MessageList
from .paperclip import paperclip_icon
from .settings_panel import SettingsPanel
from .token_count import TokenCount

CHAT_MIN_WIDTH = 480  # messages and input stay usable whatever is docked beside them
UNDO_MS = 10_000  # how long "Deleted 3 messages. Undo" stays
REGENERATE_TIP = ("A new version of the last reply; the old one is kept, ‹ › switches "
                  "between them (Ctrl+R)")
# said when Send or Regenerate meets a reply still running; gone once none runs
STILL_GENERATING = "Still generating: press Esc to stop it first."
STILL_READING = "Not sent yet: the attached files are still being read."
ATTACH_TIP = ("Attach files to the message: text, Markdown, code, CSV, JSON, HTML, PDF, DOCX, "
              "and images for a model that sees them: PNG, JPEG, WebP, GIF, HEIC (or drop "
              "files and folders on the message box, or paste them; Ctrl+V pastes a copied "
              "image). Files go in whole when they fit the context, else the passages most "
              "relevant to the message.")
FILE_FILTER = ("Documents, text and images (*.txt *.md *.markdown *.pdf *.docx *.html *.htm "
               "*.csv *.tsv *.json *.py *.js *.ts *.c *.h *.cpp *.rs *.go *.java *.sh *.yaml "
               "*.yml *.toml *.xml *.sql *.png *.jpg *.jpeg *.webp *.gif *.heic *.heif);;"
               "Images (*.png *.jpg *.jpeg *.webp *.gif *.heic *.heif *.bmp *.tif *.tiff);;"
               "All files (*)")
STILL_READING_IMAGES = "Not sent yet: the images are still being read."
EDIT_IMAGES = ("An edited message keeps its own images: remove the new ones, or send them "
               "as a new message.")
EDIT_NOTE = ("Editing a message: Enter sends it as a new version (the old message and its "
             "replies stay as another version), Esc cancels.")


def answers_tip(n: int) -> str:
    return (f"Answers to ask for at once: {n}. Send and Regenerate ask for this many, "
            "generated together and shown as versions (‹ 1/3 ›)")


class ChatTab(QWidget):
    """`branch_requested(index)`: open a new tab with the chat up to message `index` (the
    window's workspace does, so the history and the tab order follow it); `meta_changed()`:
    the chat's title or settings changed (the tab bar's title and tooltip follow).

    It follows its Conversation's message events with bound methods, which the events hold
    weakly (app/events.py): a tab that goes away stops being called without detaching. Its
    index view (which messages it shows, in order) is derived from the tree on each
    `path_changed`."""

    busy_changed = Signal(bool)
    branch_requested = Signal(int)
    meta_changed = Signal()

    def __init__(self, ctx: AppContext, title: str = "", parent: QWidget | None = None,
                 conversation: Conversation | None = None) -> None:
        """A new chat, or a view of `conversation` (one restored from the history)."""
        super().__init__(parent)
        self.ctx = ctx
        self.conversation = conv = conversation or Conversation(
            ctx.bridge, title=title, system_prompt=ctx.settings.defaults.system_prompt,
            params=ctx.settings.new_tab_params())
        self.editing_index: int | None = None
        self.answers = conv.answers  # replies per Send / Regenerate (the ×N button)
        self._switching = False  # a version switch is being shown
        # False while an open dock needs the room in a narrow window (ui/dock_room.py): the
        # panel is hidden, its button unticked; `room_wanted()` when the user asks for it
        self.panel_room = True
        self.room_wanted: Callable[[], object] = lambda: None
        self._build()
        if conversation is None:
            conv.preset = self.panel.preset_name()
        conv.path_changed.connect(self._on_path_changed)
        conv.message_added.connect(self._on_message_added)
        conv.messages_removed.connect(self._on_removed)
        conv.message_changed.connect(self._on_message_changed)
        conv.message_finished.connect(self._on_message_finished)
        conv.busy_changed.connect(self._on_busy)
        conv.notice.connect(self.show_notice)
        conv.meta_changed.connect(self._on_meta_changed)
        # MCP tools: calls shown as blocks in their reply, run once the user allows them
        self.tools = ToolRunner(conv, ctx.mcp)
        self.tool_prep: asyncio.Future[bool] | None = None  # listing tools before a send
        self.messages.tool_decided.connect(self._tool_decided)
        if conv.messages:
            self._show_path()
        self._on_busy(False)

    def _build(self) -> None:
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.setChildrenCollapsible(False)
        left = QWidget()
        left.setObjectName("chatColumn")
        left.setMinimumWidth(CHAT_MIN_WIDTH)  # docks and the settings panel give way first
        col = QVBoxLayout(left)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addWidget(self._backend_row())
        self.messages = MessageList()
        self.messages.edit_requested.connect(self.start_edit)
        self.messages.action_requested.connect(self._message_action)
        self.messages.version_stepped.connect(self._version_stepped)
        col.addWidget(self.messages, 1)
        col.addWidget(self._undo_bar())

        self.notice = QLabel()
        self.notice.setObjectName("notice")
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice.hide()
        col.addWidget(self.notice)
        self.edit_banner = QLabel()
        self.edit_banner.setObjectName("editBanner")
        self.edit_banner.hide()
        col.addWidget(self.edit_banner)

        bottom = QWidget()
        bottom.setObjectName("inputArea")
        row = QHBoxLayout(bottom)
        row.setContentsMargins(12, 8, 12, 10)
        self.input = InputBox()
        self.input.submitted.connect(self._submitted)
        self.input.escape_pressed.connect(self.on_escape)
        # the draft's files (#51): chips above the box; the paperclip, a drop or a paste
        self.chips = AttachmentChips(self.ctx, model=lambda: self.conversation.model)
        self.input.files_dropped.connect(self.attach_files)
        # the draft's images (#52): thumbnail chips; a paste of a copied image, a drop
        self.image_chips = ImageChips()
        self.input.image_pasted.connect(self.attach_image)
        # the prompt the next Send makes, in tokens, against the context (under the box)
        self.token_count = TokenCount(self.ctx, self.conversation,
                                      lambda: (self.input.toPlainText(), self.editing_index),
                                      files=self.chips.attachments,
                                      images=self.image_chips.images)
        self.input.textChanged.connect(self.token_count.schedule)
        self.chips.changed.connect(self.token_count.schedule)
        self.image_chips.changed.connect(self.token_count.schedule)
        self.token_count.shown.connect(self._count_shown)
        self.attach_button = QToolButton()
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setIcon(paperclip_icon())
        self.attach_button.setText("Attach")
        self.attach_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.attach_button.setToolTip(ATTACH_TIP)
        self.attach_button.clicked.connect(self.choose_files)
        # its arrow: a folder (the file dialog picks files only)
        attach_menu = QMenu(self.attach_button)
        attach_menu.addAction("Files…", self.choose_files)
        attach_menu.addAction("Folder…", self.choose_folder)
        self.attach_button.setMenu(attach_menu)
        self.attach_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        under = QHBoxLayout()
        under.setContentsMargins(0, 0, 0, 0)
        # at the left even when the count is hidden (a remote tab has none)
        under.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignLeft)
        under.addWidget(self.token_count, 1)
        typing = QVBoxLayout()
        typing.setSpacing(2)
        typing.addWidget(self.chips)
        typing.addWidget(self.image_chips)
        typing.addWidget(self.input)
        typing.addLayout(under)
        row.addLayout(typing, 1)
        buttons = QVBoxLayout()
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.clicked.connect(self._send_or_stop)
        send_row = QHBoxLayout()
        send_row.setSpacing(4)
        send_row.addWidget(self.send_button, 1)
        send_row.addWidget(self._answers_button())
        self.regenerate_button = QPushButton("Regenerate")
        self.regenerate_button.setToolTip(REGENERATE_TIP)
        self.regenerate_button.clicked.connect(lambda: self.regenerate())
        self.settings_button = QToolButton()
        self.settings_button.setText("Settings")
        self.settings_button.setCheckable(True)
        buttons.addLayout(send_row)
        buttons.addWidget(self.regenerate_button)
        buttons.addWidget(self.settings_button)
        row.addLayout(buttons)
        col.addWidget(bottom)
        split.addWidget(left)

        conv = self.conversation
        self.panel = SettingsPanel(self.ctx.settings, conv.system_prompt, conv.params)
        self.panel.changed.connect(self._settings_edited)
        self.panel.setMinimumWidth(200)
        # scrolls rather than grows: with the output format and tools rows the panel is
        # taller than a 600-pixel window leaves, and it made the window taller than asked
        self.panel_area = area = QScrollArea()
        area.setObjectName("settingsPanelArea")
        area.setWidget(self.panel)
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        area.setMinimumWidth(200)
        split.addWidget(area)
        split.setStretchFactor(0, 1)
        split.setSizes([700, 280])
        shown = self.ctx.settings.show_settings_panel
        self.settings_button.setChecked(shown)
        self.panel_area.setVisible(shown)
        self.settings_button.setToolTip("Show or hide the sampling settings (all tabs)")
        self.settings_button.toggled.connect(self._settings_toggled)
        self.ctx.settings.settings_panel_changed.connect(self._show_panel)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(split)

        for keys, slot in (("Esc", self.on_escape), ("Ctrl+R", lambda: self.regenerate())):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)

    def _answers_button(self) -> QToolButton:
        """×N: how many answers Send and Regenerate ask for at once (1 to MAX_ANSWERS)."""
        self.answers_button = button = QToolButton()
        button.setObjectName("answersButton")
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(button)
        group = QActionGroup(menu)
        self.answers_actions: dict[int, QAction] = {}
        for n in range(1, MAX_ANSWERS + 1):
            action = menu.addAction("1 answer" if n == 1 else f"{n} answers at once")
            action.setCheckable(True)
            action.setChecked(n == 1)
            action.triggered.connect(lambda _=False, n=n: self.set_answers(n))
            group.addAction(action)
            self.answers_actions[n] = action
        button.setMenu(menu)
        self.set_answers(self.conversation.answers)  # restored with the chat, else 1
        return button

    def set_answers(self, n: int) -> None:
        self.answers = max(1, min(MAX_ANSWERS, n))
        self.conversation.set_answers(self.answers)  # saved with the chat's settings
        self.answers_button.setText(f"×{self.answers}")
        self.answers_button.setToolTip(answers_tip(self.answers))
        self.answers_actions[self.answers].setChecked(True)

    def _undo_bar(self) -> QFrame:
        """"Deleted 3 messages. Undo": for UNDO_MS, or until the chat changes again."""
        self.undo_bar = bar = QFrame()
        bar.setObjectName("undoBar")
        row = QHBoxLayout(bar)
        row.setContentsMargins(12, 4, 12, 4)
        self.undo_label = QLabel()
        self.undo_button = QPushButton("Undo")
        self.undo_button.setObjectName("flatButton")
        self.undo_button.setToolTip("Put the deleted messages back (Ctrl+Shift+Z)")
        self.undo_button.clicked.connect(lambda: self.undo_delete())
        row.addWidget(self.undo_label)
        row.addWidget(self.undo_button)
        row.addStretch(1)
        bar.hide()
        self.undo_timer = QTimer(self)
        self.undo_timer.setSingleShot(True)
        self.undo_timer.timeout.connect(bar.hide)
        return bar

    def _backend_row(self) -> QWidget:
        """A slim row above the messages: which backend answers this tab."""
        row = QWidget()
        row.setObjectName("backendRow")
        layout = QHBoxLayout(row)
        layout.setContentsMargins(12, 4, 12, 2)
        label = QLabel("Backend")
        self.backend_picker = BackendPicker(
            self.ctx.settings, self.conversation.backend, model=self.conversation.model,
            models=self.ctx.bridge.other_models, default=self.ctx.bridge.default_model)
        # the default model's name in the picker follows the model the window loads
        self.ctx.bridge.state_changed.connect(self._on_engine_state)
        self.backend_picker.chosen.connect(self.set_backend)
        self.backend_picker.model_chosen.connect(self.set_model)
        self.backend_picker.manage_requested.connect(
            lambda: open_connections(self.ctx.settings, self.window()))
        label.setBuddy(self.backend_picker)
        layout.addWidget(label)
        layout.addWidget(self.backend_picker)
        layout.addStretch(1)
        self._top_row = layout
        return row

    def add_to_top_row(self, widget: QWidget) -> None:
        """A button at the right of the backend row (Compare…, from ui/compare, is
        added by ui/chat_tabs.py: ui/compare shows parts of ui/chat); Tab reaches it right
        after the backend picker."""
        self._top_row.addWidget(widget)
        QWidget.setTabOrder(self.backend_picker, widget)

    def set_backend(self, name: str | None) -> None:
        """The local engine's default model (None) or a saved connection answers the next
        reply."""
        self.conversation.set_model(None)
        self.conversation.set_backend(name)
        if self.backend_picker.backend != name or self.backend_picker.model is not None:
            self.backend_picker.set_backend(name)
        self.chips.recount()
        self.token_count.schedule()

    def set_model(self, model: str | None) -> None:
        """A library model (None: the default one) answers the next reply, loaded then if
        it is not loaded (issue #50)."""
        self.conversation.set_backend(None)
        self.conversation.set_model(model)
        if self.backend_picker.model != model or self.backend_picker.backend is not None:
            self.backend_picker.set_model(model)
        self.chips.recount()
        self.token_count.schedule()

    # -- actions ------------------------------------------------------------------------
    def _submitted(self, text: str) -> None:
        """Enter: the text, or the attached files alone; a blank box with none does nothing."""
        if text.strip() or self.chips.attachments():
            self.send_text(text)

    def send_text(self, text: str) -> bool:
        if self.conversation.is_busy or (self.tool_prep and not self.tool_prep.done()):
            self.show_notice(STILL_GENERATING)
            return False
        servers = self.conversation.params.get("mcp_servers")
        # the tools are listed first (their servers may start)
        if servers and (text.strip() or self.chips.attachments()):
            self.tool_prep = asyncio.ensure_future(self._send_with_tools(text, servers))
            return True
        return self._send_now(text)

    async def _send_with_tools(self, text: str, servers: list[str]) -> bool:
        self.show_notice(f"Listing the tools of {', '.join(servers)} …")
        try:
            await self.tools.prepare(servers)
        except McpError as exc:
            self.show_notice(f"Not sent: {exc}")
            return False
        self.show_notice(None)
        return self._send_now(text)

    def choose_files(self) -> list[str]:
        """The paperclip: pick files to attach (a folder: its menu, or drop it on the box)."""
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach files", "", FILE_FILTER)
        self.attach_files(paths)
        return paths

    def choose_folder(self) -> str:
        """A folder's text files, as git sees them (its .gitignore rules applied)."""
        folder = QFileDialog.getExistingDirectory(self, "Attach a folder")
        self.attach_files([folder] if folder else [])
        return folder

    def attach_files(self, paths: list[str]) -> None:
        """Files and folders as file chips; images (by their suffix) as image chips."""
        images = [p for p in paths if is_image_path(p)]
        files = [p for p in paths if not is_image_path(p)]
        if files:
            self.chips.add_paths(files)
        if images:
            self.image_chips.add_paths(images)
        if paths:
            self.input.setFocus(Qt.FocusReason.OtherFocusReason)

    def attach_image(self, data: bytes) -> None:
        """An image pasted from the clipboard (or dropped as data)."""
        self.image_chips.add_data(data)
        self.input.setFocus(Qt.FocusReason.OtherFocusReason)

    def _send_now(self, text: str) -> bool:
        if self.image_chips.reading:
            self.show_notice(STILL_READING_IMAGES)
            return False
        images = self.image_chips.images()
        if images and self.editing_index is not None:
            self.show_notice(EDIT_IMAGES)
            return False
        refusal = self.token_count.refusal()
        if refusal is not None:  # the engine would refuse it: say why in the user's words
            self.show_notice(refusal)
            return False
        if self.chips.reading:
            self.show_notice(STILL_READING)
            return False
        if self.editing_index is not None:
            ok = self.conversation.edit_and_resend(self.editing_index, text, self.answers)
        else:
            ok = self.conversation.send(text, self.answers, self.chips.attachments(), images)
        if ok:
            self.input.clear()
            self.chips.clear()
            self.image_chips.clear()
            self.cancel_edit()
            self.show_notice(None)
        return ok

    def regenerate(self, index: int | None = None) -> bool:
        """New versions (×N) of reply `index` (default: the last); the old one is kept."""
        if self.conversation.is_busy:
            self.show_notice(STILL_GENERATING)
            return False
        ok = self.conversation.regenerate(self.answers, index)
        if ok:
            self.show_notice(None)
        return ok

    # -- a message's buttons: the keys go to the input box first ------------------------
    # The button pressed (‹ ›, ⋯, Allow) has the keys and goes away with the rebuild or the
    # answer; Qt would then hand them to the next widget in the window's chain (the
    # sidebar's search box), or to no window at all. So the input box takes them before.
    def take_keys(self) -> None:
        """The input box takes the keyboard (typing goes on writing the message)."""
        self.input.setFocus(Qt.FocusReason.OtherFocusReason)

    def _version_stepped(self, index: int, step: int) -> None:
        self.take_keys()
        self.switch_version(index, step)

    def _message_action(self, name: str, index: int) -> None:
        self.take_keys()  # a branch's own tab then takes them from here
        self.on_message_action(name, index)

    def _tool_decided(self, msg: ChatMessage, call_id: str, allow: bool,
                      always: bool) -> None:
        self.take_keys()
        self.tools.decide(msg, call_id, allow, always)

    def switch_version(self, index: int, step: int) -> bool:
        """Show the version `step` places from message `index` (the path below follows)."""
        if self.editing_index is not None and self.editing_index >= index:
            self.cancel_edit()  # the message being edited is no longer shown
            self.input.clear()
        self._switching = True  # the rebuild keeps the view in place
        try:
            return self.conversation.switch_version(index, step)
        finally:
            self._switching = False

    def on_message_action(self, name: str, index: int) -> None:
        """A message's "⋯" menu: "regenerate", "branch" or "delete" from message `index`."""
        if name == "regenerate":
            self.regenerate(index)
        elif name == "branch":
            self.branch(index)
        elif name == "delete":
            self.delete_from(index)

    def branch(self, index: int) -> bool:
        """Ask for a new tab with the chat up to message `index`."""
        if self.conversation.messages[index].streaming:
            self.show_notice("That reply is still being written: stop it (Esc) or wait "
                             "before branching from it.")
            return False
        self.branch_requested.emit(index)
        return True

    def delete_from(self, index: int) -> bool:
        """Delete message `index` and everything after it; the undo bar offers it back."""
        if self.editing_index is not None and self.editing_index >= index \
                and not self.conversation.is_busy:
            self.cancel_edit()
            self.input.clear()
        return self.conversation.delete(index)

    def undo_delete(self) -> bool:
        """Put back the messages deleted last."""
        self.undo_bar.hide()
        ok = self.conversation.undo_delete()
        if ok:
            self.show_notice(None)
        return ok

    def stop(self) -> None:
        self.conversation.stop()

    def on_escape(self) -> None:
        if self.conversation.is_busy:
            self.stop()
        elif self.editing_index is not None:
            self.cancel_edit()
            self.input.clear()

    def start_edit(self, index: int) -> None:
        if self.conversation.is_busy:
            self.show_notice("Stop the reply (Esc) before editing a message.")
            return
        self.editing_index = index
        self.input.setPlainText(self.conversation.messages[index].content)
        self.edit_banner.setText(EDIT_NOTE)
        self.edit_banner.show()
        self.input.setFocus()

    def cancel_edit(self) -> None:
        self.editing_index = None
        self.edit_banner.hide()

    def show_notice(self, note: str | Refusal | None) -> None:
        text = notice_text(note)
        self.notice.setText(text or "")
        self.notice.setVisible(bool(text))

    def close_tab(self) -> None:
        """Cancel a running reply and let go of shared objects."""
        self.undo_timer.stop()
        self.token_count.detach()
        self.chips.detach()
        self.tools.cancel()
        self.conversation.close()
        self.detach()

    def stop_drafts_work(self) -> None:
        """The app quits: the draft's token count and its files' and images' reads (an
        index being built) are cancelled, so nothing is left running at the exit."""
        self.token_count.stop()
        self.chips.detach()
        self.image_chips.detach()

    def detach(self) -> None:
        """Stop listening to the shared settings (the tab closes, or the window does)."""
        self.panel.detach()
        self.backend_picker.detach()
        self.image_chips.detach()
        self.ctx.bridge.state_changed.disconnect(self._on_engine_state)
        self.ctx.settings.settings_panel_changed.disconnect(self._show_panel)

    def _on_engine_state(self, _state: object, _message: str) -> None:
        self.backend_picker.refresh()

    # -- reactions ----------------------------------------------------------------------
    def _on_path_changed(self) -> None:
        """The path shown changed: one message more at its end is added below the others;
        any other change (a version switched, a delete, an undo) rebuilds the list. The
        next prompt changed too: counted again (never per streamed token)."""
        conv, shown = self.conversation, [w.message for w in self.messages.widgets]
        path = conv.messages
        if len(path) == len(shown) + 1 \
                and all(a is b for a, b in zip(shown, path[:-1], strict=True)):
            self.messages.add(len(shown), path[-1], conv.versions(len(shown)))
        else:
            self._show_path()
        self._update_buttons()
        self.token_count.schedule()

    def _on_message_changed(self, msg: ChatMessage, _what: str) -> None:
        """Its text, wait note or a tool call's outcome: shown again, if on the path."""
        index = self.conversation.tree.index(msg)
        if index is not None:
            self.messages.refresh(index)

    def _on_message_finished(self, msg: ChatMessage) -> None:
        index = self.conversation.tree.index(msg)
        if index is not None:  # its stats and finish reason; the next prompt holds it
            self.messages.refresh(index)
            self.token_count.schedule()

    def _on_meta_changed(self) -> None:
        self.token_count.schedule()  # a new system prompt or settings: counted again
        self.meta_changed.emit()

    def _show_path(self) -> None:
        """Rebuild the messages shown (a version switched, a delete, an undo): cheap enough
        per switch, never per streamed token."""
        conv = self.conversation
        self.messages.set_messages(conv.messages,
                                   [conv.versions(i) for i in range(len(conv.messages))],
                                   hold=self._switching)

    def _on_message_added(self, msg: ChatMessage) -> None:
        """A new version beside a shown message (one more answer at once): its `‹ k/n ›`;
        and any new message ends the offer to undo a delete."""
        self.undo_bar.hide()
        conv = self.conversation
        for i, shown in enumerate(conv.messages):
            if shown.parent_id == msg.parent_id:
                if shown is not msg:
                    self.messages.set_version(i, conv.versions(i))
                break

    def _on_removed(self, msgs: list[ChatMessage]) -> None:
        n = len(msgs)
        self.undo_label.setText(f"Deleted {n} message{'s' if n != 1 else ''}.")
        self.undo_bar.show()
        self.undo_timer.start(UNDO_MS)

    def _show_panel(self, shown: bool) -> None:
        visible = shown and self.panel_room
        self.panel_area.setVisible(visible)
        if self.settings_button.isChecked() != visible:
            self.settings_button.blockSignals(True)  # what is shown, not a choice to save
            self.settings_button.setChecked(visible)
            self.settings_button.blockSignals(False)

    def give_panel_room(self, room: bool) -> None:
        """Show the settings panel (as the settings say) or keep it hidden for a dock."""
        self.panel_room = room
        self._show_panel(self.ctx.settings.show_settings_panel)
        # a tab behind another keeps its old minimum width (Qt lays hidden pages out only
        # when shown), and the tabs' minimum is the widest page's: forget it now
        self.panel_area.parentWidget().updateGeometry()
        self.updateGeometry()
        stack = self.parentWidget()
        if stack is not None and stack.layout() is not None:
            stack.layout().invalidate()

    def _settings_toggled(self, checked: bool) -> None:
        if checked and not self.panel_room:
            self.room_wanted()  # the user wants it now: the dock gives the room back
        if checked and self.ctx.settings.show_settings_panel:
            self._show_panel(True)  # already the saved choice: no change event comes
        self.ctx.settings.set_settings_panel(checked)

    def _send_or_stop(self) -> None:
        if self.conversation.is_busy:
            self.stop()
        else:
            self.send_text(self.input.toPlainText())

    def _on_busy(self, busy: bool) -> None:
        if not busy and self.notice.text() == STILL_GENERATING:
            self.show_notice(None)  # true no longer: the reply ended
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setProperty("stop", "true" if busy else "false")
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        self._update_buttons()
        self.busy_changed.emit(busy)

    def _update_buttons(self) -> None:
        self.regenerate_button.setEnabled(self.conversation.can_regenerate)

    def _count_shown(self) -> None:
        """Over the context, Send's tooltip says why it will not send."""
        self.send_button.setToolTip(notice_text(self.token_count.refusal()) or "")

    def _settings_edited(self) -> None:
        params = self.panel.params()
        error = check_params(params)
        self.panel.show_error(error)
        self.conversation.update_settings(self.panel.system_prompt(),
                                          params if error is None else None,
                                          self.panel.preset_name())
