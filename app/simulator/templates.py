"""Prompt templates for simulated requests: the bundled default set and their expansion."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from importlib import resources


@dataclass(frozen=True, slots=True)
class PromptSet:
    """Templates with `{topic}` (a random topic) and `{n}` (the request number, from 1)."""

    templates: tuple[str, ...]
    topics: tuple[str, ...] = field(default=())

    def expand(self, index: int, rng: random.Random) -> str:
        # str.replace, not str.format: templates may hold code with other braces.
        text = rng.choice(self.templates)
        if "{topic}" in text:
            text = text.replace("{topic}", rng.choice(self.topics) if self.topics else "anything")
        return text.replace("{n}", str(index + 1))


def default_prompt_set() -> PromptSet:
    """The set shipped in resources/prompts/simulator.json."""
    raw = resources.files("resources").joinpath("prompts/simulator.json").read_text("utf-8")
    data = json.loads(raw)
    return PromptSet(tuple(data["templates"]), tuple(data["topics"]))
