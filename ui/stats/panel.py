"""The live engine stats panel: a dock with numbers, charts and a per-request table.

A StatsModel (app/stats/model.py) polls the engine every 0.5 s whether or not the dock is
shown (so the charts have history and snapshots reach the history store); the widgets are
built on first show (pyqtgraph loads then) and repainted only while the dock is visible.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QGridLayout,
    QGroupBox,
    QLabel,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app import kv_bits as kv
from app import speculative as spec
from app.context import AppContext
from app.stats.model import INTERVAL_S, Latency, ModelLoaded, StatsModel

from ..model_words import plain_description
from ..reflow import ReflowGrid, narrow_label, scrolled
from .server_box import ServerStatsBox

TTFT_TIP = ("Time to first token: submit -> first token, over the requests the engine "
            "finished most recently (up to 1024).")
ITL_TIP = ("Inter-token latency: every sequence in a decode tick gets one token at the end of "
           "the tick, its previous one at the end of the tick before; so each decode tick in "
           "the engine's telemetry (last 1024 ticks) counts the time since the previous tick "
           "ended, once per sequence it decoded.")
HIT_TIP = "Share of admitted prompt tokens that came from the prefix cache (not computed)."
DISK_TIP = "Conversations' KV saved across restarts: files and their size."
PROCESS_TIP = ("This process's resident memory (RSS), of its bound: its memory once the model "
               "was ready, plus the KV budget, plus 512 MiB for activations, copies and the "
               "allocator's spare (docs/memory.md). Shown in red above the bound.")
KV_TIP = ("KV memory set aside by running requests plus held by cached prefixes, of the "
          "engine's KV budget (cached prefixes are evicted when running requests need room).")
KV_FORM_TIP = ("How the engine keeps each token's keys and values (Preferences → KV cache; "
               "applies at a model load), and how many tokens of context one MiB of KV "
               "holds over all layers: 8-bit holds 1.8 to 3.6 times float's (float16 or "
               "float32), 4-bit 2.7 to 5.3 times, for answers a little (8-bit) or clearly "
               "(4-bit) further from float's.")

MODEL_TIP = ("The engine's numbers count from when this model was loaded. The charts keep "
             "the minutes before, with a dashed line where the model changed; snapshots "
             "saved before stay in the history.")
CHOICE_TIP = ("Each loaded model has its own engine and its own figures: choose whose the "
              "numbers, charts and requests below are.")

GAPS_TIP = ("The gaps between a stream's tokens as its tokens come out, all streams, over the "
            "engine's recent window: the 99th percentile and the largest. A large gap is a "
            "stall, e.g. while another chat's prompt is read.")
ACCEPT_TIP = ("Share of drafted tokens the model agreed with, since the engine started: "
              "each accepted one is a token got without a step of its own.")
STEP_TIP = ("Tokens a decoding chat got per step, since the engine started (1.00 without "
            "speculative decoding).")

# (key, label, tooltip) per group; values are filled in by StatsPanel._show_numbers
GROUPS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    ("Requests", (
        ("active", "active", "admitted: prefilling or generating"),
        ("prefilling", "prefilling", ""),
        ("generating", "generating", ""),
        ("queued", "queued", "waiting for a free slot"),
        ("completed", "completed", "finished normally (stop, length, context)"),
        ("cancelled", "cancelled", "cancelled or ended by a shutdown"),
        ("failed", "failed", "ended with an error"),
    )),
    ("Throughput", (
        ("tokens_per_s", "tokens/s", "generated tokens over the engine's recent window"),
        ("batch_size", "batch size", "sequences in the current decode step"),
        ("mean_batch", "mean batch", "decode rows per decoding tick, recent window"),
        ("generated", "generated tokens", "all generated tokens since the engine started"),
        ("prompt", "prompt tokens", "all prefilled prompt tokens since the engine started"),
    )),
    ("Ticks", (
        ("step_ms", "step time", "the last tick's time"),
        ("step_ewma_ms", "step time (avg)", "moving average the budget follows"),
        ("budget", "token budget", "tokens the next tick may process (adaptive)"),
        ("ticks", "ticks", ""),
        ("memory", "memory", "MLX active memory"),
        ("peak_memory", "peak memory", "MLX peak memory"),
    )),
    ("Speculative decoding", (
        ("spec_mode", "mode", "Chat → Speculative decoding; applies when a model loads"),
        ("acceptance", "drafts accepted", ACCEPT_TIP),
        ("tokens_per_step", "tokens / step", STEP_TIP),
        ("drafted", "accepted / drafted", "draft tokens accepted, of those checked, since "
                                          "the engine started"),
    )),
    ("Latency (p50 / p90 / p99)", (
        ("ttft", "TTFT", TTFT_TIP),
        ("itl", "ITL", ITL_TIP),
        ("gaps", "gaps p99 / max", GAPS_TIP),
    )),
    ("Conversation memory", (
        ("hit_rate", "hit rate", HIT_TIP),
        ("hits", "requests hit", "requests that reused at least one cached token, of all "
                                 "admitted"),
        ("kv_form", "KV cache", KV_FORM_TIP),
        ("kv", "KV in use", KV_TIP),
        ("running", "running", "KV set aside by running requests (their longest possible "
                               "sequence)"),
        ("cached", "cached", "KV held by cached prefixes, and their tokens"),
        ("entries", "entries", "cached prefixes, and how many were evicted (least recently "
                               "used) to make room for running requests"),
        ("disk", "on disk", DISK_TIP),
        ("process", "process", PROCESS_TIP),
    )),
)
DOCK_MIN_WIDTH = 200  # narrow enough for chat (480) + settings panel + dock in 900 px
# Groups sharing a column, top to bottom (the others have a column each).
STACKED = ("Speculative decoding", "Latency (p50 / p90 / p99)", "Conversation memory")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _pct(lat: Latency) -> str:
    if not lat.count:
        return "–"
    return f"{lat.p50 * 1000:.0f} / {lat.p90 * 1000:.0f} / {lat.p99 * 1000:.0f} ms"


class StatsPanel(QWidget):
    """The dock's content: `values[key]` are the number labels, `charts`, `table`."""

    def __init__(self, history_s: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from .charts import StatsCharts  # pyqtgraph loads with the first panel
        from .table import RequestTableModel, make_table_view

        self.values: dict[str, QLabel] = {}
        boxes: list[QWidget] = []
        stack = QVBoxLayout()
        stacked = QWidget()
        stack.setContentsMargins(0, 0, 0, 0)
        stacked.setLayout(stack)
        for title, fields in GROUPS:
            box = QGroupBox(title)
            grid = QGridLayout(box)
            grid.setContentsMargins(6, 4, 6, 4)
            grid.setVerticalSpacing(1)
            for i, (key, label, tip) in enumerate(fields):
                name, value = narrow_label(label), narrow_label("–")
                value.setObjectName(f"stat_{key}")
                value.setAlignment(Qt.AlignmentFlag.AlignRight)
                value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
                if tip:
                    name.setToolTip(tip)
                    value.setToolTip(tip)
                grid.addWidget(name, i, 0)
                grid.addWidget(value, i, 1)
                self.values[key] = value
            if title in STACKED:
                stack.addWidget(box)
            else:
                boxes.append(box)
        stack.addStretch(1)
        # Reflows to fewer columns in a narrow dock (the chat keeps its width).
        numbers = ReflowGrid([*boxes, stacked], column_width=260, max_columns=4)
        self.charts = StatsCharts(history_s)
        self.table_model = RequestTableModel(self)
        self.table = make_table_view(self.table_model)

        split = QSplitter(Qt.Orientation.Vertical)
        split.setChildrenCollapsible(False)
        split.addWidget(self.charts)
        split.addWidget(self.table)
        split.setSizes([300, 200])
        self.table.setMinimumHeight(120)
        # which model the numbers are of: they start from zero with each model
        self.model_line = QLabel()
        self.model_line.setObjectName("statsModelLine")
        self.model_line.setWordWrap(True)
        self.model_line.setToolTip(MODEL_TIP)
        # whose figures: the default model's or one loaded beside it (hidden without those)
        self.model_choice = QComboBox()
        self.model_choice.setObjectName("statsModelChoice")
        self.model_choice.setToolTip(CHOICE_TIP)
        self.model_choice.hide()
        col = QVBoxLayout(self)
        col.setContentsMargins(4, 4, 4, 4)
        col.addWidget(self.model_choice)
        col.addWidget(self.model_line)
        col.addWidget(numbers)
        col.addWidget(split, 1)

    def show_model(self, model: StatsModel, now: float) -> None:
        s = model.stats
        if s is None:
            for label in self.values.values():
                _set(label, "–")
        else:
            for key, text in (
                ("active", str(s.active)), ("prefilling", str(s.prefilling)),
                ("generating", str(s.decoding)), ("queued", str(s.queued)),
                ("completed", str(s.completed)), ("cancelled", str(s.cancelled)),
                ("failed", str(s.failed)), ("tokens_per_s", f"{s.tokens_per_s:.1f}"),
                ("batch_size", str(s.batch_size)), ("mean_batch", f"{s.mean_batch_size:.1f}"),
                ("generated", str(s.total_generated_tokens)),
                ("prompt", str(s.total_prompt_tokens)),
                ("step_ms", _ms(s.step_s)), ("step_ewma_ms", _ms(s.step_s_ewma)),
                ("budget", str(s.budget)), ("ticks", str(s.ticks)),
                ("memory", _mib(s.memory_bytes)), ("peak_memory", _mib(s.peak_memory_bytes)),
                ("ttft", _pct(model.ttft)), ("itl", _pct(model.itl)),
                ("gaps", f"{s.itl_p99_s * 1000:.0f} / {s.itl_max_s * 1000:.0f} ms"
                 if s.itl_max_s else "–"),
                *_speculation(s),
                ("kv_form", kv_form(s)),
                *(model.memory.texts() if model.memory is not None else ()),
            ):
                _set(self.values[key], text)
            if model.memory is not None:
                over = "color: #c62828;" if model.memory.over_bound else ""
                if self.values["process"].styleSheet() != over:
                    self.values["process"].setStyleSheet(over)
                for key, tip in (("disk", f"{DISK_TIP} {model.memory.disk_detail}."),
                                 ("kv", f"{KV_TIP} {model.memory.kv_detail}".strip())):
                    if self.values[key].toolTip() != tip:
                        self.values[key].setToolTip(tip)
        self._show_choices(model)
        _set(self.model_line, model_line(model.model))
        self.charts.update_from(model.samples, now, model.loaded)
        self.table_model.set_rows(model.rows)


    def _show_choices(self, model: StatsModel) -> None:
        """The chooser's items: the default model, then each model loaded beside it."""
        names = model.choices()
        items = [(DEFAULT_CHOICE, None), *((f"Model: {n}", n) for n in names)]
        combo = self.model_choice
        if [(combo.itemText(i), combo.itemData(i)) for i in range(combo.count())] != items:
            combo.clear()
            for text, data in items:
                combo.addItem(text, data)
        index = combo.findData(model.chosen) if model.chosen is not None else 0
        if combo.currentIndex() != index:
            combo.setCurrentIndex(index)
        combo.setVisible(bool(names))


DEFAULT_CHOICE = "The default model"


def _speculation(s: Any) -> tuple[tuple[str, str], ...]:
    # s: engine.public.EngineStats (ui imports no engine, not even for its types)
    rate = s.acceptance_rate
    return (("spec_mode", spec.label(s.speculative)),
            ("acceptance", f"{rate:.0%}" if rate is not None else "–"),
            ("tokens_per_step", f"{s.tokens_per_step:.2f}" if s.decode_row_steps else "–"),
            ("drafted", f"{s.accepted_tokens} / {s.drafted_tokens}"))


def kv_form(s: Any) -> str:
    """ "8-bit · 1,234 tokens/MiB" (s: EngineStats; kv_bits 0 is the model's float)."""
    per_mib = f" · {s.kv_tokens_per_mib:,.0f} tokens/MiB" if s.kv_tokens_per_mib else ""
    return kv.label(s.kv_bits) + per_mib


def model_line(loaded: ModelLoaded | None) -> str:
    if loaded is None:
        return "No model is serving."
    return f"Model: {plain_description(loaded.name)}, loaded {loaded.at} — figures since then"


def _set(label: QLabel, text: str) -> None:
    if label.text() != text:  # an unchanged label costs no relayout
        label.setText(text)


class StatsDock(QDockWidget):
    """Polls every 0.5 s; repaints only while visible. `titles()` maps request tags to tab
    titles (for the table's Source column)."""

    def __init__(self, ctx: AppContext, titles: Callable[[], Mapping[str, str]],
                 parent: QWidget | None = None) -> None:
        super().__init__("Engine stats", parent)
        self.setObjectName("statsDock")
        self.setAllowedAreas(Qt.DockWidgetArea.AllDockWidgetAreas)
        self.titles = titles
        self.ctx = ctx
        self.server_box: ServerStatsBox | None = None
        self.model = StatsModel(ctx)
        self.panel: StatsPanel | None = None
        self.refreshes = 0
        self.refresh_s = 0.0  # time spent in refresh(), for measurements
        self._timer = QTimer(self)
        self._timer.setInterval(int(INTERVAL_S * 1000))
        self._timer.timeout.connect(self._tick)
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        if self.server_box is not None:
            self.server_box.detach()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self.panel is None:
            self.panel = StatsPanel(self.model.history_s)
            # a connection's server load, above the engine's numbers (app/remote/metrics.py)
            self.server_box = ServerStatsBox(self.ctx)
            self.panel.layout().insertWidget(0, self.server_box)
            self.panel.model_choice.activated.connect(self._choose)
            self.setWidget(scrolled(self.panel, DOCK_MIN_WIDTH))
        self.refresh()

    def _choose(self, index: int) -> None:
        """Show the figures of the model chosen (None: the default one)."""
        assert self.panel is not None
        self.model.chosen = self.panel.model_choice.itemData(index)
        self.refresh(poll=True)

    def _tick(self) -> None:
        self.model.poll()
        if self.isVisible():
            self.refresh(poll=False)

    def refresh(self, poll: bool = False) -> None:
        """Show the latest numbers (`poll=True` reads the engine first, as tests do)."""
        if self.panel is None:
            return
        started = time.perf_counter()
        if poll:
            self.model.poll()
        self.model.read_details(self.titles())
        self.panel.show_model(self.model, self.model.clock())
        self.refreshes += 1
        self.refresh_s += time.perf_counter() - started
