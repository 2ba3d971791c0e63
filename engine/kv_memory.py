"""How much KV memory a token takes, and the default KV budget for this machine and model.

The default (issue #28; docs/memory.md has the reasoning and worked examples):

    tokens   = max_concurrent * min(context, SLOT_TOKENS) + min(context, SPARE_TOKENS)
    cap      = available // MEMORY_SHARE
    budget   = max(MIN_DEFAULT_BUDGET, min(cap, per_token * max(tokens, context + step)))
    prefixes = min(budget, max(MIN_DEFAULT_BUDGET, per_token * tokens))

Every slot gets a short chat turn's KV plus one long request's worth; running requests may
use up to one full-context sequence (a request without max_tokens over the API runs to the
context's end), cached prefixes only `prefixes`; never more than a quarter of the memory
that is free once the weights are loaded. The old default (a quarter of the device's
memory, whatever the model) gave a 135M model 5.9 GiB on a 24 GB machine, and the prefix
cache grew into it. `EngineConfig.kv_budget_bytes` (or BATCHCHAT_KV_BUDGET_MB) overrides
both figures.

A hybrid model (Qwen 3.5) also keeps a fixed state a sequence (`state_bytes`): each running
request sets it aside beside its KV (engine/kv_policy.py), and the default adds
max_concurrent of them to `budget` (taken from `available` first).
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten
from mlx_lm.models.cache import KVCache

from . import cache as kv
from . import kv_quant
from .kv_formula import (  # noqa: F401 - kv_memory's names since issue #28
    MEMORY_SHARE,
    MIN_DEFAULT_BUDGET,
    SLOT_TOKENS,
    SPARE_TOKENS,
    formula,
    host_available_bytes,
    wanted_tokens,
)
from .kv_quant import KvPacking
from .units import format_bytes


@dataclass(frozen=True, slots=True)
class KvBudget:
    """A KV budget, the part cached prefixes may hold, and how they were chosen, in words
    (the stats panel's tooltip)."""

    nbytes: int  # running requests and cached prefixes together
    prefix_nbytes: int  # the most cached prefixes keep (<= nbytes)
    basis: str


def bytes_per_token(model: nn.Module, packing: KvPacking | None = None) -> int:
    """KV bytes one more token adds to a sequence's cache (all layers, keys and values),
    from the shapes a one-token forward pass leaves in a fresh cache; `packing`: with KV
    quantized so (engine/kv_quant.py)."""
    probe = kv.new_cache(model)
    model(mx.array([[0]]), cache=kv_quant.wrap(probe, packing, fused=False))
    total = 0
    for layer in probe:
        for arr in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(arr, mx.array):  # (batch, heads, positions, dim)
                total += arr.shape[1] * arr.shape[3] * arr.dtype.size
    return max(total, 1)


def kv_packing(model: nn.Module, bits: int | None) -> KvPacking | None:
    """The quantized form of this model's KV at `bits` (None: float): groups that divide
    every layer's key and value head size (from a one-token pass)."""
    if bits is None:
        return None
    probe = kv.new_cache(model)
    model(mx.array([[0]]), cache=probe)
    dims = {arr.shape[3] for layer in probe for arr in (getattr(layer, "keys", None),
                                                      getattr(layer, "values", None))
            if isinstance(arr, mx.array)}
    packings = {KvPacking.for_head(bits, d) for d in dims}
    if not packings:
        return None
    # one form for every layer: the finest group, turned only if every head size can be
    return KvPacking(bits, min(p.group for p in packings), all(p.turned for p in packings))


def state_bytes(model: nn.Module) -> int:
    """Bytes of the state one sequence keeps whatever its length (0 for a model of attention
    layers only): a hybrid model's recurrent layers (Qwen 3.5: mlx-lm's ArraysCache, a
    convolution's last inputs and a state matrix a head), from what a one-token pass leaves
    in the caches that cannot be cut back (engine/cache.py fixed_state)."""
    probe = kv.new_cache(model)
    if all(c.is_trimmable() for c in probe):
        return 0  # no pass needed: a plain model holds none
    model(mx.array([[0]]), cache=probe)
    return sum(a.nbytes for c in probe if not c.is_trimmable()
               for a in c.cache if isinstance(a, mx.array))


def weights_bytes(model: nn.Module) -> int:
    return sum(v.nbytes for _, v in tree_flatten(model.parameters()))


def available_memory(weights: int) -> tuple[int, str]:
    """Memory the KV may come from once the weights are loaded, and what it is: available RAM
    on the CPU backend; on a Mac the smaller of that and Metal's recommended working set less
    the weights (unified memory); on CUDA the GPU's memory less the weights."""
    host = host_available_bytes()
    if mx.default_device() == mx.cpu:
        return host, "available RAM"
    info = mx.device_info()
    working_set = info.get("max_recommended_working_set_size")
    if isinstance(working_set, int) and working_set > 0:
        return max(0, min(host, working_set - weights)), "available unified memory"
    for key in ("memory_size", "total_memory"):
        value = info.get(key)
        if isinstance(value, int) and value > 0:
            return max(0, value - weights), "GPU memory less the weights"
    return host, "available RAM"


def default_budget(model: nn.Module, context_length: int, max_concurrent: int,
                   per_token: int | None = None, per_sequence: int = 0) -> KvBudget:
    """The default KV budget for `model` on this machine (`formula`), with its reasoning.
    `per_sequence`: a hybrid model's fixed state a sequence (`state_bytes`); every slot's
    is added to the formula's figure, taken from the memory first, as the model library
    counts it (engine/loader/support.py gguf_memory), so the default admits as many
    sequences as for a model without one."""
    per_token = per_token or bytes_per_token(model)
    available, where = available_memory(weights_bytes(model))
    states = per_sequence * max_concurrent
    available = max(0, available - states)
    nbytes, prefix = formula(per_token, context_length, max_concurrent, available)
    if nbytes == available // MEMORY_SHARE:
        why = f"1/{MEMORY_SHARE} of {format_bytes(available)} {where}"
    elif nbytes == MIN_DEFAULT_BUDGET:
        why = f"the least default, {format_bytes(MIN_DEFAULT_BUDGET)}"
    else:
        tokens = max(wanted_tokens(context_length, max_concurrent),
                     context_length + KVCache.step)
        why = (f"{max_concurrent} slots x {min(context_length, SLOT_TOKENS)} + "
               f"{min(context_length, SPARE_TOKENS)} tokens"
               + ("" if nbytes == per_token * wanted_tokens(context_length, max_concurrent)
                  else f", or one sequence of {tokens}")
               + f", x {format_bytes(per_token)} a token")
    if states:
        why += (f"; + {max_concurrent} recurrent states x {format_bytes(per_sequence)}")
        nbytes += states
    if prefix < nbytes:
        why += f"; cached prefixes at most {format_bytes(prefix)}"
    return KvBudget(nbytes, prefix, f"default: {why}")


def choose_budget(override: int | None, model: nn.Module, context_length: int,
                  max_concurrent: int, per_token: int | None = None,
                  per_sequence: int = 0) -> KvBudget:
    """`override` (EngineConfig.kv_budget_bytes) when set, for both figures (a hybrid
    model's states are inside it); else the default."""
    if override is not None:
        return KvBudget(override, override,
                        "set: EngineConfig.kv_budget_bytes / BATCHCHAT_KV_BUDGET_MB")
    return default_budget(model, context_length, max_concurrent, per_token, per_sequence)

