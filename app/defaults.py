"""App-wide defaults for new tabs (system prompt and sampling): the built-in values, the
limits of each setting, checking typed or saved values, and a tab's overrides against them.

A tab's params are JSON-friendly dicts with engine.SamplingParams' keys; they may also hold
`response_format` (its output format, app.request.output_format) and the tab's MCP tools
(never part of the defaults or of a preset, TOOL_KEYS).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.public import SamplingParams, repair_text

from .reasoning import setting as reasoning_setting
from .request import overflow
from .request.output_format import describe as describe_format

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
# repetition_context_size is left at the engine default
DEFAULT_PARAMS: dict[str, Any] = {
    "temperature": 0.7, "top_p": 0.95, "top_k": 0, "min_p": 0.05,
    "repetition_penalty": 1.1, "max_tokens": 512, "seed": None, "stop": [],
}
TOOL_KEYS = ("mcp_servers", "tool_choice")  # a tab's own tools: kept out of presets, defaults


@dataclass(frozen=True, slots=True)
class Limit:
    """One number setting: its label, range and spin-box step; `special` names its lowest
    value ("off": top k 0; "random": no seed, kept as None)."""

    label: str
    lo: float
    hi: float
    step: float = 1.0
    integer: bool = False
    special: str = ""


LIMITS: dict[str, Limit] = {
    "temperature": Limit("Temperature", 0.0, 5.0, 0.05),
    "top_p": Limit("Top p", 0.01, 1.0, 0.01),
    "top_k": Limit("Top k", 0, 100_000, integer=True, special="off"),
    "min_p": Limit("Min p", 0.0, 0.99, 0.01),
    "repetition_penalty": Limit("Repetition penalty", 0.1, 3.0, 0.05),
    "max_tokens": Limit("Max tokens", 1, 1_000_000, integer=True),
    "seed": Limit("Seed", 0, 2**31 - 1, integer=True, special="random"),
}
# every setting the defaults hold, in the order the panel and the dialog show them
LABELS: dict[str, str] = {"system_prompt": "System prompt"} | {
    k: v.label for k, v in LIMITS.items()} | {"stop": "Stop strings",
                                              "response_format": "Output format",
                                              reasoning_setting.KEY: "Thinking",
                                              overflow.KEY: "Context overflow"}


class DefaultsError(ValueError):
    """A value that cannot be a default; `key` names the setting (for the dialog's focus)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


# -- checking values ---------------------------------------------------------------------
def _range_text(limit: Limit) -> str:
    if limit.integer:
        return f"a whole number from {int(limit.lo)} to {int(limit.hi)}"
    return f"a number from {limit.lo:g} to {limit.hi:g}"


def parse_value(key: str, text: str) -> Any:
    """A number setting as typed (DefaultsError with the reason if it cannot be one): blank or
    its special word gives the lowest value ("off", "random")."""
    limit = LIMITS[key]
    text = text.strip()
    if limit.special and text.lower() in ("", limit.special):
        return None if key == "seed" else limit.lo
    try:
        value: float = int(text) if limit.integer else float(text)
    except ValueError:
        word = f' or "{limit.special}"' if limit.special else ""
        what = f"{text!r} is not" if text else "it is empty"
        raise DefaultsError(key, f"{limit.label} must be {_range_text(limit)}{word}; "
                                 f"{what}.") from None
    return check_value(key, value)


def check_value(key: str, value: Any) -> Any:
    """`value` if it fits setting `key`, else DefaultsError with the reason."""
    if key == "stop":
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise DefaultsError(key, "Stop strings must be a list of text.")
        return [repair_text(s) for s in value if s]
    if key == "response_format":
        if value is not None and not isinstance(value, dict):
            raise DefaultsError(key, "Output format must be text, JSON or a JSON schema.")
        return value
    if key == reasoning_setting.KEY:
        try:
            return reasoning_setting.check(value)
        except reasoning_setting.ReasoningSettingError as exc:
            raise DefaultsError(key, str(exc)) from None
    if key == overflow.KEY:
        try:
            return overflow.setting(value)
        except ValueError as exc:
            raise DefaultsError(key, f"Context overflow: {exc}.") from None
    limit = LIMITS[key]
    if key == "seed" and value is None:
        return None
    number = isinstance(value, int) if limit.integer else isinstance(value, int | float)
    if isinstance(value, bool) or not number or not math.isfinite(value):
        raise DefaultsError(key, f"{limit.label} must be {_range_text(limit)}; "
                                 f"{value!r} is not.")
    if not limit.lo <= value <= limit.hi:
        raise DefaultsError(key, f"{limit.label} must be {_range_text(limit)}; "
                                 f"{value:g} is out of range.")
    return float(value) if not limit.integer else value


def check_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling settings of the defaults, every key present and in range (missing keys:
    the built-in values); DefaultsError names the first that is not."""
    out = {key: check_value(key, params.get(key, DEFAULT_PARAMS[key]))
           for key in DEFAULT_PARAMS}
    try:  # what the engine refuses beyond the ranges: too many or too long stop strings
        SamplingParams.from_dict(out)
    except (TypeError, ValueError) as exc:
        key = "stop" if "stop" in str(exc) else "sampling"
        raise DefaultsError(key, f"{LABELS.get(key, 'Sampling')}: {exc}.") from None
    if params.get("response_format"):
        out["response_format"] = check_value("response_format", params["response_format"])
    if params.get(reasoning_setting.KEY):
        kept = check_value(reasoning_setting.KEY, params[reasoning_setting.KEY])
        if kept:
            out[reasoning_setting.KEY] = kept
    if params.get(overflow.KEY):
        policy = check_value(overflow.KEY, params[overflow.KEY])
        if policy:
            out[overflow.KEY] = policy
    return out


def normalize_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Known keys only, defaults filled in, stop as a list (JSON-friendly); lenient: a value
    of the wrong kind (from a hand-edited settings.json) keeps the built-in value, since the
    settings panel's spin boxes cannot show it."""
    out = dict(DEFAULT_PARAMS)
    out.update({k: v for k, v in params.items() if k in DEFAULT_PARAMS and _fits(k, v)})
    # repaired: a stop string that is not valid Unicode (a JSON "\ud800") could never be
    # saved with the chat
    out["stop"] = [repair_text(s) for s in out.get("stop") or [] if isinstance(s, str) and s]
    fmt = params.get("response_format")
    if isinstance(fmt, dict):  # else text: the saved params stay as they were
        out["response_format"] = fmt
    try:  # a reasoning model's thinking, kept only when it asks for something
        reasoning = reasoning_setting.check(params.get(reasoning_setting.KEY))
    except reasoning_setting.ReasoningSettingError:
        reasoning = None
    if reasoning:
        out[reasoning_setting.KEY] = reasoning
    try:  # the context overflow policy, kept only when it is not `stop`
        policy = overflow.setting(params.get(overflow.KEY))
    except ValueError:
        policy = None
    if policy:
        out[overflow.KEY] = policy
    # the MCP servers whose tools the tab offers, and how (only when some are on)
    servers = params.get("mcp_servers")
    if isinstance(servers, list) and servers:
        out["mcp_servers"] = [repair_text(s) for s in servers if isinstance(s, str)]
        choice = params.get("tool_choice")
        out["tool_choice"] = choice if isinstance(choice, str) and choice else "auto"
    return out


def _fits(name: str, value: Any) -> bool:
    default = DEFAULT_PARAMS[name]
    if name == "stop":
        return isinstance(value, list)
    if isinstance(value, bool):
        return False
    if name == "seed":
        return value is None or isinstance(value, int) and value >= 0
    if isinstance(default, float):
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, int)


def without_tools(params: Mapping[str, Any]) -> dict[str, Any]:
    """`params` less the tab's own tools (what a preset or the defaults keep)."""
    return {k: v for k, v in params.items() if k not in TOOL_KEYS}


# -- the defaults and a tab's overrides --------------------------------------------------
@dataclass(frozen=True, slots=True)
class Defaults:
    """What a new tab starts with. Built with `make` (checked), or `from_dict` (lenient)."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    params: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_PARAMS))

    @classmethod
    def make(cls, system_prompt: str, params: Mapping[str, Any]) -> Defaults:
        """Checked defaults: DefaultsError names the first setting that cannot be one."""
        return cls(repair_text(system_prompt), check_params(without_tools(params)))

    @classmethod
    def from_dict(cls, raw: Any) -> Defaults:
        """Saved defaults; a missing or broken value is the built-in one (logged)."""
        if not isinstance(raw, Mapping):
            return cls()
        prompt = raw.get("system_prompt", DEFAULT_SYSTEM_PROMPT)
        if not isinstance(prompt, str):
            log.warning("ignoring a saved default system prompt that is not text")
            prompt = DEFAULT_SYSTEM_PROMPT
        saved = raw.get("params") if isinstance(raw.get("params"), Mapping) else {}
        params = dict(DEFAULT_PARAMS)
        for key in (*DEFAULT_PARAMS, "response_format", reasoning_setting.KEY, overflow.KEY):
            if key not in saved:
                continue
            try:
                params[key] = check_value(key, saved[key])
            except DefaultsError as exc:
                log.warning("ignoring a saved default: %s", exc)
        for key in ("response_format", reasoning_setting.KEY, overflow.KEY):
            if not params.get(key):
                params.pop(key, None)
        return cls(repair_text(prompt), params)

    def to_dict(self) -> dict[str, Any]:
        return {"system_prompt": self.system_prompt, "params": dict(self.params)}

    def value(self, key: str) -> Any:
        """The default of setting `key` (a LABELS key)."""
        if key == "system_prompt":
            return self.system_prompt
        return self.params.get(key, DEFAULT_PARAMS.get(key))

    def overrides(self, system_prompt: str, params: Mapping[str, Any]) -> dict[str, str]:
        """The settings a tab has its own value for: key -> its default, as shown in the
        tab's tooltip ("default: 0.7"). Keys in LABELS order."""
        tab = {"system_prompt": system_prompt} | dict(params)
        return {key: describe(key, self.value(key)) for key in LABELS
                if not same(key, tab.get(key), self.value(key))}


def same(key: str, a: Any, b: Any) -> bool:
    """Whether two values of setting `key` are the same (numbers as a spin box shows them)."""
    if key in ("response_format", reasoning_setting.KEY, overflow.KEY):
        return (a or None) == (b or None)
    if isinstance(a, float | int) and isinstance(b, float | int) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return round(float(a), 6) == round(float(b), 6)
    return bool(a == b)


def describe(key: str, value: Any) -> str:
    """A setting's value in words: "0.7", "off", "random", "none", the prompt's start."""
    if key == "system_prompt":
        text = " ".join(str(value).split())
        return f"“{text[:57]}…”" if len(text) > 60 else f"“{text}”" if text else "none"
    if key == "stop":
        return ", ".join(repr(s) for s in value) if value else "none"
    if key == "response_format":
        return describe_format(value)
    if key == reasoning_setting.KEY:
        return reasoning_setting.describe(value)
    if key == overflow.KEY:
        return overflow.describe(value)
    limit = LIMITS[key]
    if value is None or (limit.special and value == limit.lo):
        return limit.special
    return f"{value:g}" if isinstance(value, float) else str(value)
