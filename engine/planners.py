"""What a tick's decode rows run beyond their one position: the planners the scheduler asks.

A decode row runs 1 position a tick, or 1 + k when it also feeds k draft tokens that the
same pass checks (engine/speculation.py's rule keeps the answer the one without them). Who
says a row's k is a `Planner`: the scheduler (engine/scheduler.py `Scheduler.schedule`)
gives each decode row to the first of its planners that owns it and asks each planner for
its rows' drafts. The grammar planner (engine/grammar_planner.py) owns the rows with a
grammar; speculation (engine/speculation.py `Speculation`) owns the others it may draft
for. Pure Python: no MLX.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from .scheduler import TickPlan
    from .sequence import Sequence

# How a tick's decode rows would check drafts (engine/model_runner.py `draft_check`): in the
# ragged pass beside everything else, a lone row's own pass, or a pass of the batch's rows
# padded to the most drafts
DraftCheck = Literal["ragged", "alone", "padded"]


@dataclass(frozen=True, slots=True)
class DecodeRows:
    """The decode batch as the scheduler plans a tick for it (made by the engine core)."""

    seqs: list[Sequence]  # the rows, in batch order
    interactive: bool  # an interactive sequence is among them (its ITL is protected)
    streaming_since: float | None  # the first token of the longest-running interactive row
    started_ahead: bool  # their step was started last tick: it runs as it is (no drafts)
    context_length: int
    # how the runner would check the rows' drafts in the tick planned (None: it cannot)
    check: Callable[[TickPlan], DraftCheck | None]


@dataclass(frozen=True, slots=True)
class RowsTick:
    """What a planner knows of the tick it plans drafts for."""

    rows: list[Sequence]  # every decode row, in batch order (costs go by their count)
    context_length: int
    check: DraftCheck  # how the runner checks drafts this tick
    can_measure: bool  # no prefill: the tick's time is the rows' step alone


class Planner(Protocol):
    """What a planner adds to the positions of the decode rows it owns."""

    def owns(self, seq: Sequence) -> bool:
        """Whether the row's positions beyond its input are this planner's to say (a row
        is the first owning planner's, in the scheduler's order)."""
        ...

    def drafts(self, tick: RowsTick, mine: list[int]) -> dict[int, list[int]]:
        """Draft tokens for rows `mine` (indices into `tick.rows`) this tick, by row index;
        a row absent runs 1 position. Asked every tick the rows can check drafts, even with
        `mine` empty (a planner may keep its own counts)."""
        ...

    def skip(self, rows: list[Sequence], mine: list[int]) -> None:
        """A tick that plans no drafts: the rows' step was started ahead."""
        ...

    def will_draft(self, rows: list[Sequence], mine: list[int]) -> bool:
        """Whether any of rows `mine` is likely to draft at the batch's next step (then the
        step is not started ahead: its input is read first, engine/decode_batch.py)."""
        ...

    def checked(self, seq: Sequence, drafts: list[int], taken: int) -> None:
        """After a pass checked the row's `drafts`: `taken` of them held."""
        ...

    def measured(self, rows: int, drafted: int, seconds: float) -> None:
        """A tick without prefill took `seconds` for `rows` decode rows and `drafted`
        drafted positions."""
        ...

    def forget(self, seq: Sequence) -> None:
        """The row ended: whatever the planner keeps for it goes."""
        ...
