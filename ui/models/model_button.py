"""The main window's model button (in the status bar): the current model's short name;
a click opens the model library."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QSizePolicy, QToolButton

from app.bridge import BridgeState, EngineBridge

from ..model_words import plain_description
from .names import short_name

MAX_CHARS = 32  # the status bar keeps room for the model's description and the numbers


class ModelButton(QToolButton):
    def __init__(self, bridge: EngineBridge, open_library: Callable[[], object]) -> None:
        super().__init__()
        self.setObjectName("modelButton")
        self.setAutoRaise(False)  # framed: it reads as a button, not as status text
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
        self.bridge = bridge
        self.clicked.connect(lambda: open_library())
        bridge.state_changed.connect(self.show_state)
        self.show_state(bridge.state, bridge.message)

    def show_state(self, state: BridgeState, _message: str = "") -> None:
        source = self.bridge.source
        if state == BridgeState.LOADING and self.bridge.attempted:
            name, tip = f"Loading {short_name(self.bridge.attempted)} …", self.bridge.attempted
        elif source:
            name, tip = short_name(source), "\n".join(
                [plain_description(self.bridge.description), source, *self.bridge.notes])
        else:
            name, tip = "No model", "No model is loaded"
        half = (MAX_CHARS - 1) // 2  # … in the middle: the start and the quant suffix show
        shown = name if len(name) <= MAX_CHARS else f"{name[:half]}…{name[-half:]}"
        self.setText(f"{shown} ▾")
        self.setToolTip(f"{tip}\nClick to open the model library")

    def stop(self) -> None:
        self.bridge.state_changed.disconnect(self.show_state)
