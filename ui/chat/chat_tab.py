"""One chat tab: the view of one Conversation (messages, input, settings)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.bridge import check_params
from app.context import AppContext
from app.conversation import Conversation

from ..compare import compare_button
from ..connections_dialog import open_connections
from .backend_picker import BackendPicker
from .input_box import InputBox
from .message_view import MessageList
from .settings_panel import CUSTOM, SettingsPanel

CHAT_MIN_WIDTH = 480  # messages and input stay usable whatever is docked beside them


class ChatTab(QWidget):
    busy_changed = Signal(bool)

    def __init__(self, ctx: AppContext, title: str = "", parent: QWidget | None = None,
                 conversation: Conversation | None = None) -> None:
        """A new chat, or a view of `conversation` (one restored from the history)."""
        super().__init__(parent)
        self.ctx = ctx
        self.conversation = conv = conversation or Conversation(
            ctx.bridge, title=title, system_prompt=ctx.settings.system_prompt,
            params=ctx.settings.new_tab_params())
        self.editing_index: int | None = None
        self.title_listener: Callable[[], object] | None = None  # the window detaches it
        self._build()
        if conversation is None:
            preset = self.panel.preset.currentText()
            conv.preset = None if preset == CUSTOM else preset
        conv.reset.connect(lambda: self.messages.set_messages(conv.messages))
        conv.added.connect(lambda i: self.messages.add(i, conv.messages[i]))
        conv.delta.connect(lambda i, _text: self.messages.refresh(i))
        conv.reply_finished.connect(self.messages.refresh)
        conv.waiting.connect(self.messages.refresh)
        conv.busy_changed.connect(self._on_busy)
        conv.notice.connect(self.show_notice)
        conv.added.connect(lambda _i: self._update_buttons())
        conv.reset.connect(self._update_buttons)
        if conv.messages:
            self.messages.set_messages(conv.messages)
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
        col.addWidget(self.messages, 1)

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
        self.input.submitted.connect(self.send_text)
        self.input.escape_pressed.connect(self.on_escape)
        row.addWidget(self.input, 1)
        buttons = QVBoxLayout()
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.clicked.connect(self._send_or_stop)
        self.regenerate_button = QPushButton("Regenerate")
        self.regenerate_button.setToolTip("Generate the last reply again (Ctrl+R)")
        self.regenerate_button.clicked.connect(self.regenerate)
        self.settings_button = QToolButton()
        self.settings_button.setText("Settings")
        self.settings_button.setCheckable(True)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.regenerate_button)
        buttons.addWidget(self.settings_button)
        row.addLayout(buttons)
        col.addWidget(bottom)
        split.addWidget(left)

        conv = self.conversation
        self.panel = SettingsPanel(self.ctx.settings, conv.system_prompt, conv.params)
        self.panel.changed.connect(self._settings_edited)
        self.panel.setMinimumWidth(200)
        split.addWidget(self.panel)
        split.setStretchFactor(0, 1)
        split.setSizes([700, 280])
        shown = self.ctx.settings.show_settings_panel
        self.settings_button.setChecked(shown)
        self.panel.setVisible(shown)
        self.settings_button.setToolTip("Show or hide the sampling settings (all tabs)")
        self.settings_button.toggled.connect(self.ctx.settings.set_settings_panel)
        self.ctx.settings.settings_panel_changed.connect(self._show_panel)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(split)

        for keys, slot in (("Esc", self.on_escape), ("Ctrl+R", self.regenerate)):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)

    def _backend_row(self) -> QWidget:
        """A slim row above the messages: which backend answers this tab."""
        row = QWidget()
        row.setObjectName("backendRow")
        layout = QHBoxLayout(row)
        layout.setContentsMargins(12, 4, 12, 2)
        label = QLabel("Backend")
        self.backend_picker = BackendPicker(self.ctx.settings, self.conversation.backend)
        self.backend_picker.chosen.connect(self.set_backend)
        self.backend_picker.manage_requested.connect(
            lambda: open_connections(self.ctx.settings, self.window()))
        label.setBuddy(self.backend_picker)
        layout.addWidget(label)
        layout.addWidget(self.backend_picker)
        layout.addStretch(1)
        layout.addWidget(compare_button(self))  # ui/compare: one message, several targets
        return row

    def set_backend(self, name: str | None) -> None:
        """The local engine (None) or a saved connection answers the next reply."""
        self.conversation.set_backend(name)
        if self.backend_picker.backend != name:
            self.backend_picker.set_backend(name)

    # -- actions ------------------------------------------------------------------------
    def send_text(self, text: str) -> bool:
        if self.conversation.is_busy:
            self.show_notice("Still generating: press Esc to stop it first.")
            return False
        if self.editing_index is not None:
            ok = self.conversation.edit_and_resend(self.editing_index, text)
        else:
            ok = self.conversation.send(text)
        if ok:
            self.input.clear()
            self.cancel_edit()
            self.show_notice(None)
        return ok

    def regenerate(self) -> bool:
        ok = self.conversation.regenerate()
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
        self.edit_banner.setText("Editing a message: Enter resends the chat from here, "
                                 "Esc cancels.")
        self.edit_banner.show()
        self.input.setFocus()

    def cancel_edit(self) -> None:
        self.editing_index = None
        self.edit_banner.hide()

    def show_notice(self, text: str | None) -> None:
        self.notice.setText(text or "")
        self.notice.setVisible(bool(text))

    def close_tab(self) -> None:
        """Cancel a running reply and let go of shared objects."""
        self.conversation.close()
        self.panel.detach()
        self.backend_picker.detach()
        self.ctx.settings.settings_panel_changed.disconnect(self._show_panel)

    # -- reactions ----------------------------------------------------------------------
    def _show_panel(self, shown: bool) -> None:
        self.panel.setVisible(shown)
        if self.settings_button.isChecked() != shown:
            self.settings_button.setChecked(shown)  # re-emits; set_settings_panel ignores it

    def _send_or_stop(self) -> None:
        if self.conversation.is_busy:
            self.stop()
        else:
            self.send_text(self.input.toPlainText())

    def _on_busy(self, busy: bool) -> None:
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setProperty("stop", "true" if busy else "false")
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        self._update_buttons()
        self.busy_changed.emit(busy)

    def _update_buttons(self) -> None:
        self.regenerate_button.setEnabled(self.conversation.can_regenerate)

    def _settings_edited(self) -> None:
        params = self.panel.params()
        error = check_params(params)
        self.panel.show_error(error)
        preset = self.panel.preset.currentText()
        self.conversation.update_settings(self.panel.system_prompt(),
                                          params if error is None else None,
                                          None if preset == CUSTOM else preset)
