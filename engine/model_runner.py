"""The model's calls: prefill chunks (one sequence, or several in one pass) and a decode step.

A chunk that ends a prompt also returns the logits of its last token, so a prompt's first
token costs no extra forward pass; only that position goes through the output head.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import mlx.core as mx
import mlx.nn as nn

from . import cache as kv
from . import cpu_kernels, cpu_layers, cpu_memory, model_fixes, module_tree
from .cache import LayerCaches
from .compiled_step import CompiledDecode
from .cpu_options import CpuOptions
from .native import layers
from .ragged_pass import RaggedPass

Head = Callable[[mx.array], mx.array]


class ModelRunner:
    def __init__(self, model: nn.Module, fast_cpu_kernels: bool = True,
                 compiled_decode: bool = True, cpu: CpuOptions | None = None) -> None:
        # The CPU switches: the same value the loader decided from (EngineConfig.cpu)
        self.cpu = cpu if cpu is not None else CpuOptions.from_env()
        # The engine's own modules over the same arrays (engine/module_tree.py), where its
        # kernels go; the loaded model and mlx / mlx-lm's classes stay untouched.
        self.model = model = module_tree.clone(model)
        model_fixes.install(model)  # where mlx-lm's module cannot take a batch
        # On the CPU backend the model's SiLU and softmax go through faster kernels, but
        # only for the passes built here (engine/cpu_layers.py, engine/cpu_kernels.py).
        self.fast_cpu_kernels = fast_cpu_kernels and cpu_layers.install(model)
        on_cpu = mx.default_device() == mx.cpu
        if on_cpu:
            if self.cpu.malloc_tuning:
                cpu_memory.keep_freed_memory()  # big CPU buffers are reused, not re-faulted
            # engine.native (issue #19): a quantized model's linears on the native kernels
            layers.install(model, self.cpu)
        self.head = output_head(model)
        self._ragged_model = (self.fast_cpu_kernels and self.head is not None
                              and not kv.windowed(model)  # its masks have no window
                              and cpu_layers.supports_ragged(model, self.cpu)
                              and self._ragged_agrees())
        # A batch's decode step from one compiled graph (engine/compiled_step.py): checked
        # with the native kernels, so only with them
        self.compiled = (CompiledDecode(model, self._kernels)
                         if compiled_decode and self.fast_cpu_kernels and on_cpu
                         and self.cpu.native else None)

    def _ragged_agrees(self) -> bool:
        """Whether two chunks in one ragged pass give the logits of two separate passes, bit
        for bit, on this model (a model whose passes do not run in float32 on the native
        kernels, say, keeps its passes apart)."""
        new = lambda: kv.new_cache(self.model)  # noqa: E731
        try:
            _, got = self.ragged(None, [], [(new(), [1, 2, 3]), (new(), [4])], [True, True])
            want = mx.concatenate([self.prefill(new(), [1, 2, 3], logits=True),
                                   self.prefill(new(), [4], logits=True)])
            return got is not None and mx.array_equal(got, want).item()
        except Exception:  # noqa: BLE001 - any reason at all: the separate passes
            return False

    @property
    def ragged_ok(self) -> bool:
        """Whether a tick's decode rows and prefill chunks may share one pass
        (engine/ragged_pass.py): it picks the wanted positions' logits through the head."""
        return self._ragged_model and self.head is not None

    def _kernels(self) -> AbstractContextManager[None]:
        return cpu_kernels.active(self.cpu) if self.fast_cpu_kernels else nullcontext()

    def prefill(self, cache: LayerCaches, tokens: list[int],
                logits: bool = False) -> mx.array | None:
        """Run prompt tokens into `cache`. With `logits`, also return the last token's
        logits (shape (1, vocab), evaluated); otherwise none are computed."""
        out = self._forward(mx.array(tokens)[None], cache, [len(tokens) - 1] if logits else None)
        mx.eval([layer.state for layer in cache] + ([] if out is None else [out]))
        return out

    def prefill_many(self, caches: list[LayerCaches], chunks: list[list[int]],
                     logits: list[bool] | None = None,
                     ) -> tuple[list[LayerCaches], mx.array | None]:
        """Run several sequences' chunks in one forward pass; return their updated caches
        and, for the rows flagged in `logits`, their last token's logits (one row each, in
        order; evaluated).

        A pass costs a read of all the weights however few tokens it has, so a burst of
        prompts shares one. Chunks are right-padded to the longest and the cache is
        left-padded to the longest history (mlx-lm's BatchKVCache prepare/finalize): padding
        is masked out of attention and dropped when each row is extracted.
        """
        batch = kv.merge(caches)
        width = max(len(c) for c in chunks)
        right = [width - len(c) for c in chunks]
        for layer in batch:  # lengths: what a rotating (sliding-window) cache needs
            layer.prepare(right_padding=right, lengths=[len(c) for c in chunks])
        rows_wanted = [i for i, want in enumerate(logits or []) if want]
        out = self._forward(
            mx.array([c + [0] * r for c, r in zip(chunks, right, strict=True)]), batch,
            [len(chunks[i]) - 1 for i in rows_wanted] if rows_wanted else None, rows_wanted)
        for layer in batch:
            layer.finalize()
        rows = [kv.extract(batch, i) for i in range(len(chunks))]
        mx.eval([layer.state for row in rows for layer in row] + ([] if out is None else [out]))
        return rows, out

    def _forward(self, inputs: mx.array, cache: LayerCaches, positions: list[int] | None,
                 rows: list[int] | None = None) -> mx.array | None:
        """The model over `inputs` (B, L); with `positions`, the logits of token
        `positions[j]` of row `rows[j]` (default: row j), shape (len(positions), vocab)."""
        rows = list(range(len(positions))) if positions is not None and rows is None else rows
        with self._kernels():
            if positions is None:  # logits built lazily and never evaluated: not computed
                self.model(inputs, cache=cache)
                return None
            if self.head is None:  # a model whose head is unknown: all positions' logits
                full = self.model(inputs, cache=cache)
                return full[mx.array(rows), mx.array(positions)]
            hidden = self.model.model(inputs, cache=cache)
            return self.head(hidden[mx.array(rows), mx.array(positions)][:, None])[:, 0]

    def ragged(self, decode: LayerCaches | None, tokens: list[int],
               chunks: list[tuple[LayerCaches, list[int]]], logits: list[bool],
               drafts: list[list[int]] | None = None,
               ) -> tuple[mx.array | None, mx.array | None]:
        """One pass over decode rows (`decode`: the batch cache, or a lone row's cache;
        `tokens`: one per row) and prefill chunks (each its own cache and tokens). Returns
        the rows' logits (rows, vocab) and those of the last token of each chunk flagged in
        `logits` (in order), both evaluated (None where there are none), with every cache
        written. On an exception every cache is as it was.

        `drafts` (one list per row, engine/speculation.py): tokens each row also feeds
        after its input, to check them; the rows' logits are then, row after row, those
        after its input and after each of its drafts (1 + len(drafts) each), and each row's
        cache holds its input and all its drafts (the caller takes back those refused)."""
        assert self.head is not None
        rows = len(tokens)
        counts = [len(d) for d in drafts] if drafts is not None else None
        ragged = RaggedPass(decode if rows else None, rows,
                            [(cache, len(piece)) for cache, piece in chunks], counts)
        flat = list(tokens)
        picks = list(range(rows))
        if counts is not None and any(counts):
            picks = []
            if ragged.drafted or not rows:  # slot rows: drafts after the rows, in row order
                at = rows
                for row, row_drafts in enumerate(drafts):
                    picks += [row] + list(range(at, at + len(row_drafts)))
                    flat += row_drafts
                    at += len(row_drafts)
            else:  # a lone row: its drafts follow its input in its segment
                flat += drafts[0]
                picks = list(range(1 + len(drafts[0])))
        n_rows = len(picks)
        for (_, piece), last in zip(chunks, logits, strict=True):
            flat += piece
            if last:
                picks.append(len(flat) - 1)
        try:
            with self._kernels():
                hidden = self.model.model(mx.array(flat)[None], cache=ragged.layers)
                out = self.head(hidden[0, mx.array(picks)][:, None])[:, 0] if picks else None
            mx.eval(ragged.cache_states() + ([] if out is None else [out]))
        except Exception:
            ragged.undo()
            raise
        finally:
            ragged.close()
        if out is None:
            return None, None
        return (out[:n_rows] if rows else None), (out[n_rows:] if len(picks) > n_rows else None)

    def verify(self, cache: LayerCaches, tokens: list[int]) -> mx.array:
        """A lone row's input and drafts in one pass (engine/speculation.py): the logits
        after each of `tokens` (len(tokens), vocab), not yet evaluated; `cache` then holds
        them all (the caller trims those refused)."""
        return self._forward(mx.array(tokens)[None], cache, list(range(len(tokens))),
                             [0] * len(tokens))

    def verify_rows(self, cache: LayerCaches, inputs: list[list[int]], rows: list[int],
                    positions: list[int]) -> mx.array:
        """A batch's rows, each its input and drafts (padded to one width), in one pass
        (engine/speculation.py, where rows cannot share a ragged pass): the logits at
        (rows[j], positions[j]) for each j, not yet evaluated; `cache` then holds every
        position written (the caller takes back the padding and the refused drafts)."""
        return self._forward(mx.array(inputs), cache, positions, rows)

    def decode(self, cache: LayerCaches, tokens: list[int] | mx.array) -> mx.array:
        """One step for every row of `cache`: logits of shape (rows, vocab), not yet evaluated.

        `tokens` may itself be unevaluated (the run-ahead step feeds the previous sample).
        """
        if self.compiled is not None and CompiledDecode.usable(cache):
            return self.compiled.step(cache, tokens)
        inputs = tokens if isinstance(tokens, mx.array) else mx.array(tokens)
        with self._kernels():
            return self.model(inputs[:, None], cache=cache)[:, -1, :]


def output_head(model: nn.Module) -> Head | None:
    """The model's output head as a function of the inner model's hidden states, when the
    model is mlx-lm's usual `self.model(...)` then `lm_head` (or tied embeddings) and a
    check on a few tokens agrees; None otherwise (then every position's logits are made
    and the wanted ones picked). Lets a prompt's last chunk skip the head for all its other
    positions (a 512-token chunk's full logits cost as much as a tenth of the pass)."""
    inner = getattr(model, "model", None)
    if not isinstance(inner, nn.Module):
        return None
    if "lm_head" in model:
        head: Head = model.lm_head
    elif isinstance(getattr(inner, "embed_tokens", None), nn.Module):
        head = inner.embed_tokens.as_linear
    else:
        return None
    probe = mx.array([[1, 2, 3]])
    try:
        want = model(probe)[:, -1]
        got = head(inner(probe)[:, -1:])[:, 0]
        same = want.shape == got.shape and mx.allclose(want, got, rtol=1e-3, atol=1e-3).item()
    except Exception:  # noqa: BLE001 - any other shape of model: the generic path
        return None
    return head if same else None
