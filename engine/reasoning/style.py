"""Which way a model thinks, read from its chat template: think tags (`<think>…</think>`
and the other pairs templates write) or gpt-oss's Harmony channels; and whether a
rendered prompt leaves the reply already inside its thinking (templates that open
`<think>` in the generation prompt: DeepSeek-R1 distills, Kimi K2 Thinking…)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The pairs the templates of llama.cpp's set write, most specific first (a template that
# writes `<seed:think>` also holds the text "think>")
TAG_PAIRS = (("<seed:think>", "</seed:think>"), ("<mm:think>", "</mm:think>"),
             ("[THINK]", "[/THINK]"), ("<thinking>", "</thinking>"),
             ("<think>", "</think>"))
# Template variables that switch thinking or set its effort, and how a template reads each
# (DeepSeek V3.1's `thinking` is a variable; gpt-oss's `message.thinking` is not)
SWITCHES = {"enable_thinking": re.compile(r"\benable_thinking\b"),
            "thinking": re.compile(r"(?<![\w.'\"])thinking is (?:not )?defined|"
                                   r"\bif (?:not )?thinking\b"),
            "reasoning_effort": re.compile(r"\breasoning_effort\b")}
HARMONY_MARKS = ("<|channel|>", "<|message|>")


@dataclass(frozen=True, slots=True)
class ReasoningStyle:
    """`kind`: "tags" (reasoning between `start` and `end`) or "harmony" (the analysis
    channel is reasoning, final the answer, commentary to=functions.* a tool call).
    `reads`: which of SWITCHES the template reads. `system_switch`: the family turns
    thinking on and off with a flag in the system prompt (SmolLM3's /think, /no_think)."""

    kind: str
    start: str = ""
    end: str = ""
    reads: frozenset[str] = frozenset()
    system_switch: bool = False

    @property
    def harmony(self) -> bool:
        return self.kind == "harmony"


def style_of(template: str | None) -> ReasoningStyle | None:
    """The reasoning style a chat template writes (None: a model that does not think)."""
    if not template:
        return None
    reads = frozenset(name for name, used in SWITCHES.items() if used.search(template))
    if all(m in template for m in HARMONY_MARKS) and "analysis" in template:
        return ReasoningStyle("harmony", "<|channel|>analysis<|message|>", "<|end|>", reads)
    for start, end in TAG_PAIRS:
        if start in template and end in template:
            return ReasoningStyle("tags", start, end, reads,
                                  system_switch="/no_think" in template)
    return None


def starts_inside(style: ReasoningStyle | None, prompt: str) -> bool:
    """Whether the reply to `prompt` (the rendered chat, generation prompt included) begins
    inside its thinking: the prompt's last start tag is not closed after it."""
    if style is None or style.harmony:
        return False
    at = prompt.rfind(style.start)
    return at >= 0 and prompt.find(style.end, at) < 0


def closed_in_prompt(style: ReasoningStyle | None, prompt: str) -> bool:
    """Whether the generation prompt already holds an empty, closed thinking block
    (Qwen3's `enable_thinking=False`: `<think>\\n\\n</think>\\n\\n`): the reply is all
    answer."""
    if style is None or style.harmony:
        return False
    tail = prompt[-(len(style.start) + len(style.end) + 16):]
    at = tail.rfind(style.start)
    rest = tail[at + len(style.start):]
    return at >= 0 and style.end in rest and not rest.replace(style.end, "", 1).strip()
