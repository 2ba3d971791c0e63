"""A tab's send of a pasted image on a tiny vision-language model (#52) runs the model's
image processor off the UI thread (which is the asyncio loop every tab streams on): the
token count under the box processes the draft's image on its worker thread, and the send
finds that work done (engine/vision/prepared.py); Regenerate too. A send made before the
count has processed the image processes it off the UI thread first, as a send with files
indexes them (the UI thread keeps ticking with a slow processor)."""

from __future__ import annotations

import threading
import time
from typing import Any

import mlx_vlm.utils
from PySide6.QtCore import Qt, QTimer

from app.bridge import EngineBridge
from engine import Engine
from tests.ui.conftest import run_until
from tests.ui.test_images_ui import _paste_image, _read
from tests.vision_models import make_tiny_vlm, png_bytes


def test_a_tab_s_image_is_processed_off_the_ui_thread(loop: Any, make_window: Any,
                                                      qtbot: Any, tmp_path: Any,
                                                      monkeypatch: Any) -> None:
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "vlm", "smolvlm")))
    real = mlx_vlm.utils.process_inputs
    ran: list[str] = []  # the thread of each processor run
    texts: list[str] = []  # the prompt text of each

    def spied(*args: Any, **kwargs: Any) -> Any:
        ran.append(threading.current_thread().name)
        texts.append(kwargs["prompts"][0])
        return real(*args, **kwargs)

    monkeypatch.setattr(mlx_vlm.utils, "process_inputs", spied)
    bridge = EngineBridge(loader=lambda source: engine)
    loop.run_until_complete(bridge.use_engine(engine, "tiny-vlm"))
    try:
        window = make_window(bridge)
        tab = window.current_tab()
        tab.panel.fields["max_tokens"].setValue(4)
        tab.panel.fields["temperature"].setValue(0.0)
        qtbot.keyClicks(tab.input, "What colour is it?")
        run_until(loop, lambda: tab.token_count.current and tab.token_count.size is not None)
        text_only = tab.token_count.size.tokens
        _paste_image(qtbot, tab, png_bytes((200, 10, 10)))
        _read(loop, tab)
        run_until(loop, lambda: tab.token_count.current and tab.token_count.size is not None
                  and tab.token_count.size.tokens != text_only)
        assert ran and threading.main_thread().name not in ran  # the count's worker
        sent, before = texts[-1], len(texts)
        ran.clear()
        qtbot.keyClick(tab.input, Qt.Key.Key_Return)
        run_until(loop, lambda: not tab.conversation.is_busy, timeout=60)
        assert tab.conversation.messages[-1].stats.generated_tokens == 4
        assert tab.regenerate()
        run_until(loop, lambda: not tab.conversation.is_busy, timeout=60)
        # the send and Regenerate found the processor's work done; the count of the next
        # draft (the chat so far) is the only run, on the count's worker
        assert sent not in texts[before:]
        assert set(ran) <= {"batchchat-count_0"}, ran
    finally:
        loop.run_until_complete(bridge.shutdown(timeout=2.0))


SLOW_S = 1.5  # a large photo's processing, as the UI thread would feel it


def test_a_send_before_the_count_processes_the_image_off_the_ui_thread(
        loop: Any, make_window: Any, qtbot: Any, tmp_path: Any, monkeypatch: Any) -> None:
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "vlm", "smolvlm")))
    real = mlx_vlm.utils.process_inputs
    ran: list[str] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        ran.append(threading.current_thread().name)
        time.sleep(SLOW_S)
        return real(*args, **kwargs)

    monkeypatch.setattr(mlx_vlm.utils, "process_inputs", slow)
    bridge = EngineBridge(loader=lambda source: engine)
    loop.run_until_complete(bridge.use_engine(engine, "tiny-vlm"))
    try:
        window = make_window(bridge)
        tab = window.current_tab()
        tab.panel.fields["max_tokens"].setValue(4)
        tab.panel.fields["temperature"].setValue(0.0)
        _paste_image(qtbot, tab, png_bytes((10, 200, 10)))
        _read(loop, tab)
        ticks: list[float] = []
        timer = QTimer()
        timer.setInterval(20)
        timer.timeout.connect(lambda: ticks.append(time.monotonic()))
        timer.start()
        assert tab.send_text("What colour is it?")  # at once: no count has processed it
        run_until(loop, lambda: not tab.conversation.is_busy
                  and len(tab.conversation.messages) == 2, timeout=60)
        timer.stop()
        assert tab.conversation.messages[-1].stats.generated_tokens == 4
        assert ran and threading.main_thread().name not in ran, ran
        gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
        # kept ticking: the processor on the UI thread stalls it SLOW_S
        assert ticks and max(gaps) < 1.0, max(gaps)
    finally:
        loop.run_until_complete(bridge.shutdown(timeout=2.0))
