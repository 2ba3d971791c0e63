"""App-wide defaults for new tabs (app/defaults.py, Settings.set_defaults): checked values
with clear reasons, a tab's overrides against them, and a real settings file that keeps
them, including a corrupt or old one (issue #32 item 4, rough edge E8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.bridge import EngineBridge
from app.conversation import Conversation
from app.defaults import (
    DEFAULT_PARAMS,
    DEFAULT_SYSTEM_PROMPT,
    Defaults,
    DefaultsError,
    parse_value,
)
from app.settings import BUILTIN_PRESETS, Settings
from app.workspace import Workspace


def test_typed_values_are_checked_with_the_reason():
    assert parse_value("temperature", " 0.3 ") == 0.3
    assert parse_value("max_tokens", "60") == 60
    assert parse_value("seed", "random") is None and parse_value("seed", "") is None
    assert parse_value("top_k", "off") == 0 and parse_value("top_k", "40") == 40
    cases = {
        ("max_tokens", "60k"): "Max tokens must be a whole number from 1 to 1000000; "
                               "'60k' is not.",
        ("max_tokens", "0"): "Max tokens must be a whole number from 1 to 1000000; "
                             "0 is out of range.",
        ("temperature", "9"): "Temperature must be a number from 0 to 5; 9 is out of range.",
        ("temperature", ""): "Temperature must be a number from 0 to 5; it is empty.",
        ("top_p", "nan"): "Top p must be a number from 0.01 to 1; nan is not.",
        ("seed", "-4"): "Seed must be a whole number from 0 to 2147483647; "
                        "-4 is out of range.",
        ("top_k", "1.5"): "Top k must be a whole number from 0 to 100000 or \"off\"; "
                          "'1.5' is not.",
    }
    for (key, text), message in cases.items():
        with pytest.raises(DefaultsError) as info:
            parse_value(key, text)
        assert str(info.value) == message and info.value.key == key


def test_a_tabs_overrides_name_the_default():
    defaults = Defaults("Be brief.", DEFAULT_PARAMS | {"max_tokens": 60})
    assert defaults.overrides("Be brief.", DEFAULT_PARAMS | {"max_tokens": 60}) == {}
    tab = DEFAULT_PARAMS | {"temperature": 0.2, "seed": 7, "stop": ["END"],
                            "response_format": {"type": "json_object"},
                            "mcp_servers": ["weather"], "tool_choice": "auto"}
    assert defaults.overrides("Talk like a pirate.", tab) == {
        "system_prompt": "“Be brief.”", "temperature": "0.7", "seed": "random",
        "max_tokens": "60", "stop": "none", "response_format": "Text"}
    # a spin box's 0.7 is the default's 0.7; text output with or without the key is text
    assert Defaults().overrides(DEFAULT_SYSTEM_PROMPT,
                                DEFAULT_PARAMS | {"temperature": 0.7000000001,
                                                  "response_format": None}) == {}


def test_defaults_are_saved_and_new_chats_start_from_them(tmp_path: Path):
    path = tmp_path / "settings.json"
    settings = Settings(path)
    seen = []
    settings.defaults_changed.connect(lambda: seen.append(settings.defaults))
    settings.set_defaults("Be brief.", DEFAULT_PARAMS | {"max_tokens": 60, "seed": 3,
                                                         "mcp_servers": ["x"]})
    assert len(seen) == 1
    reloaded = Settings.load(path)
    assert reloaded.defaults == Defaults("Be brief.", DEFAULT_PARAMS | {"max_tokens": 60,
                                                                        "seed": 3})
    assert json.loads(path.read_text())["defaults"]["params"]["max_tokens"] == 60
    # E8: a new chat starts from the defaults; a chat that has its own settings keeps them
    ws = Workspace(EngineBridge(), reloaded)
    own = ws.open(Conversation(ws.bridge, system_prompt="Mine", params=DEFAULT_PARAMS
                               | {"max_tokens": 5}))
    new = ws.open()
    assert (new.system_prompt, new.params["max_tokens"], new.params["seed"]) == \
        ("Be brief.", 60, 3)
    assert new.preset is None  # no preset has these values
    assert (own.system_prompt, own.params["max_tokens"]) == ("Mine", 5)
    reloaded.set_defaults(DEFAULT_SYSTEM_PROMPT, BUILTIN_PRESETS["Creative"])
    assert ws.open().preset == "Creative"


def test_an_invalid_default_changes_nothing(tmp_path: Path):
    path = tmp_path / "settings.json"
    settings = Settings(path)
    settings.set_defaults("Kept.", DEFAULT_PARAMS | {"max_tokens": 60})
    saved = path.read_text()
    for bad in ({"max_tokens": 0}, {"temperature": "hot"}, {"top_p": float("inf")},
                {"stop": "END"}, {"seed": True}):
        with pytest.raises(DefaultsError):
            settings.set_defaults("Changed.", DEFAULT_PARAMS | bad)
    with pytest.raises(DefaultsError) as info:  # what the engine would refuse
        settings.set_defaults("Changed.", DEFAULT_PARAMS | {"stop": ["x"] * 17})
    assert str(info.value) == ("Stop strings: stop holds 17 strings; at most 16 are "
                               "allowed.")
    assert path.read_text() == saved
    assert settings.defaults == Defaults("Kept.", DEFAULT_PARAMS | {"max_tokens": 60})


def test_a_corrupt_or_missing_settings_file_gives_the_built_in_defaults(tmp_path: Path):
    path = tmp_path / "settings.json"
    assert Settings.load(path).defaults == Defaults()  # missing
    path.write_text("{not json", encoding="utf-8")
    assert Settings.load(path).defaults == Defaults()
    path.write_text(json.dumps({"defaults": "garbage"}), encoding="utf-8")
    assert Settings.load(path).defaults == Defaults()
    # each broken value falls back alone; the good ones are kept
    path.write_text(json.dumps({"defaults": {
        "system_prompt": 5,
        "params": {"temperature": "hot", "top_p": 7, "max_tokens": 60, "seed": -1,
                   "top_k": 1.5, "stop": ["END", 3], "response_format": "json",
                   "unknown": 1}}}), encoding="utf-8")
    settings = Settings.load(path)
    assert settings.defaults == Defaults(DEFAULT_SYSTEM_PROMPT,
                                         DEFAULT_PARAMS | {"max_tokens": 60})
    assert settings.new_tab_params() == DEFAULT_PARAMS | {"max_tokens": 60}


def test_an_older_settings_file_keeps_its_prompt_and_default_preset(tmp_path: Path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"system_prompt": "Old prompt", "default_preset": "Creative"}),
                    encoding="utf-8")
    settings = Settings.load(path)
    assert settings.defaults == Defaults("Old prompt", BUILTIN_PRESETS["Creative"])
    settings.save()
    assert Settings.load(path).defaults == settings.defaults
