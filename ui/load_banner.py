"""The strip above the tabs while a model loads (progress bar, stage, elapsed time), after
a load failed (the reason; whether the previous model still serves), or while a model switch
waits for running replies (how many, where; stop them now or cancel the switch)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.bridge import BridgeState, EngineBridge
from app.bridge.switch import model_name

from .model_picker import short_name

BAR_STEPS = 1000


class LoadBanner(QFrame):
    choose_model = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("loadBanner")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 6, 12, 6)
        self.label = QLabel()
        self.label.setWordWrap(True)
        row.addWidget(self.label, 1)
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)  # busy until the loader reports a fraction
        self.bar.setFixedWidth(180)
        self.bar.setTextVisible(True)
        self.bar.setFormat("%p %")
        row.addWidget(self.bar)
        self.button = QPushButton("Choose model…")
        self.button.clicked.connect(self.choose_model)
        row.addWidget(self.button)
        self.dismiss = QPushButton("Dismiss")
        self.dismiss.setToolTip("Hide this message (the model in use keeps serving)")
        self.dismiss.clicked.connect(self.hide)
        row.addWidget(self.dismiss)
        # while a switch waits for running replies
        self.stop_now = QPushButton("Stop them now")
        self.stop_now.setToolTip("Stop the running replies (their text is kept) and switch")
        self.stop_now.clicked.connect(self._stop_now)
        row.addWidget(self.stop_now)
        self.cancel_switch = QPushButton("Cancel switch")
        self.cancel_switch.setToolTip("Keep the model in use")
        self.cancel_switch.clicked.connect(self._cancel_switch)
        row.addWidget(self.cancel_switch)
        self.stop_now.hide()
        self.cancel_switch.hide()
        self._titles: Callable[[], Mapping[str, str]] = dict
        self._message = ""
        self._stage = ""
        self._started = 0.0
        self._bridge: EngineBridge | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(250)
        self._timer.timeout.connect(self._tick)

    def watch(self, bridge: EngineBridge,
              titles: Callable[[], Mapping[str, str]] = dict) -> None:
        """Follow `bridge`'s load progress, failures and switches (until it stops);
        `titles()`: each open tab's title by its tag (to say where replies run)."""
        self._bridge = bridge
        self._titles = titles
        bridge.load_progress.connect(self.show_progress)
        bridge.load_failed.connect(self.show_load_error)
        bridge.switch_changed.connect(self.show_switch)

    def _unwatch(self) -> None:
        if self._bridge is not None:
            self._bridge.load_progress.disconnect(self.show_progress)
            self._bridge.load_failed.disconnect(self.show_load_error)
            self._bridge.switch_changed.disconnect(self.show_switch)
            self._bridge = None

    def _waiting_switch(self) -> str:
        """What a switch waiting for running replies says ("" when none waits)."""
        pending = self._bridge.pending_switch if self._bridge is not None else None
        if pending is None or pending.phase not in ("waiting", "swapping"):
            return ""
        where = ", ".join(pending.running.places(self._titles()))
        name = model_name(pending.source)
        if pending.phase == "waiting":
            return (f"Switching to {name} once the running replies finish ({where}). "
                    "New messages can be sent once it has loaded.")
        return (f"{name} has loaded; switching once the replies started meanwhile finish "
                f"({where}).")

    def show_switch(self) -> None:
        """A switch began or stopped waiting for running replies, or their count changed."""
        waiting = bool(self._waiting_switch())
        was_waiting = self.cancel_switch.isVisibleTo(self)
        self.stop_now.setVisible(waiting)
        self.cancel_switch.setVisible(waiting)
        if waiting:
            self._set_failed(False)
            self.button.hide()
            self.dismiss.hide()
            self.bar.hide()
            self.show()
            self._tick()
        elif was_waiting and self._bridge is not None:  # the note gives way to the state
            self.show_state(self._bridge.state, self._bridge.message)

    def _stop_now(self) -> None:
        if self._bridge is not None:
            self._bridge.switcher.stop_running()

    def _cancel_switch(self) -> None:
        if self._bridge is not None:
            self._bridge.switcher.cancel()

    def show_state(self, state: BridgeState, message: str) -> None:
        self._message = message
        if self._waiting_switch():
            return  # the switch's note stays until it loads or gives up (show_switch)
        loading = state == BridgeState.LOADING
        failed = state == BridgeState.FAILED
        self._set_failed(failed)
        self.bar.setVisible(loading)
        self.dismiss.hide()
        self.button.setVisible(failed or state == BridgeState.EMPTY)
        self.setVisible(loading or failed or state == BridgeState.EMPTY)
        if loading:
            self._stage = ""
            self.bar.setRange(0, 0)
            self._started = time.perf_counter()
            self._timer.start()
        else:
            self._timer.stop()
        if state == BridgeState.STOPPED:
            self._unwatch()
        self._tick()

    def show_progress(self, stage: str, fraction: float) -> None:
        """The loader's report: a determinate bar from now on."""
        self._stage = stage
        self.bar.setRange(0, BAR_STEPS)
        self.bar.setValue(round(fraction * BAR_STEPS))
        self._tick()

    def show_load_error(self, message: str) -> None:
        """A load failed. With a model still serving, say so and offer to dismiss."""
        bridge = self._bridge
        kept = bridge is not None and bridge.state == BridgeState.READY
        if kept:
            self._message = f"{message}\nStill using {bridge.description}; your chats are " \
                            "as they were."
            self._set_failed(True)
            self.bar.hide()
            self.button.show()
            self.dismiss.show()
            self.show()
            self._tick()

    def _set_failed(self, failed: bool) -> None:
        self.setProperty("failed", "true" if failed else "false")
        self.style().unpolish(self)
        self.style().polish(self)

    def _tick(self) -> None:
        switching = self._waiting_switch()
        if switching:
            self.label.setText(switching)
            self.label.setToolTip(self._bridge.pending_switch.source  # type: ignore[union-attr]
                                  if self._bridge is not None else "")
        elif self._timer.isActive():
            elapsed = time.perf_counter() - self._started
            source = self._bridge.attempted if self._bridge is not None else None
            # the model's short name: a long path would wrap the banner at 900 px (the
            # tooltip and the status bar have the whole source)
            what = f"Loading {short_name(source)}" if source else self._message
            stage = f" — {self._stage}" if self._stage else ""
            serving = self._bridge is not None and self._bridge.local is not None
            note = " · chats keep using the current model meanwhile" if serving else ""
            self.label.setText(f"{what}{stage} · {elapsed:.0f} s{note}")
            self.label.setToolTip(source or "")
        else:
            self.label.setText(self._message or "No model loaded.")
            self.label.setToolTip("")
