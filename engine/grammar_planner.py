"""A grammar's say on its row's positions: the planner of the decode rows with a grammar.

A row with a grammar (engine/constraint.py) is this planner's, not speculation's. Where its
grammar forces what comes next (a JSON schema's keys and punctuation: `","age":` after a
string value), llguidance's fast-forward tokens are the row's drafts: the pass checks them
as any drafts are checked (engine/speculation.py's rule, each position drawn under the mask
the grammar has after the drafts before it, engine/next_token.py `sample_drafted`), so the
row takes exactly the tokens it would have drawn one a tick, several in one pass. Forced
bytes may be spelled in other tokens the grammar allows; a draft the model would not draw
is refused like any other.

Drafts go where the runner checks them in the ragged pass or in a lone row's own pass, not
in a batch's padded pass (every row would pay the padding). A row asking for
log-probabilities or with an image never drafts, nor does one whose grammar cannot take its
drafts back (a thinking budget's max_tokens lexeme: `RowMatcher.can_check`). A model with
recurrent layers or a sliding window gets none (its cache cannot always take refused drafts
back: engine/engine_core.py). Pure Python: no MLX.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .planners import RowsTick
    from .sequence import Sequence


class GrammarPlanner:
    """The scheduler's planner (engine/planners.py) of the decode rows with a grammar."""

    def __init__(self, max_drafts: int = 16, in_batches: bool = True) -> None:
        """`max_drafts`: the most forced tokens a row checks in one pass (0: none, a row
        runs 1 position a tick). `in_batches`: a batch's rows may check drafts in the
        ragged pass (a lone row always may, in its own pass); without it a batch's step
        runs ahead as it would without drafts."""
        self.max_drafts = max_drafts
        self.in_batches = in_batches
        # engine-wide counters: forced tokens checked, and of them taken
        self.drafted = 0
        self.accepted = 0

    def owns(self, seq: Sequence) -> bool:
        return seq.matcher is not None

    def drafts(self, tick: RowsTick, mine: list[int]) -> dict[int, list[int]]:
        if not self.max_drafts or tick.check == "padded":
            return {}
        out = {}
        for i in mine:
            seq = tick.rows[i]
            room = min(self.max_drafts, seq.params.max_tokens - seq.num_output_tokens - 1,
                       tick.context_length - seq.num_tokens - 1)
            if room > 0 and self._may_draft(seq):
                forced = seq.matcher.forced()[:room]
                if forced and seq.matcher.can_check(forced):
                    out[i] = forced
        return out

    @staticmethod
    def _may_draft(seq: Sequence) -> bool:
        return (not seq.is_finished and seq.params.logprobs is None
                and seq.vision is None and not seq.matcher.took_early)

    def skip(self, rows: list[Sequence], mine: list[int]) -> None:
        pass

    def will_draft(self, rows: list[Sequence], mine: list[int]) -> bool:
        """Asked before the step's token is taken: two forced tokens now mean that, after
        the step's token (the first of them, most likely), the next step has drafts."""
        if not self.max_drafts or not mine or (len(rows) > 1 and not self.in_batches):
            return False
        return any(self._may_draft(rows[i]) and len(rows[i].matcher.forced()) >= 2
                   for i in mine)

    def checked(self, seq: Sequence, drafts: list[int], taken: int) -> None:
        seq.drafted += len(drafts)
        seq.accepted_drafts += taken
        self.drafted += len(drafts)
        self.accepted += taken

    def measured(self, rows: int, drafted: int, seconds: float) -> None:
        pass

    def forget(self, seq: Sequence) -> None:
        pass
