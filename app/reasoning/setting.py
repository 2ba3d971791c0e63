"""A tab's (and the defaults') reasoning setting (issue #49): thinking on, off or as the
model does by default, its effort, and a thinking budget in tokens. Kept in the tab's
params as `reasoning` (a JSON-friendly dict, or None: the model's own way), made into the
request's engine.public Controls by app/request/tab.py; a model that does not think
ignores it."""

from __future__ import annotations

from typing import Any

from engine.public import EFFORTS, Controls

KEY = "reasoning"
THINKING = ("on", "off")  # and None: the model's default
MAX_BUDGET = 1_000_000


class ReasoningSettingError(ValueError):
    pass


def check(value: Any) -> dict[str, Any] | None:
    """`value` as it is kept (None when it asks for nothing), or ReasoningSettingError
    saying what is wrong."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"thinking", "effort", "budget"}:
        raise ReasoningSettingError("Thinking must be {thinking, effort, budget}.")
    thinking, effort, budget = value.get("thinking"), value.get("effort"), value.get("budget")
    if thinking is not None and thinking not in THINKING:
        raise ReasoningSettingError("Thinking must be on, off or the model's default.")
    if effort is not None and effort not in EFFORTS:
        raise ReasoningSettingError(f"Effort must be one of {', '.join(EFFORTS)}.")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                               or not 0 <= budget <= MAX_BUDGET):
        raise ReasoningSettingError(f"Thinking budget must be a whole number from 0 to "
                                    f"{MAX_BUDGET:,} tokens.")
    out = {k: v for k, v in (("thinking", thinking), ("effort", effort), ("budget", budget))
           if v is not None}
    return out or None


def controls(value: Any) -> Controls:
    """The request's controls (a setting that cannot be used: the model's default)."""
    try:
        kept = check(value) or {}
    except ReasoningSettingError:
        kept = {}
    thinking = kept.get("thinking")
    return Controls(thinking=None if thinking is None else thinking == "on",
                    effort=kept.get("effort"), budget=kept.get("budget"))


def describe(value: Any) -> str:
    """"model default", "off", "on · effort high · at most 512 tokens"."""
    try:
        kept = check(value) or {}
    except ReasoningSettingError:
        kept = {}
    if not kept:
        return "model default"
    bits = [kept.get("thinking") or "model default"]
    if kept.get("effort"):
        bits.append(f"effort {kept['effort']}")
    if kept.get("budget") is not None:
        bits.append(f"at most {kept['budget']:,} tokens")
    return " · ".join(bits)
