"""Issue #51, in the window (offscreen, the tiny model): a file too long for the context is
indexed off the UI thread and its chip shows the index's real percentage meanwhile; with
an embedding model set, a send whose question is not embedded yet embeds it off the UI
thread (a slow embedder, and a timer on the UI thread that keeps ticking)."""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Sequence

from PySide6.QtCore import QTimer

from app.attachments import Attachment
from app.attachments.messages import shared_cache
from tests.ui.conftest import run_until

PERCENT = re.compile(r"indexing (\d+) %")


def _settled(loop, tab, timeout: float = 60.0) -> None:
    run_until(loop, lambda: not tab.chips.reading and all(
        c.tokens is not None for c in tab.chips.chips if isinstance(c.item, Attachment)),
        timeout=timeout)


def test_the_chip_shows_the_indexs_percentage_while_a_large_file_is_indexed(
        window, loop, tmp_path):
    rng = random.Random(7)
    words = [f"w{i}" for i in range(8000)]
    # ~2.3 MB: about two seconds of indexing on this machine, twice the CPU of 1.15 MB, most
    # of it the count. At 1.15 MB the chip showed 53-55 whole percents between 0 and 100 on
    # a quiet machine, but 2 in one CI run of three, where the UI thread's timer barely ran
    big = tmp_path / "ledger.txt"
    big.write_text("\n".join(" ".join(rng.choices(words, k=12)) for _ in range(40_000)))
    tab = window.current_tab()
    shown: list[str] = []
    watch = QTimer()  # what the chip says, as often as the UI thread can look
    watch.setInterval(2)
    watch.timeout.connect(lambda: [shown.append(c.label.text()) for c in tab.chips.chips])
    watch.start()
    tab.attach_files([str(big)])
    _settled(loop, tab)
    watch.stop()
    chip = tab.chips.chips[0]
    percents = [int(m.group(1)) for text in shown if (m := PERCENT.search(text))]
    between = sorted(set(p for p in percents if 0 < p < 100))
    assert len(between) >= 3, shown[-5:]  # intermediate values were on the chip
    assert percents == sorted(percents)  # it only rises
    assert all(text.startswith("ledger.txt · ") for text in shown if PERCENT.search(text))
    assert "indexing" not in chip.label.text() and f"{chip.tokens:,} tokens" in chip.label.text()
    assert chip.tokens > 8192 and chip.progress is None


class SlowEmbedder:
    """Word-hash vectors after a long wait a call; records the thread of each call."""

    name = "slow-hash-64"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls: list[tuple[str, list[str]]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append((threading.current_thread().name, list(texts)))
        time.sleep(self.seconds)
        out = []
        for text in texts:
            v = [0.0] * 64
            for word in text.lower().split():
                v[hash(word) % 64] += 1.0
            norm = sum(x * x for x in v) ** 0.5 or 1.0
            out.append([x / norm for x in v])
        return out


def test_a_sends_question_is_embedded_off_the_ui_thread(window, loop, tmp_path, monkeypatch):
    embedder = SlowEmbedder(seconds=1.5)
    monkeypatch.setattr(shared_cache(), "embedder", embedder)
    big = tmp_path / "gates.txt"  # 12,000 byte tokens against the 8,192-token context
    lines = [f"line {i} of the gate log, nothing to see" for i in range(300)]
    lines[211] = "The Heron gate opens at dawn on Thursdays."
    big.write_text("\n".join(lines))
    tab = window.current_tab()
    tab.attach_files([str(big)])
    _settled(loop, tab)  # the chunks' vectors are made while it is counted
    assert embedder.calls and all(t != threading.main_thread().name for t, _ in embedder.calls)
    question = "When does the Heron gate open?"
    embedder.calls.clear()

    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(20)
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start()
    assert tab.send_text(question)  # not typed: no count has embedded it before
    assert tab.conversation.is_busy
    run_until(loop, lambda: not tab.conversation.is_busy
              and len(tab.conversation.messages) == 2, timeout=60)
    timer.stop()

    asked = [(t, texts) for t, texts in embedder.calls if question in texts]
    assert asked, embedder.calls  # the question was embedded for this send...
    assert all(t != threading.main_thread().name for t, _ in asked)  # ...off the UI thread
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    assert ticks and max(gaps) < 1.0, max(gaps)  # kept ticking: an embed here waits 1.5 s
    reply = tab.conversation.messages[1]
    assert reply.citations and any("Heron gate" in c.text for c in reply.citations)
