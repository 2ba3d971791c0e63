"""The simulator's settings form: every SimConfig field as a widget, read back as a SimConfig.

Only the arrival process's own parameters are shown, and the upper ends of the sampling
ranges only when sampling is randomized. Values are not validated here: the panel calls
SimConfig.validate() and shows its message.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.simulator.config import SimConfig
from app.simulator.templates import default_prompt_set

from ..widgets import double_box, int_box

ARRIVAL_CHOICES = (("Uniform gaps", "uniform"), ("Poisson", "poisson"), ("Bursts", "burst"))
SAMPLING_CHOICES = (("Fixed", "fixed"), ("Randomized per request", "random"))
NO_LIMIT = "no limit"


def _pair(first: QWidget, second: QWidget, between: str = "–") -> tuple[QWidget, QLabel]:
    """Two boxes in one form row; returns the row widget and the separator label."""
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    sep = QLabel(between)
    layout.addWidget(first, 1)
    layout.addWidget(sep)
    layout.addWidget(second, 1)
    return row, sep


class ConfigForm(QWidget):
    """`changed()` fires on any edit (the panel clears a stale error then)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("simConfigForm")
        self._topics = list(default_prompt_set().topics)  # not edited here; kept as given

        self.templates = QPlainTextEdit()
        self.templates.setObjectName("simTemplates")
        self.templates.setPlaceholderText("one prompt per line; {topic} and {n} are filled in")
        self.templates.setMinimumHeight(90)
        self.templates.setToolTip("One template per line. {topic} becomes a random topic, "
                                  "{n} the request number.")
        self.reset_button = QPushButton("Reset to defaults")
        self.reset_button.clicked.connect(self.reset_templates)

        self.arrival = QComboBox()
        for text, key in ARRIVAL_CHOICES:
            self.arrival.addItem(text, key)
        self.low = double_box(0.0, 3600.0, 0.1, " s")
        self.high = double_box(0.0, 3600.0, 0.1, " s")
        self.rate = double_box(0.01, 1000.0, 0.5, " req/s")
        self.burst_size = int_box(1, 10_000)
        self.burst_every = double_box(0.0, 3600.0, 1.0, " s", decimals=1)
        self.requests = int_box(0, 1_000_000, NO_LIMIT)
        self.duration = double_box(0.0, 86_400.0, 5.0, " s", decimals=1, special=NO_LIMIT)
        self.tokens_min = int_box(1, 1_000_000)
        self.tokens_max = int_box(1, 1_000_000)
        self.sampling = QComboBox()
        for text, key in SAMPLING_CHOICES:
            self.sampling.addItem(text, key)
        self.temperature = double_box(0.0, 5.0, 0.05)
        self.temperature_max = double_box(0.0, 5.0, 0.05)
        self.top_p = double_box(0.01, 1.0, 0.01)
        self.top_p_min = double_box(0.01, 1.0, 0.01)
        self.cancel = double_box(0.0, 1.0, 0.05)
        self.concurrency = int_box(1, 4096)
        self.seed = int_box(-1, 2**31 - 1, "random")
        # goodput limits (app/simulator/goodput.py); 0 shows "none" and means no limit
        self.slo_ttft = double_box(0.0, 3600.0, 0.1, " s", decimals=2, special="none")
        self.slo_tpot = double_box(0.0, 60.0, 0.01, " s", decimals=3, special="none")
        self.slo_e2e = double_box(0.0, 3600.0, 1.0, " s", decimals=1, special="none")
        self.slo_ttft.setObjectName("simSloTtft")
        self.slo_tpot.setObjectName("simSloTpot")
        self.slo_e2e.setObjectName("simSloE2e")

        gap_row, _ = _pair(self.low, self.high)
        burst_row, _ = _pair(self.burst_size, self.burst_every, "every")
        tokens_row, _ = _pair(self.tokens_min, self.tokens_max)
        temp_row, self._temp_sep = _pair(self.temperature, self.temperature_max)
        top_p_row, self._top_p_sep = _pair(self.top_p_min, self.top_p)

        self.form = form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Arrivals", self.arrival)
        form.addRow("Gap", gap_row)
        form.addRow("Rate", self.rate)
        form.addRow("Burst size", burst_row)
        form.addRow("Requests", self.requests)
        form.addRow("Duration", self.duration)
        form.addRow("Max tokens", tokens_row)
        form.addRow("Sampling", self.sampling)
        form.addRow("Temperature", temp_row)
        form.addRow("Top-p", top_p_row)
        form.addRow("Cancel prob.", self.cancel)
        form.addRow("Concurrency", self.concurrency)
        form.addRow("Seed", self.seed)
        form.addRow("TTFT limit", self.slo_ttft)
        form.addRow("TPOT limit", self.slo_tpot)
        form.addRow("E2E limit", self.slo_e2e)
        self._rows = {"uniform": gap_row, "poisson": self.rate, "burst": burst_row}
        for widget, tip in (
            (self.arrival, "How requests arrive: uniform random gaps, a Poisson process, "
                           "or bursts sent all at once."),
            (gap_row, "Wait between requests: uniformly random between these."),
            (self.rate, "Mean arrival rate of the Poisson process."),
            (burst_row, "Send this many requests at once, then wait this long."),
            (self.requests, "Stop sending after this many requests (0: no limit)."),
            (self.duration, "Stop sending after this long (0: no limit). Requests already "
                            "sent run to their end."),
            (tokens_row, "Each request's max tokens, drawn uniformly from this range."),
            (self.sampling, "Fixed: every request uses these values. Randomized: each "
                            "request draws them from the ranges."),
            (self.cancel, "Chance that a request is cancelled part-way through its reply."),
            (self.concurrency, "The engine's concurrency limit during the run (restored "
                               "afterwards). Chat tabs are always admitted first."),
            (self.slo_ttft, "Goodput: a request counts only if its first text came within "
                            "this long (none: no limit)."),
            (self.slo_tpot, "Goodput: (E2E − TTFT) / (tokens − 1) at most this (none: no "
                            "limit)."),
            (self.slo_e2e, "Goodput: the whole reply within this long (none: no limit)."),
            (self.seed, "Repeats a run's prompts, gaps, max tokens and sampling settings "
                        "(random: new every run). Token sampling itself stays random."),
        ):
            widget.setToolTip(tip)

        buttons = QHBoxLayout()
        buttons.addWidget(QLabel("Prompt templates"), 1)
        buttons.addWidget(self.reset_button)
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.addLayout(buttons)
        col.addWidget(self.templates, 1)
        col.addLayout(form)

        self.set_config(SimConfig())
        self.templates.textChanged.connect(self._edited)
        self.arrival.currentIndexChanged.connect(lambda _i: self._edited())
        self.sampling.currentIndexChanged.connect(lambda _i: self._edited())
        for box in (self.low, self.high, self.rate, self.burst_size, self.burst_every,
                    self.requests, self.duration, self.tokens_min, self.tokens_max,
                    self.temperature, self.temperature_max, self.top_p, self.top_p_min,
                    self.cancel, self.concurrency, self.seed, self.slo_ttft, self.slo_tpot,
                    self.slo_e2e):
            box.valueChanged.connect(lambda _v: self._edited())

    # -- reading and writing ------------------------------------------------------------
    def config(self) -> SimConfig:
        """What the form says (not validated)."""
        lines = self.templates.toPlainText().splitlines()
        return SimConfig(
            templates=[line for line in lines if line.strip()],
            topics=list(self._topics),
            arrival=self.arrival.currentData(),
            uniform_low_s=self.low.value(), uniform_high_s=self.high.value(),
            rate=self.rate.value(),
            burst_size=self.burst_size.value(), burst_every_s=self.burst_every.value(),
            num_requests=self.requests.value() or None,
            duration_s=self.duration.value() or None,
            max_tokens_min=self.tokens_min.value(), max_tokens_max=self.tokens_max.value(),
            sampling=self.sampling.currentData(),
            temperature=self.temperature.value(), top_p=self.top_p.value(),
            temperature_max=self.temperature_max.value(), top_p_min=self.top_p_min.value(),
            cancel_probability=self.cancel.value(),
            max_concurrent=self.concurrency.value(),
            seed=None if self.seed.value() < 0 else self.seed.value(),
            slo_ttft_s=self.slo_ttft.value() or None, slo_tpot_s=self.slo_tpot.value() or None,
            slo_e2e_s=self.slo_e2e.value() or None,
        )

    def set_config(self, cfg: SimConfig) -> None:
        self.blockSignals(True)  # one `changed` at the end, not one per field
        try:
            self.templates.setPlainText("\n".join(cfg.templates))
            self._topics = list(cfg.topics)
            self.arrival.setCurrentIndex(max(0, self.arrival.findData(cfg.arrival)))
            self.low.setValue(cfg.uniform_low_s)
            self.high.setValue(cfg.uniform_high_s)
            self.rate.setValue(cfg.rate)
            self.burst_size.setValue(cfg.burst_size)
            self.burst_every.setValue(cfg.burst_every_s)
            self.requests.setValue(cfg.num_requests or 0)
            self.duration.setValue(cfg.duration_s or 0.0)
            self.tokens_min.setValue(cfg.max_tokens_min)
            self.tokens_max.setValue(cfg.max_tokens_max)
            self.sampling.setCurrentIndex(max(0, self.sampling.findData(cfg.sampling)))
            self.temperature.setValue(cfg.temperature)
            self.temperature_max.setValue(cfg.temperature_max)
            self.top_p.setValue(cfg.top_p)
            self.top_p_min.setValue(cfg.top_p_min)
            self.cancel.setValue(cfg.cancel_probability)
            if cfg.max_concurrent is not None:
                self.concurrency.setValue(cfg.max_concurrent)
            self.seed.setValue(-1 if cfg.seed is None else cfg.seed)
            self.slo_ttft.setValue(cfg.slo_ttft_s or 0.0)
            self.slo_tpot.setValue(cfg.slo_tpot_s or 0.0)
            self.slo_e2e.setValue(cfg.slo_e2e_s or 0.0)
        finally:
            self.blockSignals(False)
        self._edited()

    def set_engine_limits(self, current: int, highest: int) -> None:
        """The engine's concurrency limit now (the default) and the most it accepts."""
        self.concurrency.setMaximum(max(1, highest))
        self.concurrency.setValue(current)

    def reset_templates(self) -> None:
        self.templates.setPlainText("\n".join(default_prompt_set().templates))

    # -- internals ----------------------------------------------------------------------
    def _edited(self) -> None:
        self._show_relevant()
        if not self.signalsBlocked():
            self.changed.emit()

    def _show_relevant(self) -> None:
        arrival = self.arrival.currentData()
        for key, row in self._rows.items():
            self.form.setRowVisible(row, key == arrival)
        randomized = self.sampling.currentData() == "random"
        for widget in (self.temperature_max, self._temp_sep, self.top_p_min, self._top_p_sep):
            widget.setVisible(randomized)
