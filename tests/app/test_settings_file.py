"""A hand-edited settings.json with values of the wrong kind or text that is not valid
Unicode loads with those values repaired or defaulted, never a crash later (issue #15:
every place text enters the program)."""

from __future__ import annotations

import json
from pathlib import Path

from app.settings import DEFAULT_PARAMS, Settings


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
