"""The engine's state where the window shows it: the load banner, the model's name and the
live numbers in the status bar (refreshed twice a second), and the other models tabs loaded
(issue #50: the ModelManager's, each with its state, estimate and running replies, and an
Unload menu for them: ui/model_unload.py asks first when replies run on the model). The
live figures are those of the front chat's model (`front_model`), named when it is not the
default one, and fitted to the bar's width (ui/status_fit.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QLabel, QMainWindow, QMenu, QToolButton

from app.bridge import BridgeState, EngineBridge
from app.fleet import ModelInfo

from .load_banner import LoadBanner
from .model_unload import ModelUnloader
from .model_words import plain_description
from .status_fit import StatusFit
from .widgets import ElidedLabel

REFRESH_MS = 500


class EngineStatus(QObject):
    def __init__(self, window: QMainWindow, bridge: EngineBridge, banner: LoadBanner,
                 titles: Callable[[], Mapping[str, str]] = dict,
                 front_model: Callable[[], str | None] = lambda: None) -> None:
        """`front_model()`: the local model of the chat in front (None: the default one)."""
        super().__init__(window)
        self.bridge = bridge
        self.front_model = front_model
        self.banner = banner
        self.model_label = ElidedLabel()  # a long model name: … in its middle, not cut off
        self.stats_label = QLabel()
        self.stats_label.setObjectName("engineStats")
        # the other loaded models (hidden while there are none): shortened with the model's
        # name, so that the figures keep their room at 900 px
        self.others_label = ElidedLabel()
        self.others_label.setObjectName("otherModels")
        self.others_label.hide()
        # Unload ▾: one item per other model loaded (asks first when replies run on it)
        self.unloader = ModelUnloader(window, bridge, titles)
        self.unload_menu = QMenu(window)
        self.unload_menu.aboutToShow.connect(self._fill_unload_menu)
        self.unload_button = QToolButton()
        self.unload_button.setObjectName("unloadModels")
        self.unload_button.setText("Unload ▾")
        # the text carries the arrow: Qt's indicator would sit on the text's last letter
        self.unload_button.setStyleSheet("QToolButton::menu-indicator { image: none; }")
        self.unload_button.setToolTip("Unload a model loaded beside the default one")
        self.unload_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.unload_button.setMenu(self.unload_menu)
        self.unload_button.hide()
        window.statusBar().addWidget(self.model_label, 1)
        window.statusBar().addWidget(self.others_label, 1)
        window.statusBar().addWidget(self.unload_button)
        window.statusBar().addPermanentWidget(self.stats_label)
        self.fit = StatusFit(window.statusBar(), self.stats_label, self.model_label,
                             [self.others_label])
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.show_stats)
        self.timer.start()
        bridge.state_changed.connect(self.show_state)
        self.show_state(bridge.state, bridge.message)

    def show_state(self, state: BridgeState, message: str) -> None:
        self.banner.show_state(state, message)
        if state == BridgeState.READY:
            self.model_label.setText(f"Model: {plain_description(message)}")
        elif state == BridgeState.LOADING:
            self.model_label.setText(message)
        elif state == BridgeState.FAILED:
            self.model_label.setText("No model loaded")

    def show_stats(self) -> None:
        self.show_others()
        model = self.front_model()
        named = None if self.bridge.models.is_default(model) else model
        s = self.bridge.stats(named)
        if s is None:  # no default model, or the front chat's one is not loaded yet
            self.fit.show(named, "not loaded" if named else "", "not loaded")
            return
        rate = f"{s.queued} queued · {s.tokens_per_s:.1f} tok/s"
        self.fit.show(named, f"{s.active} generating · {rate} · batch {s.batch_size} · "
                             f"{s.completed} done", f"{s.active} gen · {rate}")

    def show_others(self) -> None:
        """The models loaded beside the default one, e.g. "Also: smol-q8 (161 MiB, 2
        running)" (its estimate, app.fleet.need_of)."""
        fleet = self.bridge.fleet
        infos = fleet.running() if fleet is not None else []
        self.others_label.setVisible(bool(infos))
        self.unload_button.setVisible(bool(infos))
        if not infos:
            return
        # short of room: the names alone (their sizes and states in the tooltip)
        self.others_label.set_texts("Also: " + ", ".join(_one_model(i) for i in infos),
                                    "Also: " + ", ".join(i.name for i in infos))

    def _fill_unload_menu(self) -> None:
        """The models loaded beside the default one, each an item that unloads it."""
        self.unload_menu.clear()
        fleet = self.bridge.fleet
        for info in fleet.running() if fleet is not None else []:
            running = f" ({info.running} running)" if info.running else ""
            action = self.unload_menu.addAction(f"Unload {info.name}{running}")
            action.setEnabled(info.state == "loaded")  # loading or unloading: not yet
            action.setData(info.name)
            action.triggered.connect(lambda _=False, name=info.name: self.unloader.unload(name))

    def stop(self) -> None:
        """The window is closing: no more refreshes, no more state changes shown."""
        self.timer.stop()
        self.bridge.state_changed.disconnect(self.show_state)


def _one_model(info: ModelInfo) -> str:
    parts = [f"{info.need_bytes / 2**20:.0f} MiB"]
    if info.progress is not None:  # loading, as far as its loader said
        parts.insert(0, f"loading {info.progress * 100:.0f} %")
    elif info.state != "loaded":
        parts.insert(0, info.state.value)
    if info.running:
        parts.append(f"{info.running} running")
    return f"{info.name} ({', '.join(parts)})"
