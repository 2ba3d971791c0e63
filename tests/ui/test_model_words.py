"""Issue #46 item 26 (status bar): a Q4_1 GGUF loaded into the window is described in words
("GGUF file, Q4_1: weights held at 4 bits …"), not as "Q4_1 GGUF, 4/8-bit quantized"."""

from __future__ import annotations

from app.bridge import EngineBridge
from tests.ui.conftest import run_until
from ui.model_words import plain_description

Q4_1 = 3  # llama.cpp's general.file_type for a mostly-Q4_1 file


def test_a_q4_1_gguf_is_described_in_words(make_window, loop, tmp_path):
    from gguf import GGMLQuantizationType

    from engine import Engine
    from tests.gguf_models import CASES, ArchCase, build_model, gguf_tensors, quantize, write_gguf

    base = CASES["llama"]
    case = ArchCase("llama", dict(base.config, hidden_size=256, intermediate_size=512),
                    permute_qk=True, metadata=base.metadata)
    tensors, raw = quantize(gguf_tensors(case, build_model(case)), GGMLQuantizationType.Q4_1)
    path = write_gguf(tmp_path / "tiny-Q4_1.gguf", case, tensors, raw_types=raw,
                      file_type=Q4_1)
    bridge = EngineBridge(loader=lambda source: Engine.load(source))
    loop.run_until_complete(bridge.use_engine(Engine.load(str(path)), str(path)))
    try:
        window = make_window(bridge)
        label = window.engine_status.model_label
        run_until(loop, lambda: label.full_text().startswith("Model: "))
        shown = label.full_text()
        assert "GGUF file, Q4_1: weights held at 4 bits" in shown, shown
        assert "-bit quantized" not in shown and "4/8" not in shown
        tip = window.model_button.toolTip()
        assert "GGUF file, Q4_1: weights held at 4 bits" in tip and "quantized" not in tip
        window.stats_dock.show()  # the stats panel names the model in the same words
        window.stats_dock.refresh(poll=True)
        line = window.stats_dock.panel.model_line.text()
        assert "GGUF file, Q4_1: weights held at 4 bits" in line and "quantized" not in line
    finally:
        loop.run_until_complete(bridge.shutdown(timeout=2.0))


def test_other_descriptions_in_words():
    assert plain_description("m (mlx-lm), 4-bit quantized on cpu") == \
        "m (mlx-lm), weights held at 4 bits on cpu"
    assert plain_description("m F16 GGUF, float32 on cpu") == \
        "m — GGUF file, F16: weights held as float32 on cpu"
    assert plain_description("tiny test model") == "tiny test model"
