"""Engine.load(progress=...): stages in order, fractions rising to 1.0, one report per
transformer layer while converting (issue #18 item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Engine
from engine.loader import ModelLoadError
from engine.loader.progress import ProgressReporter
from tests.engine.test_loader import make_tiny_gguf


def test_engine_load_reports_each_stage_and_ends_at_one(tmp_path: Path) -> None:
    path = tmp_path / "tiny-llama.F32.gguf"
    make_tiny_gguf(path)
    seen: list[tuple[str, float]] = []
    engine = Engine.load(str(path), progress=lambda stage, f: seen.append((stage, f)))
    assert engine.description.startswith("tiny-llama")
    stages = list(dict.fromkeys(stage for stage, _ in seen))
    assert stages == ["reading file", "converting layers", "tokenizer", "starting the engine"]
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] < 0.1
    layers = engine.model.args.num_hidden_layers
    converting = [f for stage, f in seen if stage == "converting layers"]
    assert len(converting) >= layers + 1  # the stage's start, then each layer (and the rest)


def test_a_failing_load_reports_no_completion(tmp_path: Path) -> None:
    bad = tmp_path / "empty.gguf"
    bad.write_bytes(b"")
    seen: list[tuple[str, float]] = []
    with pytest.raises(ModelLoadError):
        Engine.load(str(bad), progress=lambda stage, f: seen.append((stage, f)))
    assert seen and all(f < 1.0 for _, f in seen)


def test_a_broken_progress_callback_does_not_fail_the_load() -> None:
    calls = []

    def broken(stage: str, fraction: float) -> None:
        calls.append(stage)
        raise RuntimeError("view gone")

    report = ProgressReporter(broken)
    report("reading file", 0.0)
    report("converting layers", 0.5)  # dropped after the first failure
    assert calls == ["reading file"]
