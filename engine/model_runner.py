"""The model's calls: prefill chunks (one sequence, or several in one pass) and a decode step."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext

import mlx.core as mx
import mlx.nn as nn

from . import cache as kv
from . import cpu_kernels, cpu_memory
from .cache import LayerCaches


class ModelRunner:
    def __init__(self, model: nn.Module, fast_cpu_kernels: bool = True) -> None:
        self.model = model
        # On the CPU backend the model's SiLU and softmax go through faster kernels, but
        # only for the passes built here (see engine/cpu_kernels.py).
        self.fast_cpu_kernels = fast_cpu_kernels and cpu_kernels.install(model)
        if mx.default_device() == mx.cpu:
            cpu_memory.keep_freed_memory()  # big CPU buffers are reused, not re-faulted
            self._install_native_qmv(model)

    @staticmethod
    def _install_native_qmv(model: nn.Module) -> None:
        """engine.native (issue #19, opt-in with BATCHCHAT_NATIVE_QMV): a quantized model's
        small-batch linears on the native CPU kernel (engine/native/patch.py)."""
        if os.environ.get("BATCHCHAT_NATIVE_QMV", "").strip() in ("", "0"):
            return
        from .native import patch

        patch.install(model, patch.max_rows_from_env())

    def _kernels(self) -> AbstractContextManager[None]:
        return cpu_kernels.active() if self.fast_cpu_kernels else nullcontext()

    def prefill(self, cache: LayerCaches, tokens: list[int]) -> None:
        """Run prompt tokens into `cache`; their logits are never needed, so never computed."""
        with self._kernels():
            self.model(mx.array(tokens)[None], cache=cache)
        mx.eval([layer.state for layer in cache])

    def prefill_many(self, caches: list[LayerCaches], chunks: list[list[int]]) -> list[LayerCaches]:
        """Run several sequences' chunks in one forward pass; return their updated caches.

        A pass costs a read of all the weights however few tokens it has, so a burst of
        prompts shares one. Chunks are right-padded to the longest and the cache is
        left-padded to the longest history (mlx-lm's BatchKVCache prepare/finalize): padding
        is masked out of attention and dropped when each row is extracted.
        """
        batch = kv.merge(caches)
        width = max(len(c) for c in chunks)
        right = [width - len(c) for c in chunks]
        for layer in batch:
            layer.prepare(right_padding=right)
        with self._kernels():
            self.model(mx.array([c + [0] * r for c, r in zip(chunks, right, strict=True)]),
                       cache=batch)
        for layer in batch:
            layer.finalize()
        rows = [kv.extract(batch, i) for i in range(len(chunks))]
        mx.eval([layer.state for row in rows for layer in row])
        return rows

    def decode(self, cache: LayerCaches, tokens: list[int] | mx.array) -> mx.array:
        """One step for every row of `cache`: logits of shape (rows, vocab), not yet evaluated.

        `tokens` may itself be unevaluated (the run-ahead step feeds the previous sample).
        """
        inputs = tokens if isinstance(tokens, mx.array) else mx.array(tokens)
        with self._kernels():
            return self.model(inputs[:, None], cache=cache)[:, -1, :]
