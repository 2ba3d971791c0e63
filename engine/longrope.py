"""LongRoPE (Phi-3.5, Phi-4-mini, PhiMoE): which factor set the engine rotates with.

A LongRoPE model has two sets of per-frequency factors: short ones for a context within
its original one (`original_max_position_embeddings`, 4096 for Phi-3.5) and long ones past
it. mlx-lm's `SuScaledRoPE` always takes the long ones. llama.cpp takes the short ones
unless its context per sequence exceeds the original (src/llama-model.cpp
get_rope_factors: n_ctx_seq > n_ctx_orig_yarn), fixed when the context is made;
transformers by each forward's sequence length. The engine follows llama.cpp: by its
context per sequence (EngineConfig.max_context, else the model's own), chosen once when its
module tree is built, so no sequence ever has keys rotated two ways.

The chosen RoPE is mlx-lm's own `SuScaledRoPE` built with the chosen factors as its "long"
ones (the same op, the same bits as the stock model given those factors), put in the
engine's copy of the tree (engine/module_tree.py) before its native layers, which read its
frequency table (engine/cpu_arch_layers.py), so both paths rotate alike. The attention
factor (the rotated features' pre-scale) is the checkpoint's where it says one
(`rope_scaling.attention_factor`: a GGUF's `rope.scaling.attn_factor`; PhiMoE's
short/long mscale), else mlx-lm's and transformers' default from the context ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import rope_utils

from .module_tree import replace

LONGROPE_TYPES = ("longrope", "su")


@dataclass(frozen=True)
class LongRopeChoice:
    short: bool  # the short factors (context within the original)
    context: int  # the context per sequence it was chosen for
    original: int  # the model's original context
    scale: float  # the attention factor the rotated features are scaled by
    # the model's own module kept (long factors at every length): its config does not
    # rebuild its table bit for bit, so no other set is safe
    kept: bool = False

    @property
    def tag(self) -> str:
        """What tells two choices apart (the KV store's fingerprint takes it: keys rotated
        otherwise are other keys)."""
        which = "kept" if self.kept else "short" if self.short else "long"
        return f"longrope={which},scale={self.scale!r}"

    @property
    def note(self) -> str:
        if self.kept:
            return ("LongRoPE: the model's own long factors at every length (its RoPE is "
                    "not the one its config describes, so no other set is chosen)")
        which = "short" if self.short else "long"
        why = "within" if self.short else "past"
        return (f"LongRoPE: the {which} factors (context {self.context} per sequence, "
                f"{why} the original {self.original})")


def _scaling(tree: nn.Module) -> tuple[Any, dict[str, Any]] | None:
    """The model's args and its LongRoPE rope_scaling, or None."""
    args = getattr(tree, "args", None)
    scaling = getattr(args, "rope_scaling", None)
    if not isinstance(scaling, dict):
        return None
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind not in LONGROPE_TYPES or "short_factor" not in scaling:
        return None
    return args, scaling


def _build(stock: rope_utils.SuScaledRoPE, args: Any, scaling: dict[str, Any],
           factors: Any, scale: float | None) -> rope_utils.SuScaledRoPE:
    """mlx-lm's SuScaledRoPE as the model's own, with `factors` as its long ones."""
    return rope_utils.SuScaledRoPE(
        stock.dim, base=args.rope_theta, max_position_embeddings=args.max_position_embeddings,
        original_max_position_embeddings=stock.original_max_position_embeddings,
        short_factor=scaling["short_factor"], long_factor=factors, long_mscale=scale)


def _rebuilds(module: rope_utils.SuScaledRoPE, args: Any, scaling: dict[str, Any]) -> bool:
    """Whether the model's config rebuilds this module's table bit for bit (else the model
    builds its RoPE otherwise, and another set from the config would not be its own)."""
    try:
        again = _build(module, args, scaling, scaling["long_factor"], None)
    except (AttributeError, KeyError, TypeError, ValueError):
        return False
    return (again._freqs.shape == module._freqs.shape
            and mx.array_equal(again._freqs, module._freqs).item())


def _attention_factor(scaling: dict[str, Any], short: bool) -> float | None:
    """The checkpoint's attention factor for this choice; None: mlx-lm's default."""
    own = scaling.get("short_mscale" if short else "long_mscale")
    if own is not None:
        return float(own)
    given = scaling.get("attention_factor")
    return None if given is None else float(given)


def choose_longrope(tree: nn.Module, context: int | None = None) -> LongRopeChoice | None:
    """In `tree` (the engine's own copy of a model), every mlx-lm SuScaledRoPE becomes one
    rotating with the factors llama.cpp's rule picks for `context` tokens per sequence
    (None: the model's max_position_embeddings). Returns the choice; None for a model
    without LongRoPE. Where the model's RoPE is not the one its config describes (its
    table not rebuilt from it bit for bit), its own modules stay (`kept`)."""
    found = _scaling(tree)
    if found is None:
        return None
    args, scaling = found
    stock = [m for _, m in tree.named_modules() if type(m) is rope_utils.SuScaledRoPE]
    if not stock:
        return None
    context = int(context if context is not None
                  else getattr(args, "max_position_embeddings", 0))
    if not all(_rebuilds(m, args, scaling) for m in stock):
        return LongRopeChoice(False, context, stock[0].original_max_position_embeddings,
                              stock[0]._scale, kept=True)
    made: dict[int, rope_utils.SuScaledRoPE] = {}
    choice: LongRopeChoice | None = None

    def make(module: nn.Module) -> nn.Module | None:
        nonlocal choice
        if type(module) is not rope_utils.SuScaledRoPE:
            return None
        key = id(module)
        if key not in made:
            original = module.original_max_position_embeddings
            short = context <= original
            factors = scaling["short_factor"] if short else scaling["long_factor"]
            made[key] = _build(module, args, scaling, factors,
                               _attention_factor(scaling, short))
            choice = LongRopeChoice(short, context, original, made[key]._scale)
        return made[key]

    replace(tree, make)
    return choice
