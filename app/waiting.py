"""What a reply bubble says before its first token: queued (how many go first) or reading
its prompt (how far); and what a tab says while its model loads first (issue #50: how far).
Worded here, Qt-free; the engine's RequestProgress and the loader's reports have the
numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.public import RequestProgress


def wait_note(progress: RequestProgress | None) -> str:
    if progress is None:
        return ""
    if progress.state == "queued":
        ahead = progress.queue_position or 0
        return f"queued — {ahead} ahead" if ahead else "queued — next in line"
    return f"reading prompt {progress.prefill_fraction * 100:.0f} %"


def load_note(model: str, fraction: float | None = None) -> str:
    """'Loading smol-q8 … 40 %' (no share before the loader's first report)."""
    return f"Loading {model} … {fraction * 100:.0f} %" if fraction is not None \
        else f"Loading {model} …"
