"""A grammar's say on its row's positions: the planner of the rows with a grammar.

A row with a grammar (engine/constraint.py) is this planner's, not speculation's: its
matcher takes one token at a time, and each position's mask depends on the tokens before
it. It runs 1 position a tick (no drafts). Pure Python: no MLX.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .planners import RowsTick
    from .sequence import Sequence


class GrammarPlanner:
    """The scheduler's planner (engine/planners.py) of the decode rows with a grammar."""

    def owns(self, seq: Sequence) -> bool:
        return seq.matcher is not None

    def drafts(self, tick: RowsTick, mine: list[int]) -> dict[int, list[int]]:
        return {}

    def skip(self, rows: list[Sequence], mine: list[int]) -> None:
        pass

    def will_draft(self, rows: list[Sequence], mine: list[int]) -> bool:
        return False

    def checked(self, seq: Sequence, drafts: list[int], taken: int) -> None:
        pass

    def measured(self, rows: int, drafted: int, seconds: float) -> None:
        pass

    def forget(self, seq: Sequence) -> None:
        pass
