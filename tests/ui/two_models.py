"""Two real models for the window's several-models tests (issue #50): the default model (the
bundled one, the ModelHost's) and its Q8_0 copy made by gguf-py (the ModelManager's, loaded
when a tab first sends to it), and a tab picked onto one of them as a click would."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from filelock import FileLock

from app.backend.local_target import load_target
from app.bridge import EngineBridge
from app.fleet import Catalog, ModelManager
from app.models.library import folder_models
from tests import session_files
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


def model_file(models_dir: Path, model: str | None) -> Path:
    """The file a model of these tests loads from: the bundled one for the default."""
    return bundled_path() if model is None else models_dir / f"{model}.gguf"


@cache
def _hash_of(path: str, size: int, mtime_ns: int, inode: int) -> str:
    return session_files.file_hash(Path(path))


def _file_hash(path: Path) -> str:
    """The file's bytes' hash, once a process while it is unchanged (~0.2 CPU-s for the
    bundled model's 98 MB)."""
    st = path.stat()  # of the file a link names
    return _hash_of(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def _kept(tab: Any, model: str | None, source: Path, kv: int) -> Path | None:
    """Where the session keeps the reply alone of a tab set up as `tab` (None: no session)."""
    conv = tab.conversation
    assert conv.params["temperature"] == 0.0  # greedy: the same reply in any process
    if session_files.folder is None:
        return None
    facts = [model, _file_hash(source), PROMPT, conv.system_prompt,
             sorted(conv.params.items()), kv]
    key = hashlib.blake2b(json.dumps(facts, default=str).encode(), digest_size=16)
    session_files.folder.mkdir(parents=True, exist_ok=True)
    return session_files.folder / f"alone-{key.hexdigest()}.json"


def alone_reply(window: Any, loop: Any, model: str | None, source: Path,
                tokens: int = TOKENS, *, kv: int = KV) -> str:
    """The reply a new tab on `model` (loaded from `source`) gives PROMPT with nothing else
    running, greedy: the reference the several-model tests compare replies with.

    Kept for the test session (tests/session_files.py's folder, shared by the xdist
    workers), keyed by the model's name and file bytes, the tab's system prompt and
    settings and the engines' KV budget: tests ask the same ones, and a 300-token reply of
    the bundled model in the window took ~11 CPU-s. Sent here when no test has kept it."""
    tab = on_model(window, model, tokens)
    kept = _kept(tab, model, source, kv)

    def sent() -> str:
        assert tab.send_text(PROMPT), tab.notice.text()
        return reply_of(tab, loop).content

    if kept is None:
        return sent()
    with FileLock(str(kept) + ".lock"):
        if kept.exists():
            return json.loads(kept.read_text())
        content = sent()
        _write(kept, content)
    return content


def keep_alone(tab: Any, model: str | None, source: Path, content: str, *,
               kv: int = KV) -> None:
    """A reply alone that a test sent itself (its flow needed the send): kept as
    `alone_reply` keeps one, or, kept already, equal to it."""
    kept = _kept(tab, model, source, kv)
    if kept is None:
        return
    with FileLock(str(kept) + ".lock"):
        if kept.exists():
            assert json.loads(kept.read_text()) == content, "the same tab's reply alone"
        else:
            _write(kept, content)


def _write(kept: Path, content: str) -> None:
    part = kept.with_name(kept.name + ".part")
    part.write_text(json.dumps(content))
    part.replace(kept)  # whole or absent
