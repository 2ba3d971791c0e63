"""What a reply bubble says before its first token: queued (how many go first) or reading
its prompt (how far). Worded here, Qt-free; the engine's RequestProgress has the numbers."""

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
