"""Drive the real window: N tabs stream at once while a LagProbe measures event-loop lag.

Used by test_event_loop_lag.py and test_stats_panel.py (tiny model), and by the runs by
hand on the bundled model in tools/measure/ (lag_run.py, stats_run.py, memory_session.py;
numbers in docs/app.md).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication

from tests.ui.lag_probe import LagProbe
from ui.main_window import MainWindow

PROMPTS = [
    "Write a Python function that reverses a string, with a short explanation.",
    "Give me three tips for learning to play the guitar.",
    "Explain what a hash map is in two paragraphs.",
    "Write a haiku about continuous batching.",
    "What is the capital of France, and what is it famous for?",
    "List five healthy breakfast ideas as a Markdown list.",
    "Explain recursion to a ten-year-old.",
    "Write a short SQL query that counts rows per day in a table named events.",
]


@dataclass
class LagResult:
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    wall_s: float
    tokens: int
    frames: int
    ui_cpu_s: float = 0.0  # CPU time of the UI thread over the run (less noisy than lag)
    # The same lag once every tab has sent (the sends are the run's costliest UI work: a
    # message's widgets, tokenizing its prompt; each is one loop turn, as a key press is)
    streaming_samples: int = 0
    streaming_p99_ms: float = 0.0
    streaming_max_ms: float = 0.0

    def summary(self) -> str:
        return (f"lag p50 {self.p50_ms:.1f} ms, p99 {self.p99_ms:.1f} ms, max "
                f"{self.max_ms:.1f} ms ({self.samples} samples); after the sends: p99 "
                f"{self.streaming_p99_ms:.1f} ms, max {self.streaming_max_ms:.1f} ms "
                f"({self.streaming_samples} samples)")


async def stream_tabs(window: MainWindow, tabs: int, max_tokens: int,
                      screenshot: str | None = None, shot_after_tokens: int = 40,
                      timeout_s: float = 600.0) -> LagResult:
    """Open `tabs` tabs (reusing the first), send one prompt in each, wait for all replies."""
    chat_tabs = [window.current_tab()] + [window.new_tab() for _ in range(tabs - 1)]
    for i, tab in enumerate(chat_tabs):
        window.set_tab_title(tab, PROMPTS[i % len(PROMPTS)].split()[0] + f" {i + 1}")
        tab.panel.fields["max_tokens"].setValue(max_tokens)
        tab.panel.fields["seed"].setValue(i)
        tab.input.setPlainText(PROMPTS[i % len(PROMPTS)])
    probe = LagProbe(10)
    frames0 = window.ctx.bridge.num_flushes
    started = time.perf_counter()
    cpu0 = time.thread_time()  # this coroutine runs on the UI thread
    probe.start()
    for tab in chat_tabs:
        tab.send_text(tab.input.toPlainText())
        await asyncio.sleep(0)  # one send per loop turn, as a person's Enter presses come
    sent = len(probe.samples_ms)
    window.tabs.setCurrentWidget(chat_tabs[0])
    shot_taken = screenshot is None
    while any(t.conversation.is_busy for t in chat_tabs):
        await asyncio.sleep(0.05)
        if time.perf_counter() - started > timeout_s:
            raise TimeoutError("replies did not finish")
        if not shot_taken and all(
                len(t.conversation.generation.stream.tokens) >= shot_after_tokens
                for t in chat_tabs if t.conversation.is_busy):
            QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)  # settle heights
            window.grab().save(screenshot)
            shot_taken = True
    probe.stop()
    cpu = time.thread_time() - cpu0
    wall = time.perf_counter() - started
    tokens = sum(len(t.conversation.generations[-1].stream.tokens) for t in chat_tabs)
    return LagResult(len(probe.samples_ms), probe.percentile(50), probe.percentile(99),
                     max(probe.samples_ms, default=0.0), wall, tokens,
                     window.ctx.bridge.num_flushes - frames0, cpu,
                     len(probe.samples_ms) - sent, probe.percentile(99, since=sent),
                     max(probe.samples_ms[sent:], default=0.0))
