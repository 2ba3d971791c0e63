"""The tab's output format in its settings panel: text, any JSON object, or a JSON schema
loaded from a file (kept in the tab's params as `response_format`, app.request.output_format)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.request.output_format import JSON_OBJECT, OutputFormatError, describe, load_schema_file

from .. import file_dialogs

TEXT, JSON, SCHEMA = "Text", "JSON (any object)", "JSON schema"


class OutputFormatBox(QWidget):
    """`changed()` fires when the format changes; `value()` is the `response_format`
    (None: text). A schema file that cannot be used is refused with a message here, and the
    format stays what it was."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._value: dict[str, Any] | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.kind = QComboBox()
        self.kind.setObjectName("outputFormat")
        self.kind.addItems([TEXT, JSON, SCHEMA])
        self.file_button = QPushButton("Schema file…")
        self.file_button.setObjectName("schemaFileButton")
        row.addWidget(self.kind, 1)
        row.addWidget(self.file_button)
        layout.addLayout(row)
        self.label = QLabel()
        self.label.setObjectName("schemaLabel")
        self.label.setWordWrap(True)
        layout.addWidget(self.label)
        self.error = QLabel()
        self.error.setObjectName("errorLabel")
        self.error.setWordWrap(True)
        self.error.hide()
        layout.addWidget(self.error)
        self.kind.activated.connect(self._kind_chosen)
        self.file_button.clicked.connect(self._ask_file)
        self._show()

    def value(self) -> dict[str, Any] | None:
        return self._value

    def set_value(self, value: dict[str, Any] | None) -> None:
        """Show a saved format (no `changed`)."""
        self._value = value if isinstance(value, dict) and value.get("type") in (
            "json_object", "json_schema") else None
        self.show_error(None)
        self._show()

    def load_file(self, path: str) -> bool:
        """Use the JSON schema in `path`; False (and a message) if it cannot be used."""
        try:
            fmt = load_schema_file(path)
        except OutputFormatError as exc:
            self.show_error(f"Schema not used: {exc}")
            self._show()
            return False
        self.show_error(None)
        self._set(fmt)
        return True

    def show_error(self, text: str | None) -> None:
        self.error.setText(text or "")
        self.error.setVisible(bool(text))

    # -- internals -------------------------------------------------------------------------
    def _kind_chosen(self, _index: int) -> None:
        kind = self.kind.currentText()
        self.show_error(None)
        if kind == TEXT:
            self._set(None)
        elif kind == JSON:
            self._set(dict(JSON_OBJECT))
        elif (self._value or {}).get("type") != "json_schema":
            self._ask_file()  # a schema is needed first; cancelled: the format stays
            self._show()

    def _ask_file(self) -> None:
        dialog = QFileDialog(self, "JSON schema", file_dialogs.start_path(),
                             "JSON schema (*.json);;All files (*)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self._file_chosen)
        dialog.open()  # never exec(): we run inside qasync's loop

    def _file_chosen(self, path: str) -> None:
        file_dialogs.remember(path)
        self.load_file(path)

    def _set(self, value: dict[str, Any] | None) -> None:
        self._value = value
        self._show()
        self.changed.emit()

    def _show(self) -> None:
        kind = (self._value or {}).get("type")
        self.kind.setCurrentText(SCHEMA if kind == "json_schema" else
                                 JSON if kind == "json_object" else TEXT)
        self.file_button.setVisible(kind == "json_schema")
        if kind == "json_schema":
            schema = self._value["json_schema"].get("schema", {})  # type: ignore[index]
            keys = ", ".join(list(schema.get("properties", {}))[:6])
            self.label.setText(describe(self._value) + (f" ({keys})" if keys else ""))
        elif kind == "json_object":
            self.label.setText("Replies are one JSON object.")
        self.label.setVisible(kind is not None)
