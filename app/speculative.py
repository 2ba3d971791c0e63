"""The speculative-decoding choice (issue #31): "off", "ngram" or "draft:PATH", its default,
its check and how the app names it. `batchchat serve --speculative`, the terminal chat and
the app's setting all read it here; the engine gets it as EngineConfig.speculative."""

from __future__ import annotations

from engine.public import DRAFT_PREFIX

OFF, NGRAM = "off", "ngram"
# The one default, everywhere (serve, --cli, a new settings file): set from the benchmark
# (bench/speculative.py, docs/performance.md).
DEFAULT = NGRAM

LABELS = {OFF: "Off", NGRAM: "N-gram (prompt lookup)"}


def check(value: str) -> str:
    """`value` as the engine takes it; ValueError that says why for anything else."""
    text = value.strip() if isinstance(value, str) else value
    if text in (OFF, NGRAM):
        return text
    if isinstance(text, str) and text.startswith(DRAFT_PREFIX):
        path = text[len(DRAFT_PREFIX):].strip()
        if not path:
            raise ValueError("draft: needs the draft model's path, e.g. draft:/models/small")
        return DRAFT_PREFIX + path
    raise ValueError(f"speculative decoding must be 'off', 'ngram' or 'draft:PATH', "
                     f"got {value!r}")


def label(value: str) -> str:
    """How the app shows a choice: "Off", "N-gram (prompt lookup)", "Draft model (NAME)"."""
    if value.startswith(DRAFT_PREFIX):
        name = value[len(DRAFT_PREFIX):].rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
        return f"Draft model ({name})"
    return LABELS.get(value, value)
