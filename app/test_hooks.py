"""TEST-ONLY switches for end-to-end tests that run the real app process
(tests/ui/test_history_sigkill.py). Never set them for real use.

BATCHCHAT_TEST_TINY_MODEL=1
    Serve the tiny random-weight model from tests/tiny_model.py (source checkout only)
    instead of loading a real one; it has no end token, so replies run to max_tokens.
BATCHCHAT_TEST_AUTOSEND='[["prompt", max_tokens], ...]'
    Once the model is ready, send these in the current tab, each after the previous reply
    ended, greedy, and print progress lines to stdout:
    "autosend finished <i>" and "autosend streamed <chars>" (about every 0.1 s).
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from .engine_bridge import BridgeState, EngineBridge

if TYPE_CHECKING:
    from engine import Engine
    from ui.main_window import MainWindow

TINY_ENV = "BATCHCHAT_TEST_TINY_MODEL"
AUTOSEND_ENV = "BATCHCHAT_TEST_AUTOSEND"
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
          "repetition_penalty": 1.0, "seed": None, "stop": []}


def tiny_bridge() -> EngineBridge | None:
    """A bridge whose loader builds the tiny test model, if TINY_ENV is set."""
    if not os.environ.get(TINY_ENV):
        return None

    def load(_source: str) -> Engine:
        from engine import Engine, EngineConfig
        from tests.tiny_model import make_tiny_model

        tiny = make_tiny_model(context_length=16384)
        return Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                      context_length=tiny.context_length,
                      config=EngineConfig(max_concurrent=4), description="tiny test model")

    return EngineBridge(loader=load)


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
