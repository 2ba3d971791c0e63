"""Per-tab sampling settings and presets; Markdown rendering; per-frame coalescing."""

from __future__ import annotations

import asyncio

from PySide6.QtGui import QTextFormat

from app.bridge import EngineBridge
from app.defaults import Defaults
from app.request.tab import tab_request
from app.settings import BUILTIN_PRESETS, Settings
from tests.ui.conftest import FAST, run_until
from ui.chat.markdown_view import CODE_BACKGROUND, MarkdownView


def test_settings_panel_drives_the_request(window, loop):
    tab = window.current_tab()
    panel = tab.panel
    panel.system.setPlainText("You are terse.")
    values = {"temperature": 0.8, "top_p": 0.9, "top_k": 40, "min_p": 0.1,
              "repetition_penalty": 1.2, "max_tokens": 7, "seed": 1234}
    for name, value in values.items():
        panel.fields[name].setValue(value)
    panel.stop.setPlainText("END\n\\n\\n")
    conv = tab.conversation
    assert conv.system_prompt == "You are terse."
    assert conv.params == values | {"stop": ["END", "\n\n"]}
    assert tab.send_text("hi")
    prompt = window.ctx.bridge.local.engine.tokenizer.decode(conv.generation.stream.prompt_tokens)
    assert prompt.startswith("<|im_start|>system\nYou are terse.")
    run_until(loop, lambda: not conv.is_busy)
    stats = conv.messages[1].stats
    assert stats.generated_tokens <= 7
    # the same seed gives the same reply
    first = conv.generations[-1]
    assert tab.regenerate()
    run_until(loop, lambda: not conv.is_busy)
    again = conv.generations[-1]
    assert again is not first
    assert (again.text, again.finish_reason) == (first.text, first.finish_reason)
    other = window.new_tab()  # settings are per tab
    assert other.conversation.params == FAST
    assert other.conversation.system_prompt != "You are terse."


def test_spin_boxes_keep_settings_valid(window):
    """Out-of-range input is clamped by the widgets, so the engine never refuses them."""
    tab = window.current_tab()
    tab.panel.stop.setPlainText("ok")
    tab.panel.fields["top_p"].setValue(0.5)
    assert tab.conversation.params["top_p"] == 0.5
    tab.panel.fields["temperature"].setValue(-1)  # clamped by the spin box
    assert tab.conversation.params["temperature"] == 0.0
    assert not tab.panel.error.isVisibleTo(tab.panel)


def test_presets_apply_save_and_persist(window, settings, tmp_path):
    panel = window.current_tab().panel
    assert panel.preset.currentText() == "Fast"
    panel.preset.setCurrentText("Precise")
    panel.preset.activated.emit(panel.preset.currentIndex())
    assert window.current_tab().conversation.params == BUILTIN_PRESETS["Precise"]
    panel.fields["max_tokens"].setValue(77)
    assert panel.preset.currentText() == "(custom)"
    panel.save_preset("Short")
    assert panel.preset.currentText() == "Short"
    other = window.new_tab().panel
    assert "Short" in [other.preset.itemText(i) for i in range(other.preset.count())]
    reloaded = Settings.load(settings.path)
    assert reloaded.preset("Short")["max_tokens"] == 77
    panel.save_preset("Balanced")  # built-ins are read-only
    assert "built-in" in panel.error.text()
    settings.delete_preset("Short")
    assert "Short" not in Settings.load(settings.path).preset_names()


def test_broken_settings_file_gives_defaults(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{not json", encoding="utf-8")
    s = Settings.load(path)
    assert s.defaults == Defaults() and s.model == "bundled"


def test_markdown_code_blocks_render(qtbot):
    view = MarkdownView()
    qtbot.addWidget(view)
    view.resize(400, 10)
    view.show()
    view.set_markdown("Some **bold** text.\n\n```python\nprint('hi')\n```\n")
    doc = view.document()
    assert "print('hi')" in doc.toPlainText()
    blocks = []
    block = doc.begin()
    while block.isValid():
        blocks.append(block)
        block = block.next()
    code = [b for b in blocks if "print" in b.text()][0]
    fmt = code.blockFormat()
    assert fmt.hasProperty(QTextFormat.Property.BlockCodeFence)
    assert fmt.background().color() == CODE_BACKGROUND
    assert view.height() > 30  # grew to fit its text


def test_deltas_are_coalesced_per_frame(loop, make_engine):
    """Many tokens from many requests: far fewer flushes than tokens, text intact."""
    bridge = EngineBridge(frame_s=0.05)
    loop.run_until_complete(bridge.use_engine(make_engine()))
    gens = [bridge.submit(tab_request([{"role": "user", "content": f"q{i}"}],
                                      FAST | {"max_tokens": 40})) for i in range(6)]
    deltas: dict[str, list[str]] = {g.request_id: [] for g in gens}
    for g in gens:
        g.delta.connect(lambda text, rid=g.request_id: deltas[rid].append(text))
    loop.run_until_complete(asyncio.wait_for(_all_finished(gens), 30))
    total_tokens = sum(len(g.stream.tokens) for g in gens)
    assert total_tokens == 240
    assert bridge.num_flushes < total_tokens / 3
    for g in gens:
        assert "".join(deltas[g.request_id]) == g.text and g.shown_chars == len(g.text)
        assert len(deltas[g.request_id]) <= bridge.num_flushes
    loop.run_until_complete(bridge.shutdown(1.0))


async def _all_finished(gens) -> None:
    while not all(g.is_finished for g in gens):
        await asyncio.sleep(0.01)
