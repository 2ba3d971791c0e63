"""Thinking on/off and `reasoning_effort` (none / low / medium / high) as each family takes
them: template variables where the template reads them (`enable_thinking`, `thinking`,
`reasoning_effort`: Qwen3, DeepSeek, GLM, gpt-oss's "Reasoning: low"), a flag in the
system prompt where that is the family's switch (SmolLM3's `/no_think`), and for the
[THINK] family (Magistral / Ministral reasoning), whose template thinks only under its
default system prompt, a system prompt of the user's turns it off."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .style import ReasoningStyle

EFFORTS = ("none", "low", "medium", "high")
# gpt-oss cannot stop thinking: its lowest level stands for "none"
HARMONY_LEVELS = {"none": "low", "low": "low", "medium": "medium", "high": "high"}
NO_THINK_SYSTEM = "Answer directly, without a thinking section."


@dataclass(frozen=True, slots=True)
class Controls:
    """What a request or a tab asks of a reasoning model. `thinking`: None = the model's
    default; `effort`: one of EFFORTS or None; `budget`: at most this many reasoning
    tokens (None: no limit), enforced by budget.py's grammar."""

    thinking: bool | None = None
    effort: str | None = None
    budget: int | None = None

    def __post_init__(self) -> None:
        if self.effort is not None and self.effort not in EFFORTS:
            raise ValueError(f"reasoning_effort must be one of {', '.join(EFFORTS)}, "
                             f"got {self.effort!r}")
        if self.budget is not None and (isinstance(self.budget, bool)
                                        or not isinstance(self.budget, int)
                                        or self.budget < 0):
            raise ValueError(f"thinking budget must be a whole number >= 0, got "
                             f"{self.budget!r}")

    @property
    def wants_thinking(self) -> bool | None:
        """On, off, or the model's default: effort "none" is off, any other effort on."""
        if self.thinking is not None:
            return self.thinking
        if self.effort is not None:
            return self.effort != "none"
        return None


def template_kwargs(style: ReasoningStyle | None, controls: Controls) -> dict[str, Any]:
    """The chat-template variables that carry `controls` to this family's template."""
    if style is None:
        return {}
    out: dict[str, Any] = {}
    on = controls.wants_thinking
    if style.harmony:
        effort = controls.effort or ("low" if on is False else None)
        if effort is not None:
            out["reasoning_effort"] = HARMONY_LEVELS[effort]
        return out
    if on is None:
        on = True  # a template that reads the switch gets it said (some default to off)
    if "enable_thinking" in style.reads:
        out["enable_thinking"] = on
    if "thinking" in style.reads:
        out["thinking"] = on
    if "reasoning_effort" in style.reads and controls.effort not in (None, "none"):
        out["reasoning_effort"] = controls.effort
    return out


def with_switch(style: ReasoningStyle | None, controls: Controls,
                messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with the system-prompt switch where that is the family's way: SmolLM3's
    `/think` or `/no_think` at the end of the system prompt; for the [THINK] family
    (no template variable), thinking off is a system prompt of its own."""
    msgs = [dict(m) for m in messages]
    on = controls.wants_thinking
    if style is None or on is None or style.harmony:
        return msgs
    if style.system_switch and "enable_thinking" not in style.reads:
        flag = "/think" if on else "/no_think"
        if msgs and msgs[0].get("role") == "system":
            msgs[0]["content"] = f"{msgs[0]['content']}\n{flag}".lstrip()
        else:
            msgs.insert(0, {"role": "system", "content": flag})
    elif style.start == "[THINK]" and not on and not (msgs and msgs[0].get("role")
                                                        == "system"):
        msgs.insert(0, {"role": "system", "content": NO_THINK_SYSTEM})
    return msgs
