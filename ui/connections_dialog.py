"""Chat → Connections…: add, edit and delete OpenAI-compatible servers (URL, optional API
key, a model picked from its /v1/models). Saved to the settings at once; the keys go to
their own 0600 file (app/remote/keys.py)."""

from __future__ import annotations

import asyncio

from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.remote import Connection, ConnectionConfigError, RemoteError, list_models
from app.settings import Settings

from .named_list_dialog import NamedListDialog, show_once
from .widgets import double_box

NEW_ITEM = "(new connection)"


class ConnectionsDialog(NamedListDialog[Connection]):
    """Non-modal (`show()`): fetching models runs on the app's asyncio loop meanwhile."""

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connections")
        self.setObjectName("connectionsDialog")
        self.resize(720, 380)
        self.settings = settings
        self.fetch_task: asyncio.Future[list[str] | None] | None = None
        left = self._list_panel("connectionList", 200, "Delete")

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
        right = QVBoxLayout()
        right.addLayout(form)
        right.addWidget(self._status_label("connectionStatus"))
        right.addStretch(1)
        save_row = QHBoxLayout()
        save_row.addStretch(1)
        save_row.addWidget(self._save_button("Save connection"))
        right.addLayout(save_row)
        self._finish(left, right)

    # -- list -----------------------------------------------------------------------------
    def _items(self) -> list[Connection]:
        return self.settings.connections

    def _store(self, items: list[Connection]) -> None:
        self.settings.set_connections(items)

    def _list_text(self, item: Connection) -> str:
        return item.describe()

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

    def _new_item(self) -> None:
        self._start_new(self.url)

    new_connection = _new_item

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
        conn = self._checked_form(self.form_connection, ConnectionConfigError)
        if conn is None:
            return False
        if not conn.model:
            self.show_status("Pick a model: Fetch models lists what the server offers.",
                             error=True)
            return False
        if not self._save_item(conn, f"There is already a connection named {conn.name!r}; "
                               "give this one another name."):
            return False
        self.show_status(f"Saved {conn.describe()}.")
        return True

    # -- fetching models ------------------------------------------------------------------
    def start_fetch(self) -> asyncio.Future[list[str] | None]:
        """GET /v1/models on the app's loop; the combo fills, or the status says why not."""
        self.fetch_task = asyncio.ensure_future(self.fetch_models())
        return self.fetch_task

    async def fetch_models(self) -> list[str] | None:
        conn = self._checked_form(self.form_connection, ConnectionConfigError)
        if conn is None:
            return None
        self.show_status(f"Asking {conn.name} for its models …")
        models = await self._with_button_off(self.fetch_button, list_models(conn), RemoteError,
                                             "Could not list the models: ")
        if models is None:
            return None
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


def open_connections(settings: Settings, parent: QWidget | None) -> ConnectionsDialog:
    """One dialog per window: shown again (raised) if it is open already."""
    return show_once(parent, ConnectionsDialog, lambda: ConnectionsDialog(settings, parent))
