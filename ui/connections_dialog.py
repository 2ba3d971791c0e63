"""Chat → Connections…: add, edit and delete OpenAI-compatible servers (URL, optional API
key, a model picked from its /v1/models). Saved to the settings at once; the keys go to
their own 0600 file (app/remote/keys.py)."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.remote import Connection, ConnectionConfigError, RemoteError, list_models
from app.settings import Settings

from .widgets import double_box

NEW_ITEM = "(new connection)"


class ConnectionsDialog(QDialog):
    """Non-modal (`show()`): fetching models runs on the app's asyncio loop meanwhile."""

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connections")
        self.setObjectName("connectionsDialog")
        self.resize(720, 380)
        self.settings = settings
        self._editing: str | None = None  # the saved name being edited (None: a new one)
        self.fetch_task: asyncio.Future[list[str] | None] | None = None

        self.list = QListWidget()
        self.list.setObjectName("connectionList")
        self.list.setMinimumWidth(200)
        self.list.currentRowChanged.connect(self._show_row)
        new_button = QPushButton("New")
        new_button.clicked.connect(self.new_connection)
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self.delete_current)
        left = QVBoxLayout()
        left.addWidget(self.list, 1)
        row = QHBoxLayout()
        row.addWidget(new_button)
        row.addWidget(self.delete_button)
        left.addLayout(row)

        self.name = QLineEdit()
        self.name.setPlaceholderText("shown in the tabs' backend picker (default: host:port)")
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://127.0.0.1:8000 (with or without /v1)")
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional; sent as a Bearer token")
        self.model = QComboBox()
        self.model.setEditable(True)  # a server may serve names it does not list
        self.model.setMinimumWidth(220)
        self.fetch_button = QPushButton("Fetch models")
        self.fetch_button.setToolTip("Ask the server for its models (GET /v1/models)")
        self.fetch_button.clicked.connect(lambda: self.start_fetch())
        model_row = QHBoxLayout()
        model_row.addWidget(self.model, 1)
        model_row.addWidget(self.fetch_button)
        self.connect_timeout = double_box(0.5, 600.0, 1.0, " s", decimals=1)
        self.read_timeout = double_box(1.0, 3600.0, 10.0, " s", decimals=0)
        self.connect_timeout.setToolTip("How long to wait for the server to accept a connection")
        self.read_timeout.setToolTip("Longest silence in a reply before it fails")
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("URL", self.url)
        form.addRow("API key", self.key)
        form.addRow("Model", model_row)
        form.addRow("Connect timeout", self.connect_timeout)
        form.addRow("Read timeout", self.read_timeout)
        self.status = QLabel()
        self.status.setObjectName("connectionStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.save_button = QPushButton("Save connection")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save_current)
        right = QVBoxLayout()
        right.addLayout(form)
        right.addWidget(self.status)
        right.addStretch(1)
        save_row = QHBoxLayout()
        save_row.addStretch(1)
        save_row.addWidget(self.save_button)
        right.addLayout(save_row)

        body = QHBoxLayout()
        body.addLayout(left)
        body.addLayout(right, 1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.close)
        col = QVBoxLayout(self)
        col.addLayout(body, 1)
        col.addWidget(close)
        self._fill_list()

    # -- list -----------------------------------------------------------------------------
    def _fill_list(self, select: str | None = None) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        for conn in self.settings.connections:
            self.list.addItem(conn.describe())
        self.list.blockSignals(False)
        names = [c.name for c in self.settings.connections]
        if select in names:
            self.list.setCurrentRow(names.index(select))
        elif names:
            self.list.setCurrentRow(0)
        else:
            self.new_connection()

    def _show_row(self, row: int) -> None:
        if 0 <= row < len(self.settings.connections):
            self._load(self.settings.connections[row])

    def _load(self, conn: Connection | None) -> None:
        self._editing = conn.name if conn else None
        self.name.setText(conn.name if conn else "")
        self.url.setText(conn.base_url if conn else "")
        self.key.setText(conn.api_key or "" if conn else "")
        self.model.clear()
        if conn and conn.model:
            self.model.addItem(conn.model)
        self.model.setCurrentText(conn.model if conn else "")
        self.connect_timeout.setValue(conn.connect_timeout_s if conn else 10.0)
        self.read_timeout.setValue(conn.read_timeout_s if conn else 120.0)
        self.delete_button.setEnabled(conn is not None)
        self.show_status("")

    def new_connection(self) -> None:
        self.list.blockSignals(True)
        self.list.setCurrentRow(-1)  # so picking a saved one afterwards loads it again
        self.list.blockSignals(False)
        self._load(None)
        self.url.setFocus()

    # -- editing ----------------------------------------------------------------------------
    def form_connection(self) -> Connection:
        """What the form says, validated (ConnectionConfigError says what is wrong)."""
        url = self.url.text().strip()
        if not url:
            raise ConnectionConfigError("Enter the server's URL, e.g. http://127.0.0.1:8000")
        return Connection(url, model=self.model.currentText().strip(),
                          api_key=self.key.text().strip() or None,
                          name=self.name.text().strip(),
                          connect_timeout_s=self.connect_timeout.value(),
                          read_timeout_s=self.read_timeout.value())

    def save_current(self) -> bool:
        """Add or update the connection in the settings; False (status says why) if not."""
        try:
            conn = self.form_connection()
        except ConnectionConfigError as exc:
            self.show_status(str(exc), error=True)
            return False
        if not conn.model:
            self.show_status("Pick a model: Fetch models lists what the server offers.",
                             error=True)
            return False
        others = [c for c in self.settings.connections if c.name != self._editing]
        if any(c.name == conn.name for c in others):
            self.show_status(f"There is already a connection named {conn.name!r}; give this "
                             "one another name.", error=True)
            return False
        saved = list(self.settings.connections)
        index = next((i for i, c in enumerate(saved) if c.name == self._editing), None)
        if index is None:
            saved.append(conn)
        else:
            saved[index] = conn
        self.settings.set_connections(saved)
        self._fill_list(select=conn.name)
        self.show_status(f"Saved {conn.describe()}.")
        return True

    def delete_current(self) -> None:
        if self._editing is None:
            return
        self.settings.set_connections([c for c in self.settings.connections
                                       if c.name != self._editing])
        self._fill_list()

    # -- fetching models ------------------------------------------------------------------
    def start_fetch(self) -> asyncio.Future[list[str] | None]:
        """GET /v1/models on the app's loop; the combo fills, or the status says why not."""
        self.fetch_task = asyncio.ensure_future(self.fetch_models())
        return self.fetch_task

    async def fetch_models(self) -> list[str] | None:
        try:
            conn = self.form_connection()
        except ConnectionConfigError as exc:
            self.show_status(str(exc), error=True)
            return None
        self.fetch_button.setEnabled(False)
        self.show_status(f"Asking {conn.name} for its models …")
        try:
            models = await list_models(conn)
        except RemoteError as exc:
            self.show_status(f"Could not list the models: {exc}", error=True)
            return None
        finally:
            self.fetch_button.setEnabled(True)
        current = self.model.currentText().strip()
        self.model.clear()
        self.model.addItems(models)
        if current in models:
            self.model.setCurrentText(current)
        if not models:
            self.show_status(f"{conn.name} lists no models; type the model's name.",
                             error=True)
        else:
            self.show_status(f"{conn.name} offers {len(models)} model"
                             f"{'s' if len(models) != 1 else ''}.")
        return models

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setProperty("error", "true" if error else "false")
        self.status.setStyleSheet("color: #c5221f;" if error else "")


def open_connections(settings: Settings, parent: QWidget | None) -> ConnectionsDialog:
    """One dialog per window: shown again (raised) if it is open already."""
    existing = parent.findChild(ConnectionsDialog) if parent is not None else None
    dialog = existing or ConnectionsDialog(settings, parent)
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
