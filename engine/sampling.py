"""Per-request samplers composed from mlx-lm's, and sampling one token per batch row.

On the CPU backend, with the native extension, the rows that draw at a temperature are
drawn in one native op (engine.native.sample_tokens): the same tokens kept as mlx-lm's
top-p / min-p / top-k filters keep, without MLX's CPU sort of the whole vocabulary (top-p
cost ~7 ms a row, so 16 chats at the app's default sampling ran at half the greedy speed).
On a GPU they are drawn in one graph of MLX ops (engine.device_sampler, the same contract).
Each row's draw is a uniform number made from its seed and step, so a seeded request still
reproduces itself in any batch. `CpuOptions.sampler = False` (BATCHCHAT_NATIVE_SAMPLER=0,
given to each RowSampler as `batched`): mlx-lm's sampler a row at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.sample_utils import make_logits_processors, make_sampler

from . import device_sampler, native
from .cpu_options import CpuOptions
from .sampling_params import SamplingParams

_MASK64 = (1 << 64) - 1


def _batch_sampler() -> Callable[[mx.array, mx.array, mx.array], mx.array] | None:
    """What draws all sampled rows at once here: the native op on the CPU, the MLX graph on a
    GPU; None: mlx-lm's sampler a row at a time (no native build on the CPU)."""
    if mx.default_device() != mx.cpu:
        return device_sampler.sample_tokens
    return native.sample_tokens if native.available() else None


def batched_draw(options: CpuOptions) -> bool:
    """Whether sampled rows may be drawn in one op (RowSampler's `batched`): asked for, and
    on the CPU only with the native extension."""
    return options.sampler and (options.native or mx.default_device() != mx.cpu)


class RowSampler:
    """One request's sampling: mlx-lm's sampler and logits processors, plus its own seed."""

    __slots__ = ("params", "seed", "batched", "is_plain_greedy", "_sampler", "_processors")

    def __init__(self, params: SamplingParams, seed: int, batched: bool = True) -> None:
        self.params = params
        self.seed = seed
        # drawn with the batch's other sampled rows in one op (False: mlx-lm's sampler, a row
        # at a time; the engine's CpuOptions.sampler)
        self.batched = batched
        penalty = params.repetition_penalty if params.repetition_penalty != 1.0 else None
        self._processors: list[Callable[[mx.array, mx.array], mx.array]] = (
            make_logits_processors(
                repetition_penalty=penalty,
                repetition_context_size=params.repetition_context_size,
            )
            if penalty is not None
            else []
        )
        self._sampler = make_sampler(
            temp=params.temperature,
            top_p=params.top_p if params.top_p < 1.0 else 0.0,
            min_p=params.min_p,
            top_k=params.top_k,
        )
        # Plain greedy rows share one argmax over the whole batch.
        self.is_plain_greedy = params.is_greedy and not self._processors

    def process(self, history: list[int], logits: mx.array,
                pending: mx.array | None = None) -> mx.array:
        """The logits the sampler draws from: after the repetition penalty, if any.
        `pending`: the history's last token, not yet read back (a step started ahead)."""
        if self._processors:
            size = self.params.repetition_context_size
            if pending is None:
                context = mx.array(history[-size:])
            else:
                known = history[-(size - 1):] if size > 1 else []
                context = mx.concatenate([mx.array(known, dtype=pending.dtype),
                                          pending.reshape(-1)])
            for processor in self._processors:
                logits = processor(context, logits)
        return logits

    @property
    def penalty_window(self) -> int:
        """Tokens of the history the repetition penalty reads (0: no penalty)."""
        return self.params.repetition_context_size if self._processors else 0

    def step_uniform(self, step: int) -> float:
        """This request's uniform draw in [0, 1) at `step`: a function of its seed and the
        step only, so the same in any batch (SplitMix64's mix; 24 bits, exact in float32).
        Computed here: an MLX key and draw per row cost two ops a row a step."""
        z = (self.seed * 0x9E3779B97F4A7C15 + step + 1) & _MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return ((z ^ (z >> 31)) >> 40) / float(1 << 24)

    def native_params(self) -> list[float]:
        """temperature, top_p (0: off), min_p, top_k as engine.native.sample_tokens takes."""
        p = self.params
        return [p.temperature, p.top_p if p.top_p < 1.0 else 0.0, p.min_p, float(p.top_k)]

    def sample(self, history: list[int], logits: mx.array, step: int,
               pending: mx.array | None = None) -> mx.array:
        """Sample from one row of logits (shape (1, V)); `step` = tokens generated so far."""
        logits = self.process(history, logits, pending)
        if self.params.is_greedy:
            return mx.argmax(logits, axis=-1)
        # A per-step seed makes a seeded request reproduce itself in any batch.
        mx.random.seed(hash((self.seed, step)) & 0xFFFFFFFF)
        return self._sampler(logits - mx.logsumexp(logits, axis=-1, keepdims=True))


def penalty_table(samplers: Seq[RowSampler], histories: Seq[list[int]], pending: bool
                  ) -> tuple[list[list[int]], list[float]] | None:
    """Each row's repetition-penalty columns (the same width for all; -1: the row's pending
    token) and factor, or None when no row has a penalty. A row without a penalty or a
    history gets column 0 scaled by 1 (the same value written back)."""
    sizes = [s.penalty_window for s in samplers]
    if not any(sizes):
        return None
    width = max(sizes)
    idx, scale = [], []
    for s, history, size in zip(samplers, histories, sizes, strict=True):
        keep = size - pending if size else 0
        known = history[-keep:] if keep > 0 else []
        if not pending and not known:
            idx.append([0] * width)
            scale.append(1.0)
            continue
        cols = known if not pending else known + [-1]  # -1: the pending token
        idx.append([cols[0]] * (width - len(cols)) + cols)  # repeats write the same value
        scale.append(s.params.repetition_penalty if size else 1.0)
    return idx, scale


def penalize_rows(samplers: Seq[RowSampler], histories: Seq[list[int]], logits: mx.array,
                  pending: mx.array | None = None) -> mx.array:
    """Every row's repetition penalty in three ops for the whole batch (a gather, the
    sign-aware scaling, a scatter), the values mlx-lm's per-row processor gives: per-row
    processors cost ~4 ops a row a step. `pending` as in sample_rows. (On the CPU the native
    sampler applies `penalty_table` in its own op instead: sample_rows.)"""
    table = penalty_table(samplers, histories, pending is not None)
    if table is None:
        return logits
    at = mx.array(table[0], dtype=mx.int32)
    if pending is not None:  # the last column is each row's token not yet read back
        at = mx.where(at < 0, pending.astype(mx.int32)[:, None], at)
    chosen = mx.take_along_axis(logits, at, axis=1)
    factor = mx.array(table[1], dtype=logits.dtype)[:, None]
    chosen = mx.where(chosen < 0, chosen * factor, chosen / factor)
    return mx.put_along_axis(logits, at, chosen, axis=1)


def _draw_rows(draw: Callable[..., mx.array], samplers: Seq[RowSampler],
               histories: Seq[list[int]], rows: mx.array, u: mx.array, params: mx.array,
               pending: mx.array | None) -> mx.array:
    """The rows' tokens, their repetition penalty first: inside the native op on the CPU
    (issue #48: the gather, scaling and scatter were ~0.4 ms CPU of a 1.5B token's
    critical path), else penalize_rows' MLX ops before the device sampler."""
    if draw is not native.sample_tokens:
        return draw(penalize_rows(samplers, histories, rows, pending), u, params)
    table = penalty_table(samplers, histories, pending is not None)
    if table is None:
        return draw(rows, u, params)
    return draw(rows, u, params, penalty_at=mx.array(table[0], dtype=mx.int32),
                penalty=mx.array(table[1], dtype=mx.float32), pending=pending)


def sample_rows(
    samplers: Seq[RowSampler],
    histories: Seq[list[int]],
    steps: Seq[int],
    logits: mx.array,
    pending: mx.array | None = None,
) -> mx.array:
    """One token per row of `logits` (shape (B, V)), each row with its own sampler; not yet
    evaluated, so the run-ahead step can be built on it. `pending` (B,): each row's last
    token when it is not in `histories` yet (the run-ahead step's)."""
    if all(s.is_plain_greedy for s in samplers):
        return mx.argmax(logits, axis=-1)
    greedy = mx.argmax(logits, axis=-1) if any(s.is_plain_greedy for s in samplers) else None
    drawn = [i for i, s in enumerate(samplers) if not s.params.is_greedy]
    batched: dict[int, mx.array] = {}
    if drawn and all(samplers[i].batched for i in drawn) \
            and (draw := _batch_sampler()) is not None:
        rows = logits[mx.array(drawn)] if len(drawn) < len(samplers) else logits
        u = mx.array([samplers[i].step_uniform(steps[i]) for i in drawn], dtype=mx.float32)
        params = mx.array([samplers[i].native_params() for i in drawn], dtype=mx.float32)
        tokens = _draw_rows(draw, [samplers[i] for i in drawn], [histories[i] for i in drawn],
                            rows.astype(mx.float32), u, params,
                            None if pending is None else pending[mx.array(drawn)])
        if len(drawn) == len(samplers):  # every row sampled: no per-row slices to join
            return tokens
        batched = {i: tokens[j : j + 1] for j, i in enumerate(drawn)}
    picked = []
    for i, sampler in enumerate(samplers):
        if sampler.is_plain_greedy:
            picked.append(greedy[i : i + 1])
        elif i in batched:
            picked.append(batched[i])
        else:
            last = None if pending is None else pending[i : i + 1]
            picked.append(sampler.sample(histories[i], logits[i : i + 1], steps[i],
                                         last).reshape(1))
    return mx.concatenate(picked)


@dataclass(frozen=True, slots=True)
class TokenLogprobs:
    logprob: float  # the chosen token's
    top: tuple[tuple[int, float], ...]  # (token id, log-probability), most likely first


def row_logprobs(
    samplers: Seq[RowSampler],
    histories: Seq[list[int]],
    logits: mx.array,
    picked: mx.array,
) -> list[TokenLogprobs | None] | None:
    """For the rows whose request asked (`SamplingParams.logprobs`), the chosen token's
    log-probability and the top alternatives, from the log-softmax of the logits the sampler
    draws from (after any repetition penalty and a grammar's mask, before temperature:
    OpenAI's and vLLM's convention). None when no row asked, so a batch without such
    requests pays nothing."""
    rows = [i for i, s in enumerate(samplers) if s.params.logprobs is not None]
    if not rows:
        return None
    wanted = []
    for i in rows:
        row = samplers[i].process(histories[i], logits[i : i + 1]).astype(mx.float32)[0]
        lp = row - mx.logsumexp(row, axis=-1)
        chosen = lp[picked[i]]
        k = min(samplers[i].params.logprobs, lp.shape[-1])
        top = mx.argpartition(-lp, kth=k - 1)[:k] if k else mx.zeros((0,), dtype=mx.int32)
        wanted.append((chosen, top, lp[top]))
    mx.eval(wanted)
    out: list[TokenLogprobs | None] = [None] * len(samplers)
    for i, (chosen, top, values) in zip(rows, wanted, strict=True):
        # a grammar's masked tokens (-inf) are not alternatives: fewer than asked, then
        pairs = sorted(((t, v) for t, v in zip(top.tolist(), values.tolist(), strict=True)
                        if v != -math.inf), key=lambda p: -p[1])
        out[i] = TokenLogprobs(chosen.item(), tuple(pairs))
    return out
