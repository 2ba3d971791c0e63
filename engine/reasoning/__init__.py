"""Reasoning models (issue #49): which way a model thinks (its chat template says), its
reply split into reasoning and answer, the controls mapped onto its template, and a
thinking budget as a per-row grammar. Loads no MLX (engine.public re-exports it)."""

from .budget import budget_grammar
from .controls import EFFORTS, Controls, template_kwargs, with_switch
from .split import Piece, ReasoningSplit, split_whole
from .style import ReasoningStyle, starts_inside, style_of

__all__ = ["EFFORTS", "Controls", "Piece", "ReasoningSplit", "ReasoningStyle",
           "budget_grammar", "split_whole", "starts_inside", "style_of", "template_kwargs",
           "with_switch"]
