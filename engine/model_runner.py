"""The model's calls, and how a tick runs them.

`ModelRunner.execute(plan, batch, ends)` is the one place that chooses a tick's passes: one
ragged pass for decode rows and prompt chunks, or prefill passes (padded where several
prompts share one) then the rows' step (`step_rows`; its compiled replay and run-ahead are
the decode batch's), with drafts checked in the ragged pass, alone, or in a padded pass of
the rows (engine/tick_passes.py runs each). Both return the passes' results, which the
engine core accepts (the runner never calls back into it). `draft_check` tells the
scheduler's planners which of those this tick's rows would get. The calls themselves:
prefill chunks (one sequence, or several in one pass), a ragged pass, a decode step, draft
checks. A chunk that ends a prompt also returns the logits of its last token, so a
prompt's first token costs no extra forward pass; only that position goes through the
output head.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import mlx.core as mx
import mlx.nn as nn

from . import cache as kv
from . import cpu_kernels, cpu_layers, cpu_memory, kv_memory, kv_quant, model_fixes, module_tree
from . import tick_passes as passes
from .cache import LayerCaches
from .compiled_step import CompiledDecode
from .cpu_options import CpuOptions
from .longrope import LongRopeChoice, choose_longrope
from .native import layers
from .planners import DraftCheck
from .ragged_pass import RaggedPass
from .scheduler import TickPlan
from .sequence import Status
from .slot_cache import plain
from .vision import image_mask, mrope
from .vision.deepstack import StackedRows

if TYPE_CHECKING:
    from .decode_batch import DecodeBatch
    from .next_token import PassResult

Head = Callable[[mx.array], mx.array]


class ModelRunner:
    def __init__(self, model: nn.Module, fast_cpu_kernels: bool = True,
                 compiled_decode: bool = True, cpu: CpuOptions | None = None,
                 kv_bits: int | None = None, context_length: int | None = None) -> None:
        # The CPU switches: the same value the loader decided from (EngineConfig.cpu)
        self.cpu = cpu if cpu is not None else CpuOptions.from_env()
        # Quantized KV (EngineConfig.kv_bits, engine/kv_quant.py): every pass's caches are
        # seen through `view`, which packs the new keys and values; None: float, untouched
        self.packing = kv_memory.kv_packing(model, kv_bits)
        # Copying a history into a batched prefill and back (2 x its KV) should cost at most
        # half the weight read of the pass it saves (group_prefill).
        per_token = (kv_memory.bytes_per_token(model) if self.packing is None
                     else kv_memory.bytes_per_token(model, self.packing))
        self.max_batched_history = kv_memory.weights_bytes(model) // (4 * per_token)
        # The engine's own modules over the same arrays (engine/module_tree.py), where its
        # kernels go; the loaded model and mlx / mlx-lm's classes stay untouched.
        self.model = model = module_tree.clone(model)
        # LongRoPE's factors for the context per sequence (None: the model's own), fixed
        # here, before the native layers read its table (engine/longrope.py)
        self.longrope: LongRopeChoice | None = choose_longrope(model, context_length)
        # M-RoPE (a Qwen2-VL's text model): where each pass says its positions
        self.positions = mrope.feed_of(model)
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
        # the native kernel reads the packed rows (else they are dequantized for attention)
        self.fused_kv = (self.packing is not None and self.fast_cpu_kernels and on_cpu
                         and cpu_layers.reads_packed_kv(model, self.cpu))
        self._ragged_model = (self.fast_cpu_kernels and self.head is not None
                              and not kv.windowed(model)  # its masks have no window
                              and cpu_layers.supports_ragged(model, self.cpu)
                              and self._ragged_agrees())
        # The decode batch's rows as column ranges of one arena per layer (engine/kv_arena.py,
        # issue #47): native ops only, so on the CPU with the extension; BATCHCHAT_KV_ARENA=1
        self.kv_arena = (self.cpu.kv_arena and on_cpu and self.cpu.native
                         and self.fast_cpu_kernels and self.cpu.attention
                         and self._arena_agrees())
        # A batch's decode step from one compiled graph (engine/compiled_step.py): checked
        # with the native kernels, so only with them
        self.compiled = (CompiledDecode(model, self._kernels, self.view)
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

    def _arena_agrees(self) -> bool:
        """Whether two rows decoding over an arena give the logits of slot rows, bit for
        bit, on this model (one whose layers read KV other than their own cache's, Gemma
        4's KV-shared layers say, gets the arena's whole buffer there: slot rows)."""
        def rows() -> list[LayerCaches]:
            caches = [kv.new_cache(self.model), kv.new_cache(self.model)]
            self.prefill(caches[0], [1, 2, 3])
            self.prefill(caches[1], [4])
            return caches

        try:
            got = self._step_apart(kv.start_batch(rows(), arena=True))
            want = self._step_apart(kv.start_batch(rows()))
            return mx.array_equal(got, want).item()
        except Exception:  # noqa: BLE001 - any reason at all: slot rows
            return False

    def _step_apart(self, cache: LayerCaches) -> mx.array:
        with self._kernels():
            out = self.model(mx.array([[5], [6]]), cache=self.view(cache))[:, -1, :]
        mx.eval(out)
        return out

    @property
    def ragged_ok(self) -> bool:
        """Whether a tick's decode rows and prefill chunks may share one pass
        (engine/ragged_pass.py): it picks the wanted positions' logits through the head."""
        return self._ragged_model and self.head is not None

    @property
    def shares_passes(self) -> bool:
        """The tick budget's cost model (engine/scheduler.py): beside decode rows a prompt
        chunk costs only its own tokens, since they run in one pass."""
        return self.ragged_ok

    # -- the tick ---------------------------------------------------------------------------
    def execute(self, plan: TickPlan, batch: DecodeBatch,
                ends: passes.RowEnds) -> tuple[passes.TickRun, list[PassResult]]:
        """Run the tick `plan` says (its chunks, its decode rows `batch` with their drafts) up
        to the rows' step: one ragged pass for the rows and the chunks where it can
        (`run.rows_done`: the tick's passes are all run), else the prefill passes apart; the
        rows then step in `step_rows`, once the caller joined the prompts these passes
        finished to the batch. Returns what the passes measured and their results in pass
        order, for the caller to accept (nothing here touches a sequence's output)."""
        run = passes.TickRun(len(batch), batch.is_batched, drafted=plan.num_drafted)
        if self._one_pass(plan, batch):
            results = passes.run_shared(self, plan, batch, ends, run)
            if results is not None:
                run.rows_done = True
                return run, results
        return run, passes.run_prefill(self, plan.prefill, self.max_batched_history, run)

    def step_rows(self, plan: TickPlan, batch: DecodeBatch, ends: passes.RowEnds,
                  run: passes.TickRun, more_coming: bool) -> list[PassResult]:
        """The decode rows' step after the prefill passes ran apart (`execute`), the prompts
        they finished already in `batch`: a lone row that was already decoding checking its
        drafts, a batch checking them in a padded pass, or a plain step (compiled replay; run
        ahead unless `more_coming`: something is queued or prefilling). Its result (none
        without rows), for the caller to accept."""
        run.rows, run.batched = len(batch), batch.is_batched
        t = time.perf_counter()
        results = []
        if run.rows:
            # drafts were planned for the rows before the prefill passes: a lone row that
            # was already decoding checks them here, or a batch without the ragged pass
            # in a tick without prefill
            drafts, lone = plan.drafts, batch.seqs[0]  # (unbatched: the one row)
            if 0 in drafts and not batch.is_batched and lone.status is Status.DECODING:
                results.append(passes.run_checked_alone(batch, drafts[0], ends, run))
            elif drafts and self._rows_check_apart(plan, batch):
                results.append(passes.run_checked_rows(batch, drafts, ends, run))
            else:
                run.drafted = 0
                results.append(passes.run_decode(batch, more_coming, run))
        run.decode_s = time.perf_counter() - t
        return results

    def draft_check(self, plan: TickPlan, batch: DecodeBatch) -> DraftCheck | None:
        """How the decode rows of `plan` (not yet drafted) would check drafts this tick
        (None: they cannot; a step started ahead is the caller's to rule out): a batch in
        the ragged pass, or without one in a padded pass of its own in a tick without
        prefill; a lone row in the ragged pass when it shares one with the chunks, else in
        its own pass when no prefill pass runs before it."""
        if not len(batch):
            return None
        if batch.is_batched:
            if self.ragged_ok and batch.can_share_pass() and self.may_share(plan, batch):
                return "ragged"
            return "padded" if self._rows_check_apart(plan, batch) else None
        if plan.prefill:
            # else the prefill passes run first; the lone row steps after them plainly
            return "ragged" if self._shares_pass(plan, batch) else None
        return "alone"

    def _one_pass(self, plan: TickPlan, batch: DecodeBatch) -> bool:
        """Whether the tick runs as one ragged pass: its chunks may share it, or a batch's
        rows check drafts in it."""
        return self._shares_pass(plan, batch) or bool(plan.drafts and batch.is_batched
                                                      and self.ragged_ok
                                                      and self.may_share(plan, batch))

    def _shares_pass(self, plan: TickPlan, batch: DecodeBatch) -> bool:
        """Whether the model allows one ragged pass and the tick has chunks to prefill beside
        decode rows, or several chunks (no padding, no history copied into a batch), every
        one with a plain cache."""
        if not (self.ragged_ok and plan.prefill):
            return False
        if len(batch) and not batch.can_share_pass():
            return False
        if not self.may_share(plan, batch):
            return False
        if not len(batch) and len(plan.prefill) < 2:
            return False
        return all(plain(seq.cache) for seq, _ in plan.prefill)

    def _rows_check_apart(self, plan: TickPlan, batch: DecodeBatch) -> bool:
        """Whether the batch checks drafts in a pass of its own: it cannot share the ragged
        pass (the model's, or this tick's: an M-RoPE image request's rows), its KV is slot
        rows, and no prefill pass runs before its step (the prompts it finishes would join
        the batch first)."""
        return (batch.is_batched and not (self.ragged_ok and self.may_share(plan, batch))
                and not plan.prefill and batch.can_verify_rows())

    def may_share(self, plan: TickPlan, batch: DecodeBatch) -> bool:
        """Whether the tick's sequences may share a ragged pass: not an M-RoPE image
        request's rows or chunks (its positions are not its indices; the pass carries one
        position a token and no delta: engine/vision/mrope.py), nor a chunk holding images
        whose tokens attend both ways (engine/vision/image_mask.py: a pass's own masks)."""
        if any(seq.chunk_blocks(n) for seq, n in plan.prefill):
            return False  # a chunk's images attend both ways: its own pass's masks
        return self.positions is None or not any(
            mrope.placed(seq) for seq in [*batch.seqs, *(s for s, _ in plan.prefill)])

    def shifted(self, seqs: list[Any]) -> AbstractContextManager[None]:
        """The passes inside run the rows of `seqs` (a batch's, in row order) each at its
        own M-RoPE delta (nothing to do for other models and text rows)."""
        deltas = mrope.shifts(seqs) if self.positions is not None else None
        return nullcontext() if deltas is None else self.positions.feeding(shifts=deltas)

    # -- the calls --------------------------------------------------------------------------
    def view(self, cache: list[Any]) -> list[Any]:
        """The caches as the model's layers get them: as they are with float KV; behind
        kv_quant.PackedLayer with quantized KV."""
        return kv_quant.wrap(cache, self.packing, self.fused_kv)

    def _kernels(self) -> AbstractContextManager[None]:
        return cpu_kernels.active(self.cpu) if self.fast_cpu_kernels else nullcontext()

    def prefill(self, cache: LayerCaches, tokens: list[int],
                logits: bool = False, embeddings: mx.array | None = None,
                positions: mx.array | None = None,
                blocks: tuple[tuple[int, int], ...] = ()) -> mx.array | None:
        """Run prompt tokens into `cache`. With `logits`, also return the last token's
        logits (shape (1, vocab), evaluated); otherwise none are computed. `embeddings`
        (len(tokens), hidden): the tokens' input rows, fed instead of looking them up (an
        image request's prompt, engine/vision/); `positions` (3, len(tokens)): an M-RoPE
        image request's (engine/vision/mrope.py); `blocks`: the chunk's images whose tokens
        attend both ways, relative to it (engine/vision/image_mask.py)."""
        levels = None
        if isinstance(embeddings, StackedRows):  # Qwen3-VL: DeepStack's rows beside
            embeddings, levels = embeddings.rows, embeddings.levels
        fed = (nullcontext() if positions is None or self.positions is None
               else self.positions.feeding(positions=positions, levels=levels))
        both = nullcontext() if not blocks else image_mask.attending(self.model, blocks)
        with fed, both:
            out = self._forward(mx.array([max(t, 0) for t in tokens])[None], cache,
                                [len(tokens) - 1] if logits else None,
                                embeddings=None if embeddings is None else embeddings[None])
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
                 rows: list[int] | None = None,
                 embeddings: mx.array | None = None) -> mx.array | None:
        """The model over `inputs` (B, L) (or over `embeddings` (B, L, hidden), their input
        rows); with `positions`, the logits of token `positions[j]` of row `rows[j]`
        (default: row j), shape (len(positions), vocab)."""
        rows = list(range(len(positions))) if positions is not None and rows is None else rows
        fed = {} if embeddings is None else {"input_embeddings": embeddings}
        with self._kernels():
            if positions is None:  # logits built lazily and never evaluated: not computed
                self.model(inputs, cache=self.view(cache), **fed)
                return None
            if self.head is None:  # a model whose head is unknown: all positions' logits
                full = self.model(inputs, cache=self.view(cache), **fed)
                return full[mx.array(rows), mx.array(positions)]
            hidden = self.model.model(inputs, cache=self.view(cache), **fed)
            return self.head(hidden[mx.array(rows), mx.array(positions)][:, None])[:, 0]

    def ragged(self, decode: LayerCaches | None, tokens: list[int],
               chunks: list[tuple[LayerCaches, list[int]]], logits: list[bool],
               drafts: list[list[int]] | None = None,
               embeddings: list[mx.array | None] | None = None,
               ) -> tuple[mx.array | None, mx.array | None]:
        """One pass over decode rows (`decode`: the batch cache, or a lone row's cache;
        `tokens`: one per row) and prefill chunks (each its own cache and tokens). Returns
        the rows' logits (rows, vocab) and those of the last token of each chunk flagged in
        `logits` (in order), both evaluated (None where there are none), with every cache
        written. On an exception every cache is as it was.

        `drafts` (one list per row, engine/speculation.py): tokens each row also feeds
        after its input, to check them; the rows' logits are then, row after row, those
        after its input and after each of its drafts (1 + len(drafts) each), and each row's
        cache holds its input and all its drafts (the caller takes back those refused).

        `embeddings` (one per chunk, None for a text chunk): a chunk's input rows, fed in
        its segment instead of its tokens' (an image request's prompt); the other segments'
        rows are the embedding table's, as the model would look them up."""
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
        fed = {}
        if embeddings is not None and any(e is not None for e in embeddings):
            fed["input_embeddings"] = self._rows_fed(flat, chunks, embeddings)
        try:
            with self._kernels():
                hidden = self.model.model(mx.array([max(t, 0) for t in flat])[None],
                                          cache=self.view(ragged.layers), **fed)
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

    def _rows_fed(self, flat: list[int], chunks: list[tuple[LayerCaches, list[int]]],
                  embeddings: list[mx.array | None]) -> mx.array:
        """A ragged pass's input rows (1, T, hidden): the table's rows of the pass's tokens,
        with each chunk that has embeddings given its own in its segment (chunks are the
        pass's last segments, in order)."""
        # (Gemma 4: the rows its merge gives text tokens, scaled: engine/vision/scaled_rows.py)
        table = getattr(self.model.model, "input_rows", None) or self.model.model.embed_tokens
        start = len(flat) - sum(len(piece) for _, piece in chunks)
        parts, at = [], 0
        for (_, piece), given in zip(chunks, embeddings, strict=True):
            if given is not None:
                if start > at:
                    parts.append(table(mx.array([max(t, 0) for t in flat[at:start]])))
                parts.append(given)
                at = start + len(piece)
            start += len(piece)
        if at < len(flat):
            parts.append(table(mx.array([max(t, 0) for t in flat[at:]])))
        return mx.concatenate(parts)[None]

    def prefill_rows(self, chunks: list[tuple[LayerCaches, list[int]]],
                     logits: list[bool]) -> mx.array | None:
        """Each cache's chunk, in one ragged pass where the model allows it, else a pass
        each; the last token's logits of each chunk flagged in `logits` (in order,
        evaluated), None where none is."""
        if self.ragged_ok and len(chunks) > 1:
            return self.ragged(None, [], chunks, logits)[1]
        outs = [self.prefill(cache, piece, logits=want)
                for (cache, piece), want in zip(chunks, logits, strict=True)]
        wanted = [o for o in outs if o is not None]
        return mx.concatenate(wanted) if wanted else None

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
        if (self.compiled is not None and CompiledDecode.usable(cache)
                and not (self.positions is not None and self.positions.busy)):
            return self.compiled.step(cache, tokens)
        inputs = tokens if isinstance(tokens, mx.array) else mx.array(tokens)
        with self._kernels():
            return self.model(inputs[:, None], cache=self.view(cache))[:, -1, :]


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
