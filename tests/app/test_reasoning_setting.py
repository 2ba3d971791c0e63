"""Issue #49 (B, the app): a tab's and the defaults' reasoning setting (thinking on / off /
the model's default, effort, a budget) checked with clear reasons, kept through the
defaults and a real settings file, named among a tab's overrides, and made into the
request's controls (tab_request)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.defaults import DEFAULT_PARAMS, Defaults, DefaultsError, normalize_params
from app.reasoning.setting import ReasoningSettingError, check, controls, describe
from app.request.tab import tab_request
from app.settings import Settings
from engine.public import Controls

HIGH = {"thinking": "on", "effort": "high", "budget": 512}


def test_values_are_checked_with_the_reason() -> None:
    assert check(None) is None and check({}) is None
    assert check({"thinking": None, "effort": None}) is None
    assert check(HIGH) == HIGH
    for bad, words in [({"thinking": "maybe"}, "on, off"), ({"effort": "max"}, "Effort"),
                       ({"budget": -1}, "budget"), ({"budget": True}, "budget"),
                       ({"colour": "red"}, "thinking, effort, budget"), ("on", "Thinking")]:
        with pytest.raises(ReasoningSettingError, match=words):
            check(bad)


def test_the_setting_becomes_the_requests_controls() -> None:
    assert controls(None) == Controls()
    assert controls(HIGH) == Controls(thinking=True, effort="high", budget=512)
    assert controls({"thinking": "off"}) == Controls(thinking=False)
    assert controls({"budget": "lots"}) == Controls()  # unusable: the model's default
    request = tab_request([{"role": "user", "content": "hi"}],
                          DEFAULT_PARAMS | {"reasoning": HIGH})
    assert request.reasoning == Controls(thinking=True, effort="high", budget=512)
    assert "reasoning" not in request.params  # not a sampling setting


def test_described_in_words() -> None:
    assert describe(None) == "model default"
    assert describe({"thinking": "off"}) == "off"
    assert describe({"budget": 2048}) == "model default · at most 2,048 tokens"
    assert describe(HIGH) == "on · effort high · at most 512 tokens"


def test_the_defaults_keep_it_and_a_tab_names_it_as_an_override(tmp_path: Path) -> None:
    defaults = Defaults.make("Be brief.", DEFAULT_PARAMS | {"reasoning": HIGH})
    assert defaults.params["reasoning"] == HIGH
    with pytest.raises(DefaultsError, match="Effort") as info:
        Defaults.make("Be brief.", DEFAULT_PARAMS | {"reasoning": {"effort": "max"}})
    assert info.value.key == "reasoning"
    assert defaults.overrides("Be brief.", DEFAULT_PARAMS) == {
        "reasoning": "on · effort high · at most 512 tokens"}
    assert Defaults().overrides(Defaults().system_prompt, DEFAULT_PARAMS | {
        "reasoning": None}) == {}
    assert normalize_params(DEFAULT_PARAMS | {"reasoning": {"budget": 9}})["reasoning"] \
        == {"budget": 9}
    assert "reasoning" not in normalize_params(DEFAULT_PARAMS | {"reasoning": "junk"})
    settings = Settings(tmp_path / "settings.json")
    settings.set_defaults(defaults.system_prompt, defaults.params)
    again = Settings.load(tmp_path / "settings.json")
    assert again.defaults.params["reasoning"] == HIGH


def test_a_preset_keeps_it(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "settings.json")
    settings.save_preset("Deep", DEFAULT_PARAMS | {"reasoning": HIGH})
    assert Settings.load(tmp_path / "settings.json").preset("Deep")["reasoning"] == HIGH
