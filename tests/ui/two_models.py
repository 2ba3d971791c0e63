"""Two real models for the window's several-models tests (issue #50): the default model (the
bundled one, the ModelHost's) and its Q8_0 copy made by gguf-py (the ModelManager's, loaded
when a tab first sends to it), and a tab picked onto one of them as a click would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.backend.local_target import load_target
from app.bridge import EngineBridge
from app.fleet import Catalog, ModelManager
from app.models.library import folder_models
from tests.fleet_models import bundled_path, requantize

from .conftest import run_until

KV = 64 << 20  # each engine's KV budget: room for a long reply, small beside the machine
OTHER = "smol-q8"
TOKENS = 48  # greedy, long enough that the two models' answers differ
LONG = 300  # a reply still streaming while the other model loads
PROMPT = "Write a short story about a lighthouse keeper."


def other_model_dir(tmp_path_factory: Any) -> Path:
    """The library's other model: the bundled model re-quantized as Q8_0 by gguf-py."""
    d = tmp_path_factory.mktemp("tab-models")
    requantize(bundled_path(), d / f"{OTHER}.gguf", "Q8_0")
    return d


def two_model_bridge(loop: Any, models_dir: Path, kv: int = KV) -> Iterator[EngineBridge]:
    """The default model: the bundled one; beside it a ModelManager over `models_dir`
    (a fixture's body: shut down after the test); `kv`: each engine's KV budget."""
    bridge = EngineBridge(
        loader=lambda source: load_target(source, kv_budget_bytes=kv, max_concurrent=8).engine)
    bridge.fleet = ModelManager(Catalog(lambda: folder_models(models_dir)),
                                kv_budget_bytes=kv, max_concurrent=8)
    assert loop.run_until_complete(bridge.load("bundled"))
    yield bridge
    loop.run_until_complete(bridge.shutdown(timeout=5.0))


def on_model(window: Any, model: str | None, tokens: int = TOKENS) -> Any:
    """A new tab on `model` (None: the default), picked in its header as a click would."""
    tab = window.new_tab()
    picker = tab.backend_picker
    if model is not None:
        index = picker.findData("model:" + model)
        assert index > 0, "the picker lists the library's other model"
        picker.setCurrentIndex(index)
        picker.activated.emit(index)
    assert tab.conversation.model == model and tab.conversation.backend is None
    tab.panel.fields["max_tokens"].setValue(tokens)
    return tab


def reply_of(tab: Any, loop: Any) -> Any:
    run_until(loop, lambda: not tab.conversation.is_busy, timeout=120)
    reply = tab.conversation.messages[-1]
    assert reply.role == "assistant" and reply.finish_reason in ("length", "stop")
    return reply
