"""The Server menu and status-bar button: serve the app's engine over the OpenAI API
(app/server/in_app.py), and a small dialog for its port, key and image-URL fetching."""

from __future__ import annotations

import asyncio

from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLineEdit,
    QMainWindow,
    QToolButton,
)

from app.server.in_app import AppServer

from .widgets import int_box

OFF_TEXT = "API server off"
FETCH_URLS_TEXT = "Fetch http(s) image URLs in API requests"
KEY_PLACEHOLDER = "none (only this computer can connect anyway)"


class ServerControls:
    """Owns the toggle action (Server ▸ API server, Ctrl+Shift+A) and the status-bar button
    that shows the URL while serving; both start and stop the same AppServer."""

    def __init__(self, window: QMainWindow, server: AppServer) -> None:
        self.window = window
        self.server = server
        self._tasks: set[asyncio.Task[object]] = set()
        # placed in the Server menu, with their text and keys, from ui/menus.py's table
        self.action = QAction(window)
        self.action.setCheckable(True)
        self.action.triggered.connect(lambda _=False: self.toggle())
        self.settings_action = QAction(window)
        self.settings_action.triggered.connect(lambda _=False: self.edit_settings())
        self.button = QToolButton()
        self.button.setObjectName("apiServerButton")
        self.button.setAutoRaise(True)
        self.button.clicked.connect(lambda _=False: self.toggle())
        window.statusBar().addPermanentWidget(self.button)
        server.changed.connect(self.show_state)
        self.show_state()

    def toggle(self) -> asyncio.Task[object]:
        task = asyncio.ensure_future(self.server.toggle())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def show_state(self) -> None:
        url = self.server.url
        self.action.setChecked(url is not None)
        if url is not None:
            self.button.setText(f"API: {url}")
            self.button.setToolTip("Serving this engine over the OpenAI API; click to stop")
        else:
            self.button.setText(OFF_TEXT)
            self.button.setToolTip("Click to serve this engine over the OpenAI API on "
                                   "127.0.0.1 (port and key: Server ▸ Server settings…)")
        if self.server.error:
            self.window.statusBar().showMessage(self.server.error, 15000)

    def edit_settings(self) -> ServerSettingsDialog:
        dialog = ServerSettingsDialog(self.server, self.window)
        dialog.accepted.connect(lambda: self._apply(dialog))
        dialog.open()  # never exec(): qasync runs this loop
        return dialog

    def _apply(self, dialog: ServerSettingsDialog) -> None:
        settings = self.server.ctx.settings
        settings.server_port = dialog.port.value()
        settings.server_api_key = dialog.key.text().strip()
        settings.save()
        # applied at once by AppContext (process-wide), running server or not
        settings.set_allow_image_urls(dialog.fetch_urls.isChecked())
        if self.server.running:  # serve with the new port and key at once
            task = asyncio.ensure_future(self._restart())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _restart(self) -> None:
        await self.server.stop()
        await self.server.start()

    async def shutdown(self) -> None:
        await self.server.stop()


class ServerSettingsDialog(QDialog):
    def __init__(self, server: AppServer, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.setWindowTitle("Server settings")  # as the Server menu's entry names it
        settings = server.ctx.settings
        form = QFormLayout(self)
        self.port = int_box(1, 65535)
        self.port.setValue(settings.server_port)
        self.key = QLineEdit(settings.server_api_key)
        self.key.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.key.setPlaceholderText(KEY_PLACEHOLDER)
        # wide enough for the whole placeholder: it was cut to "none (only this comput…"
        self.key.setMinimumWidth(self.key.fontMetrics().horizontalAdvance(KEY_PLACEHOLDER)
                                 + 24)
        form.addRow("Port on 127.0.0.1", self.port)
        form.addRow("API key", self.key)
        self.fetch_urls = QCheckBox(FETCH_URLS_TEXT)
        self.fetch_urls.setChecked(settings.allow_image_urls)
        self.fetch_urls.setToolTip(
            "Off, image_url parts must be data URLs: the server fetches nothing.\n"
            "On, it fetches any http(s) address this machine can reach (loopback and the\n"
            "local network included): turn it on only for clients you trust.")
        form.addRow(self.fetch_urls)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
