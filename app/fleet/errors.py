"""Why the model manager did not serve a model: the name is unknown, or it cannot fit."""

from __future__ import annotations

from collections.abc import Sequence

from engine.public import format_bytes


class UnknownModel(LookupError):
    """No model of the catalog, and no file or folder, has this name."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        listed = ", ".join(f"'{n}'" for n in known[:20]) or "none"
        super().__init__(f"no model named '{name}' here; the models available: {listed}")
        self.name = name
        self.known = tuple(known)


class NoRoom(Exception):
    """A model that cannot fit: its estimate, the budget, and what to unload first (the
    loaded models that are busy or pinned, which the manager does not evict itself)."""

    def __init__(self, name: str, need: int, budget: int, free: int,
                 to_unload: Sequence[str], detail: str = "") -> None:
        self.name, self.need, self.budget, self.free = name, need, budget, free
        self.to_unload = tuple(to_unload)
        text = (f"the model '{name}' does not fit: it needs ~{format_bytes(need)}"
                f"{f' ({detail})' if detail else ''}, and {format_bytes(free)} of the "
                f"{format_bytes(budget)} budget is free")
        if need > budget:
            text += "; it is larger than the whole budget"
        elif to_unload:
            text += "; unload " + " or ".join(f"'{n}'" for n in to_unload) + " first"
        super().__init__(text)
