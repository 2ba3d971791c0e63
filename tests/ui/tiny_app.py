"""The real app on the tiny test model, for end-to-end tests (test_history_sigkill.py):

    python -m tests.ui.tiny_app --db PATH

the launcher's start-up (app.main, ui.startup), with the tiny random-weight model instead of a
real one (it has no end token, so replies run to max_tokens). Options as `python -m batchchat`.

BATCHCHAT_TEST_AUTOSEND='[["prompt", max_tokens], ...]'
    Once the model is ready, send these in the current tab, each after the previous reply
    ended, greedy, and print progress lines to stdout:
    "autosend finished <i>" and "autosend streamed <chars>" (about every 0.1 s).

BATCHCHAT_TEST_WINDOW_SIZE='WIDTHxHEIGHT'
    Resize the window to this before it shows (saved in settings.json only at a clean quit).

BATCHCHAT_TEST_ATTACH='PATH'
    Once the model is ready, attach this file in the current tab and print
    "attach <stage> <percent>" each time its chip's progress changes (a file too long to go
    in whole is indexed), then "attach counted" when its tokens are counted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from app.bridge import BridgeState
from app.main import prepare

if TYPE_CHECKING:  # mlx loads only after prepare() (it may re-execute with OpenBLAS)
    from engine import Engine
    from ui.main_window import MainWindow

AUTOSEND_ENV = "BATCHCHAT_TEST_AUTOSEND"
WINDOW_SIZE_ENV = "BATCHCHAT_TEST_WINDOW_SIZE"
ATTACH_ENV = "BATCHCHAT_TEST_ATTACH"
GREEDY: dict[str, Any] = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
          "repetition_penalty": 1.0, "seed": None, "stop": []}


def load_tiny_engine(_source: str) -> Engine:
    from engine import Engine, EngineConfig
    from tests.tiny_model import make_tiny_model

    tiny = make_tiny_model(context_length=16384)
    return Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                  context_length=tiny.context_length,
                  config=EngineConfig(max_concurrent=4), description="tiny test model")


def install_autosend(window: MainWindow) -> None:
    raw = os.environ.get(AUTOSEND_ENV)
    if not raw:
        return
    queue: list[list[Any]] = json.loads(raw)
    bridge = window.ctx.bridge
    state = {"sent": 0, "printed": 0.0}

    def send_next() -> None:
        tab = window.current_tab()
        if tab is None or not queue:
            return
        prompt, max_tokens = queue.pop(0)
        tab.panel.set_params(GREEDY | {"max_tokens": int(max_tokens)})  # as a user would
        tab.conversation.send(prompt)
        state["sent"] += 1

    def on_state(new: BridgeState, _message: str) -> None:
        if new == BridgeState.READY and state["sent"] == 0:
            tab = window.current_tab()
            if tab is not None:
                tab.conversation.busy_changed.connect(on_busy)
            send_next()

    def on_busy(busy: bool) -> None:
        if not busy:
            print(f"autosend finished {state['sent']}", flush=True)
            send_next()

    def on_frame() -> None:
        tab = window.current_tab()
        now = time.monotonic()
        if tab is None or not tab.conversation.messages or now - state["printed"] < 0.1:
            return
        state["printed"] = now
        print(f"autosend streamed {len(tab.conversation.messages[-1].content)}", flush=True)

    bridge.state_changed.connect(on_state)
    bridge.frame.connect(on_frame)


def install_attach(window: MainWindow) -> None:
    path = os.environ.get(ATTACH_ENV)
    if not path:
        return
    from PySide6.QtCore import QTimer

    said: list[str] = []
    watch = QTimer(window)  # the chip's progress, as often as the UI thread looks
    watch.setInterval(20)

    def look() -> None:
        tab = window.current_tab()
        chips = tab.chips.chips if tab is not None else []
        if not chips:
            return
        chip = chips[0]
        line = "attach counted" if chip.tokens is not None else (
            f"attach {chip.progress[0]} {chip.progress[1]}" if chip.progress else "")
        if line and (not said or said[-1] != line):
            said.append(line)
            print(line, flush=True)

    def on_state(new: BridgeState, _message: str) -> None:
        tab = window.current_tab()
        if new == BridgeState.READY and tab is not None and not watch.isActive():
            tab.attach_files([path])
            watch.timeout.connect(look)
            watch.start()

    window.ctx.bridge.state_changed.connect(on_state)


def install_test_hooks(window: MainWindow) -> None:
    install_autosend(window)
    install_attach(window)
    size = os.environ.get(WINDOW_SIZE_ENV)
    if size:
        width, height = (int(n) for n in size.split("x"))
        window.resize(width, height)


def main(argv: list[str] | None = None) -> int:
    args = prepare(argv)
    from ui.startup import run_window

    return run_window(args, loader=load_tiny_engine, on_window=install_test_hooks)


if __name__ == "__main__":
    sys.exit(main())
