"""The chat tab's backend picker: the local engine's default model, the library's other
models (issue #50: each loads when the tab sends) or one of the saved connections."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QWidget

from app.settings import Settings

LOCAL_TEXT = "Local engine"
MANAGE = "__manage__"  # the last item opens the connections dialog
MODEL = "model:"  # an item's data for a library model: this, then its name


class BackendPicker(QComboBox):
    """`chosen(name | None)` when the user picks a connection (None: the local engine's
    default model); `model_chosen(name)` for another library model; `manage_requested()`
    for "Connections…". Follows the settings' connections as they change; `models()`
    lists the library's other models, read each time the list is filled or opened."""

    chosen = Signal(object)
    model_chosen = Signal(str)
    manage_requested = Signal()

    def __init__(self, settings: Settings, current: str | None,
                 parent: QWidget | None = None, *, model: str | None = None,
                 models: Callable[[], list[str]] | None = None,
                 default: Callable[[], str] | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("backendPicker")
        self.setToolTip("Which model or server answers this chat: the local engine's model, "
                        "another model of the library (it loads when you send), or a "
                        "connection (Chat → Connections…)")
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.settings = settings
        self._current = current
        self._model = model if current is None else None
        self._models = models or (lambda: [])
        self._default = default or (lambda: "")  # the default model's name, "" for none
        self._fill()
        self.activated.connect(self._on_activated)
        settings.connections_changed.connect(self._fill)

    @property
    def backend(self) -> str | None:
        return self._current

    @property
    def model(self) -> str | None:
        """The library model picked (None: the default model, or a connection)."""
        return self._model

    def set_backend(self, name: str | None) -> None:
        self._current = name
        if name is not None:
            self._model = None
        self._fill()

    def set_model(self, model: str | None) -> None:
        self._current, self._model = None, model
        self._fill()

    def refresh(self) -> None:
        """List again (the default model or the library changed)."""
        self._fill()

    def showPopup(self) -> None:  # noqa: N802 - Qt's name
        self._fill()  # a model added to the library meanwhile is listed
        super().showPopup()

    def detach(self) -> None:
        self.settings.connections_changed.disconnect(self._fill)

    def _fill(self) -> None:
        self.blockSignals(True)
        self.clear()
        default = self._default()
        self.addItem(f"{LOCAL_TEXT}: {default}" if default else LOCAL_TEXT, None)
        models = self._models()
        if self._model is not None and self._model not in models:
            models = [*models, self._model]  # a model gone from the library: keep it shown
        for name in models:
            self.addItem(name, MODEL + name)
        for conn in self.settings.connections:
            self.addItem(conn.describe(), conn.name)
        if self._current is not None and self.settings.connection(self._current) is None:
            self.addItem(f"{self._current} (deleted)", self._current)  # say so, keep it
        self.insertSeparator(self.count())
        self.addItem("Connections…", MANAGE)
        if self._model is not None:
            index = self.findData(MODEL + self._model)
        else:
            index = self.findData(self._current) if self._current is not None else 0
        self.setCurrentIndex(max(0, index))
        self.blockSignals(False)

    def _on_activated(self, index: int) -> None:
        data = self.itemData(index)
        if data == MANAGE:
            self._fill()  # show the tab's choice again
            self.manage_requested.emit()
            return
        if isinstance(data, str) and data.startswith(MODEL) \
                and self.settings.connection(data) is None:
            model = data[len(MODEL):]
            if model != self._model or self._current is not None:
                self._current, self._model = None, model
                self.model_chosen.emit(model)
            return
        if data != self._current or self._model is not None:
            self._current, self._model = data, None
            self.chosen.emit(data)
