"""Drive the real window: N tabs stream at once while a LagProbe measures event-loop lag.

Used by test_event_loop_lag.py (tiny model) and runnable by hand on the bundled model
(numbers in docs/app.md):

    python -m tests.ui.lag_run --model bundled --tabs 8 --max-tokens 96
    python -m tests.ui.lag_run --model bundled --tabs 4 --screenshot docs/screenshot-tabs.png
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    from engine.blas import ensure_fast_blas

    ensure_fast_blas()
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="bundled")
    p.add_argument("--tabs", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--screenshot", default=None)
    p.add_argument("--shot-after", type=int, default=40)
    args = p.parse_args()

    from app.context import AppContext
    from app.settings import Settings
    from ui.event_loop import make_app, make_loop
    from ui.style import load_stylesheet

    app = make_app(["lag_run"])
    app.setStyleSheet(load_stylesheet())
    loop = make_loop(app)
    window = MainWindow(AppContext.create(settings=Settings(None)))
    window.show()

    async def run() -> LagResult:
        if not await window.ctx.bridge.load(args.model):
            raise SystemExit(window.ctx.bridge.message)
        result = await stream_tabs(window, args.tabs, args.max_tokens, args.screenshot,
                                   args.shot_after)
        await window.ctx.bridge.shutdown(3.0)
        return result

    with loop:
        r = loop.run_until_complete(run())
    print(f"{args.tabs} tabs, {r.tokens} tokens in {r.wall_s:.1f} s "
          f"({r.tokens / r.wall_s:.1f} tok/s), {r.frames} UI flushes; event-loop lag of a "
          f"10 ms timer: {r.summary()}; UI thread CPU {r.ui_cpu_s:.2f} s "
          f"({100 * r.ui_cpu_s / r.wall_s:.0f} % of the run)")


if __name__ == "__main__":
    main()
