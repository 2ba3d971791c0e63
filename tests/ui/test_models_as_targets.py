"""Issue #50, models as targets in the window: N answers run on the tab's own model and
Compare's columns on the models they name, each model's replies batched on its own engine
(the prompt prefilled once there), each answer the one that request gives alone on that
model; a draft's attached files are counted by the tokenizer of the tab's model.

Real engines: the default model (the bundled one), its Q8_0 copy (same tokenizer) and a
tiny random GGUF with a byte-level vocabulary of its own (another tokenizer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.attachments import Attachment
from app.attachments.framing import frame
from tests.fleet_models import tiny_gguf

from .conftest import run_until
from .two_models import OTHER, PROMPT, on_model, other_model_dir, reply_of, two_model_bridge

TINY = "tiny-vocab"  # the library model with another tokenizer
SEED = 11
# two prefill chunks (EngineConfig.prefill_burst 512): replies not told to share it each
# prefill it. Three rows of it and their replies need more than two_models' 64 MiB KV
# budget (there the followers' wait finds no cached prefix and each prefills it anyway)
LONG_PROMPT = PROMPT + " Some background first. " + "The lamp turns all night. " * 90
KV = 192 << 20


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: Any) -> Path:
    d = other_model_dir(tmp_path_factory)
    tiny_gguf(d / f"{TINY}.gguf", seed=3)
    return d


@pytest.fixture
def bridge(loop: Any, models_dir: Path) -> Any:
    yield from two_model_bridge(loop, models_dir, KV)


def seeded(tab: Any, seed: int) -> Any:
    tab.panel.fields["temperature"].setValue(1.0)
    tab.panel.fields["seed"].setValue(seed)
    return tab


def prompt_tokens_computed(bridge: Any, model: str | None) -> int:
    stats = bridge.stats(model)
    assert stats is not None
    return stats.total_prompt_tokens


def test_n_answers_run_on_the_tabs_own_model_batched_there(make_window, bridge, loop):
    window = make_window(bridge)
    tab = seeded(on_model(window, OTHER), SEED)
    tab.set_answers(3)
    assert tab.send_text(LONG_PROMPT)  # the model loads first, then the three start at once
    run_until(loop, lambda: not tab.conversation.is_busy, timeout=180)
    answers = tab.conversation.tree.siblings(tab.conversation.messages[-1])
    assert len(answers) == 3
    assert all(a.model == OTHER and a.finish_reason in ("length", "stop") for a in answers)
    assert [a.params["seed"] for a in answers] == [SEED, SEED + 1, SEED + 2]
    assert len({a.content for a in answers}) > 1  # three seeds, not one answer thrice
    # on the other model's fresh engine the prompt was prefilled once for all three
    prompt = answers[0].stats.prompt_tokens
    assert prompt_tokens_computed(bridge, OTHER) == prompt + 2
    assert bridge.running().total == 0  # nothing ran on the default model

    # each is the answer that request gives alone on that model
    for i, answer in enumerate(answers):
        solo = seeded(on_model(window, OTHER), SEED + i)
        assert solo.send_text(LONG_PROMPT)
        assert reply_of(solo, loop).content == answer.content


def test_compare_columns_batched_per_model(make_window, bridge, loop):
    """Columns on the default model, the other model and the other model again: the two on
    the other model share that engine's prefill (before, only replies on the first column's
    model did), and every column is its model's answer alone (greedy)."""
    from ui.compare.dialog import CompareDialog
    from ui.compare.targets import TAB_SETTINGS

    window = make_window(bridge)
    alone = {}
    for model in (None, OTHER):
        tab = on_model(window, model)
        assert tab.send_text(LONG_PROMPT)
        alone[model] = reply_of(tab, loop).content
    loop.run_until_complete(bridge.fleet.unload(OTHER))  # a fresh engine: no cached prefix

    tab = on_model(window, None)
    tab.input.setPlainText(LONG_PROMPT)
    window.actions_by_name["compare"].trigger()
    dialog = tab.findChild(CompareDialog)
    rows = dialog.target_list
    while len(rows.rows) < 3:
        rows.add_row()
    labels = (TAB_SETTINGS, f"{OTHER} · this tab's settings", f"{OTHER} · this tab's settings")
    for row, label in zip(rows.rows, labels, strict=True):
        index = row.combo.findText(label)
        assert index >= 0, f"{label!r} is offered"
        row.combo.setCurrentIndex(index)
        row.combo.activated.emit(index)
    assert [t.model for t in rows.targets()] == [None, OTHER, OTHER]
    assert dialog.send()
    run_until(loop, lambda: len(dialog.columns) == 3, timeout=60)
    run_until(loop, lambda: not tab.conversation.is_busy, timeout=180)
    answers = [c.message for c in dialog.columns]
    assert [m.model for m in answers] == [None, OTHER, OTHER]
    assert [m.content for m in answers] == [alone[None], alone[OTHER], alone[OTHER]]
    prompt = answers[1].stats.prompt_tokens
    assert prompt_tokens_computed(bridge, OTHER) == prompt + 1  # one prefill for the two
    dialog.close()


def test_attachment_chips_count_with_the_tabs_model(make_window, bridge, loop, tmp_path):
    window = make_window(bridge)
    notes = tmp_path / "notes.md"
    notes.write_text("# Plan\nShip the lighthouse widget on Friday, with its manual.\n")

    def chip_tokens(tab: Any) -> int:
        [chip] = tab.chips.chips
        run_until(loop, lambda: isinstance(chip.item, Attachment) and chip.tokens is not None
                  and not chip.counting, timeout=60)
        assert f"{chip.tokens:,} tokens" in chip.label.text()
        return chip.tokens

    def expected(model: str | None) -> int:
        target = bridge.local_of(model)
        return len(target.engine.tokenizer.encode(frame(chip.item)))

    tab = on_model(window, None)
    tab.attach_files([str(notes)])
    chip = tab.chips.chips[0]
    on_default = chip_tokens(tab)
    assert on_default == expected(None)

    # the tab picks the model with another tokenizer: not loaded yet, so no count; its
    # load (another tab's send) brings the count in its tokenizer
    tab.set_model(TINY)
    run_until(loop, lambda: not chip.counting)
    assert chip.tokens is None
    loader = on_model(window, TINY, tokens=2)
    assert loader.send_text("hi")
    reply_of(loader, loop)
    on_tiny = chip_tokens(tab)
    assert on_tiny == expected(TINY) and on_tiny != on_default

    # a file attached while the tab is on that model is counted there at once
    (tmp_path / "again").mkdir()
    other = tmp_path / "again" / notes.name  # the same name: the framing names the file
    other.write_text(notes.read_text())
    tab2 = on_model(window, TINY)
    tab2.attach_files([str(other)])
    assert chip_tokens(tab2) == on_tiny
    # back on the default model: counted again in its tokenizer
    tab.set_model(None)
    assert chip_tokens(tab) == on_default
