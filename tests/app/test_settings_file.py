"""A hand-edited settings.json with values of the wrong kind or text that is not valid
Unicode loads with those values repaired or defaulted, never a crash later (issue #15:
every place text enters the program)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.settings import DEFAULT_PARAMS, Settings

ROOT = Path(__file__).resolve().parents[2]


def test_wrong_kinds_fall_back_to_defaults_and_bad_text_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    preset = {"temperature": "hot", "top_k": 2.5, "max_tokens": True, "seed": -3,
              "min_p": float("nan"), "top_p": 0.5, "stop": ["ok", "x\ud800", 7, ""]}
    # json.dumps escapes the surrogate as \\ud800, exactly what a hand edit could hold
    path.write_text(json.dumps({"system_prompt": "be \udc00 brief",
                                "presets": {"Mine \ud800": preset}}), encoding="utf-8")
    s = Settings.load(path)
    assert s.defaults.system_prompt == "be \ufffd brief"
    [name] = s.user_presets
    assert name == "Mine \ufffd"
    loaded = s.preset(name)
    assert loaded == DEFAULT_PARAMS | {"top_p": 0.5, "stop": ["ok", "x\ufffd"]}
    s.save()
    assert Settings.load(path).preset(name) == loaded


BROKEN = {
    "random bytes": bytes(range(256)) * 4,
    "truncated, with a preset": json.dumps({"presets": {"Mine": {"temperature": 0.3}},
                                            "model": "x"}).encode()[:-9],
    "NUL bytes": b"\0" * 64,
    "nested too deep": b"[" * 100_000 + b"]" * 100_000,
    "not an object": b"[1, 2]",
}


@pytest.mark.parametrize("kind", BROKEN)
def test_a_broken_file_is_kept_aside_before_anything_overwrites_it(tmp_path: Path, caplog,
                                                                    kind: str) -> None:
    """Issue #46 items 8-9: no crash, and the broken file survives the next save."""
    path = tmp_path / "settings.json"
    path.write_bytes(BROKEN[kind])
    with caplog.at_level(logging.WARNING, logger="app.settings"):
        s = Settings.load(path)
    assert s.model == "bundled" and s.user_presets == {}
    [kept] = tmp_path.glob("settings.json.corrupt-*")
    assert kept.read_bytes() == BROKEN[kind]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "is broken" in warning and kept.name in warning
    s.save_preset("New", DEFAULT_PARAMS)
    assert kept.read_bytes() == BROKEN[kind]
    assert Settings.load(path).user_presets.keys() == {"New"}


def test_a_model_of_the_wrong_kind_falls_back_to_the_default(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"model": {"a": 1}, "theme": "dark"}), encoding="utf-8")
    s = Settings.load(path)
    assert (s.model, s.theme) == ("bundled", "dark")
    s.save()
    assert json.loads(path.read_text(encoding="utf-8"))["model"] == "bundled"


def test_deeply_nested_settings_do_not_stop_an_entry_point(tmp_path: Path) -> None:
    """`batchchat models list`, run for real, with settings.json nested 100,000 deep."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "settings.json").write_bytes(BROKEN["nested too deep"])
    env = os.environ | {"BATCHCHAT_DATA_DIR": str(data), "HOME": str(tmp_path / "home"),
                        "HF_HUB_CACHE": str(tmp_path / "hub"),
                        "BATCHCHAT_MODEL_DIR": str(tmp_path / "bc")}
    result = subprocess.run([sys.executable, "-m", "batchchat", "models", "list"], env=env,
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    assert len(list(data.glob("settings.json.corrupt-*"))) == 1
