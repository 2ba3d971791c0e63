"""The decode batch: which sequences decode (one row each) and where their KV lives.

A lone sequence keeps its own cache and mlx-lm's single-sequence path. When a second one
joins, both caches become rows of one batch cache (engine.cache: rows copied in and out,
nothing recomputed), and a batch that shrinks back to one row hands that row its own cache
again. While a sequence decodes alone, its next step is built and
started before the current token is delivered (run-ahead, as mlx-lm's generate_step does),
and rolled back if anything else joins. On a GPU a batch runs ahead too (as mlx-lm's
BatchGenerator does): the next step's graph is built while the device computes this one,
and rolled back when a row leaves or joins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import mlx.core as mx

from . import cache as kv
from .kv_arena import ArenaKVCache
from .kv_policy import wants_kv
from .model_runner import ModelRunner
from .next_token import PassResult, sample_next
from .sampling import TokenLogprobs
from .sequence import Priority, Sequence, Status
from .slot_cache import SlotKVCache, plain

# (a finished row's sequence, the batch cache, its row) -> arrays written, or None
KeepRow = Callable[[Sequence, kv.LayerCaches, int], list[mx.array] | None]


class BeyondRows(NamedTuple):
    """What a decode batch's buffers hold beyond their rows' set-asides (bytes)."""

    padding: int  # rows in use beyond their set-asides
    empty: int  # rows not in use


class DecodeBatch:
    def __init__(self, runner: ModelRunner, context_length: int, keep_kv: bool,
                 batch_run_ahead: bool | None = None,
                 drafting: Callable[[list[Sequence]], bool] | None = None,
                 keep_row: KeepRow | None = None,
                 room: Callable[[], int] | None = None) -> None:
        self.runner = runner
        # The KV budget's free room (bytes; engine/kv_policy.py KvPolicy.free_bytes): the
        # most the batch buffers may hold beyond their rows (cache.limit_slack). None: no
        # limit (spare rows as the slot buffers round them)
        self.room = room
        # A finished row's KV kept without a copy of the whole row (engine/kv_policy.py
        # KvPolicy.keep_row): the arrays to evaluate, or None (then it is cut out)
        self.keep_row: KeepRow = keep_row or (lambda seq, cache, row: None)
        # Whether the rows draft at their next step (engine/speculation.py): its input is
        # read before the step starts, so it never runs ahead
        self.drafting = drafting or (lambda seqs: False)
        self.context_length = context_length
        self.keep_kv = keep_kv  # finished rows' caches are cut out and handed back
        # Batches run ahead too (None: on a GPU). On MLX's CPU backend the started step
        # shares the cores with this one and its token arrives only after both (sample()).
        self.batch_run_ahead = (mx.default_device() != mx.cpu if batch_run_ahead is None
                                else batch_run_ahead)
        self.seqs: list[Sequence] = []  # the rows, in order
        self.cache: kv.LayerCaches | None = None  # the batch cache, while 2+ rows decode
        # The next step, started before the current tokens were delivered: (the rows it was
        # started for, their next tokens, unevaluated). Rows with a grammar: their matcher took
        # this step's token early, and the started step drew from the mask that follows it.
        self.ahead: tuple[tuple[Sequence, ...], mx.array] | None = None
        # The buffers of the last batch cache, kept for the next batch while the engine has
        # work: a new one is fresh memory, and touching it cost 250-500 ms for 8 rows on a
        # CPU (page faults), a stall for the streams running when chats' turns start.
        self._spare: kv.LayerCaches | None = None

    def __len__(self) -> int:
        return len(self.seqs)

    def running(self) -> list[Sequence]:
        """The rows still decoding: rows that finished this tick stay in `seqs` until
        `drop_finished`, after their tokens are handed over (read-outs may come between)."""
        return [s for s in list(self.seqs) if not s.is_finished]

    @property
    def is_batched(self) -> bool:
        return self.cache is not None

    @property
    def has_interactive(self) -> bool:
        return any(s.priority is Priority.INTERACTIVE for s in self.seqs)

    @property
    def interactive_streaming_since(self) -> float | None:
        """When the longest-running interactive row got its first token (None: none
        decodes): a prompt submitted before it came with all of them (the scheduler's burst
        rule)."""
        times = [s.t_first_token for s in self.seqs
                 if s.priority is Priority.INTERACTIVE and s.t_first_token is not None]
        return min(times) if times else None

    # -- membership ---------------------------------------------------------------------
    def join(self, ready: list[Sequence], coming: int = 0) -> None:
        """Prefilled sequences start decoding; a solo cache moves into the batch as is.
        `coming`: how many more are prefilling (the batch makes room for them now, rather
        than grow, a copy of every row, when they join)."""
        ready = [s for s in ready if not s.is_finished]
        if not ready:
            return
        self.roll_back_ahead()  # the lone sequence is about to be batched
        for seq in ready:
            seq.status = Status.DECODING
        rows = len(self.seqs) + len(ready) + coming
        if self.cache is not None:
            self._limit_slack()
            kv.add_rows(self.cache, [s.cache for s in ready], rows, hand_over=True)
            moved = ready
        elif self.seqs or len(ready) > 1:
            # Promotion: the solo decoder's cache joins the batch as it is, no recompute.
            moved = self.seqs + ready
            self.cache = kv.start_batch([s.cache for s in moved], rows, reuse=self._spare,
                                        allow_native=self.runner.cpu.native,
                                        arena=self.runner.kv_arena,
                                        room=None if self.room is None else self.room(),
                                        hand_over=True)
            self._spare = None
        else:
            moved = []  # one sequence alone: it stays on the solo fast path
        for seq in moved:
            seq.cache = None
        self.seqs.extend(ready)

    def _limit_slack(self) -> None:
        """The buffers' room beyond their rows, from the KV budget's free room as it is now
        (admissions and cached prefixes change it)."""
        if self.cache is not None and self.room is not None:
            kv.limit_slack(self.cache, self.room())

    def drop_spare(self) -> None:
        """Let the last batch's buffers go (the engine is idle: nobody streams whom a fresh
        batch could stall, and a desktop app should not hold that memory)."""
        self._spare = None

    @property
    def has_spare(self) -> bool:
        return self._spare is not None

    @property
    def nbytes(self) -> int:
        """What the batch's buffers hold (0: no batch buffers)."""
        return sum(getattr(layer, "nbytes", 0) for layer in self.cache or ())

    @property
    def spare_nbytes(self) -> int:
        """What the kept buffers hold (they are not any request's: the KV budget's free
        room must have it, engine_core._drop_finished_rows)."""
        return sum(layer.nbytes for layer in self._spare) if self._spare is not None else 0

    def beyond_rows(self) -> BeyondRows:
        """What the buffers hold beyond their rows' set-asides, read in one pass over the
        layers: their padding (rows as wide as the longest one, finished rows' columns
        until they leave), which the KV budget takes from its room (KvPolicy.padding), and
        their empty rows (made ahead for prompts still prefilling, rows rounded up), made
        only within the free room, which a request admitted later must then leave them
        (KvPolicy.spare)."""
        cache = self.cache
        if cache is None:
            return BeyondRows(0, 0)
        held = sum(getattr(layer, "nbytes", 0) for layer in cache)
        rows = _rows_bytes(cache) if isinstance(cache[0], SlotKVCache) else held
        return BeyondRows(max(0, rows - _rows_reserved(self.seqs)), max(0, held - rows))

    def cut_empty_rows(self, room: int) -> None:
        """Cut the buffers to their rows (a layer at a time) where their empty rows hold
        more than `room`, the KV budget's free room: made within it, they lost it to
        cached prefixes kept since (issue #46 item 14)."""
        if self.cache is None or not isinstance(self.cache[0], SlotKVCache):
            return
        kv.limit_slack(self.cache, room)
        if any(layer.over_slack() for layer in self.cache):  # (else too little to copy for)
            self.roll_back_ahead()
            kv.shrink(self.cache)

    def held_with(self, reserved: int) -> int:
        """The running requests' KV in memory: `reserved` (every admitted request's
        set-aside) with the batch rows' set-asides replaced by the batch buffers' bytes
        (as wide as the longest row; a finished row's columns until it leaves)."""
        cache, seqs = self.cache, list(self.seqs)  # (read from any thread: engine.stats)
        if cache is None:
            return reserved
        held = sum(getattr(layer, "nbytes", 0) for layer in cache)
        return reserved - _rows_reserved(seqs) + held

    def release(self, seq: Sequence) -> kv.LayerCaches | None:
        """`seq` finished: forget its started step and hand back its own cache, if it has
        one (prefilling, or decoding alone). Batch rows leave in `drop_finished`, where the
        batch cache is cut once for all of them."""
        if self.ahead is not None and self.cache is None and self.ahead[0][0] is seq:
            # Its started step already fed the last token, so the cache holds it: kept.
            self.ahead = None
        cache, seq.cache = seq.cache, None
        return cache

    def drop_finished(self, keep: Callable[[Sequence, kv.LayerCaches], None],
                      spare_wanted: bool = True) -> None:
        """Finished rows leave; with `keep_kv`, the KV of those that `want_kv` is kept:
        written into its prompt's cached entry (`keep_row`), or cut out of the batch cache
        and handed to `keep`. One row at a time, each evaluated before the next: `keep`
        makes room for it among the cached prefixes, so a burst of rows ending together
        does not hold every copy beside the whole batch buffer at once. `spare_wanted`:
        False when the buffers would not be kept for a next batch (engine_core), so a batch
        that ends (no row left, or one) gives each layer's back as soon as its rows are
        copied out (`_copy_out_layer_by_layer`)."""
        keep_rows = [i for i, s in enumerate(self.seqs) if not s.is_finished]
        if len(keep_rows) == len(self.seqs):
            return
        self.roll_back_ahead()  # a started batch step fed the leaving rows too
        survivors = [self.seqs[i] for i in keep_rows]
        self._limit_slack()
        if self.cache is not None:
            if self.keep_kv:
                copy_out = []
                for i, seq in enumerate(self.seqs):
                    if not (seq.is_finished and wants_kv(seq)):
                        continue
                    # Its prompt's cached entry takes the row's new columns where it can
                    # (KvPolicy.keep_row); else the whole row is copied out. Either is
                    # evaluated before other rows move into its place (else the move
                    # would copy the whole buffer to keep them readable).
                    written = self.keep_row(seq, self.cache, i)
                    if written is not None:
                        mx.eval(written)
                    else:
                        copy_out.append(i)
                if len(keep_rows) <= 1 and not spare_wanted:
                    self._copy_out_layer_by_layer(copy_out, keep, survivors)
                    self.seqs = survivors
                    return
                if len(keep_rows) >= 2 and all(isinstance(c, SlotKVCache) for c in self.cache):
                    order = self._leave_layer_by_layer(copy_out, keep, keep_rows)
                    self.seqs = [self.seqs[i] for i in order]
                    return
                for i in copy_out:
                    row = kv.extract(self.cache, i)
                    mx.eval([layer.state for layer in row])
                    keep(self.seqs[i], row)
            if len(keep_rows) >= 2:
                # rows may be reordered (the last ones fill the gaps)
                survivors = [self.seqs[i] for i in kv.keep_rows(self.cache, keep_rows)]
                kv.shrink(self.cache)
            elif len(keep_rows) == 1:
                # Back to the solo fast path, with the cache as computed so far (with room
                # for its next steps: an exact copy would be copied again to grow)
                lone = survivors[0].cache = kv.extract(self.cache, keep_rows[0], room=True)
                # copied now: unevaluated, the copy held the whole batch buffer until the
                # row's next step, whether or not it is kept as the spare
                mx.eval([layer.state for layer in lone])
                self.cache, self._spare = None, self.cache
            else:
                self.cache, self._spare = None, self.cache
        self.seqs = survivors

    def _leave_layer_by_layer(self, rows: list[int],
                              keep: Callable[[Sequence, kv.LayerCaches], None],
                              keep_rows: list[int]) -> list[int]:
        """Rows leave slot buffers that go on with `keep_rows`: a layer at a time, the
        finished `rows` are copied out, the others close the gaps and the buffer is cut to
        fit them (`SlotKVCache.shrink`), so each layer's old buffer goes before the next
        layer's copies are made. Row by row, the copies were all made beside the whole
        buffer: +440 MiB at a busy session's highest MLX peak (docs/memory.md). Returns the
        kept rows' new order (`kv.keep_rows`)."""
        assert self.cache is not None
        copies: dict[int, kv.LayerCaches] = {i: [] for i in rows}
        order = keep_rows
        for layer in self.cache:
            _copy_rows_of(layer, rows, copies)
            order = layer.keep(keep_rows)  # the same order in every layer
            if layer.shrink():
                mx.eval(layer.keys, layer.values)
        for i in rows:
            keep(self.seqs[i], copies.pop(i))
        return order

    def _copy_out_layer_by_layer(self, rows: list[int],
                                 keep: Callable[[Sequence, kv.LayerCaches], None],
                                 survivors: list[Sequence]) -> None:
        """The batch ends (no row left, or one that goes on alone) and its buffers go: the
        finished `rows` and the lone survivor are copied out a layer at a time, each layer's
        buffer let go once its copies are made. Row by row, every copy was made beside the
        whole batch buffer: this leave was the highest MLX peak of a busy session's round
        (+160-470 MiB, docs/memory.md)."""
        cache, self.cache, self._spare = self.cache, None, None
        assert cache is not None
        lone = [i for i, s in enumerate(self.seqs) if not s.is_finished]
        copies: dict[int, kv.LayerCaches] = {i: [] for i in rows + lone}
        room = isinstance(cache[0], SlotKVCache | ArenaKVCache)
        for index in range(len(cache)):
            _copy_rows_of(cache[index], rows + ([] if room else lone), copies,
                          roomy=lone if room else [])
            cache[index] = None  # type: ignore[call-overload]  # its buffer goes
        for i in lone:
            survivors[0].cache = copies.pop(i)  # back to the solo fast path
        for i in rows:
            keep(self.seqs[i], copies.pop(i))

    # -- one decode step ----------------------------------------------------------------
    def step(self, more_coming: bool) -> PassResult:
        """One token for every row (forward pass + sampling). `more_coming`: something is
        queued or prefilling, so the next tick may not be this batch's plain decode.
        Raises what the model raises; the rows are then the caller's to fail."""
        seqs = list(self.seqs)
        logprobs = None
        try:
            if self.ahead is not None and self._started_for(seqs):
                picked = self.ahead[1]  # started last tick
            else:
                cache, tokens = self.step_inputs()
                picked, logprobs = self.sample(self.runner.decode(cache, tokens))
            self.ahead = None
            if not more_coming and self._may_run_ahead(seqs):
                if self.cache is not None:
                    kv.grow_ahead(self.cache, self.room)
                cache = self.cache if self.cache is not None else seqs[0].cache
                logits = self.runner.decode(cache, picked)
                if any(seq.matcher is not None for seq in seqs):
                    # A grammar's mask for the next token needs this one: the forward pass
                    # starts, then this step's tokens are read and taken by the matchers
                    mx.async_eval(logits)
                    for seq, token in zip(seqs, picked.tolist(), strict=True):
                        if seq.matcher is not None:
                            seq.matcher.take_early(token)
                # `picked` is not in the rows' output yet: the penalty and the step count it
                nxt, _ = sample_next(seqs, logits, pending=picked)
                mx.async_eval(nxt)
                self.ahead = (tuple(seqs), nxt)
            return PassResult.sampled(seqs, picked, logprobs)
        except Exception:
            self.ahead = None
            raise

    def can_share_pass(self) -> bool:
        """Whether this tick's step may run inside a ragged pass (engine/ragged_pass.py):
        no step started ahead (that one is used as it is), KV as slot rows or plain
        caches."""
        if self.ahead is not None or not self.seqs:
            return False
        if self.cache is not None:
            return isinstance(self.cache[0], SlotKVCache | ArenaKVCache)
        return plain(self.seqs[0].cache)

    def step_inputs(self) -> tuple[kv.LayerCaches, list[int]]:
        """The cache and input tokens of this tick's step (a started step rolled back, the
        batch's buffer grown ahead of need)."""
        self.roll_back_ahead()
        if self.cache is not None:
            kv.grow_ahead(self.cache, self.room)
            return self.cache, [s.next_input for s in self.seqs]
        return self.seqs[0].cache, [self.seqs[0].next_input]

    def sample(self, logits: mx.array
               ) -> tuple[mx.array, list[TokenLogprobs | None] | None]:
        """Each row's token from its logits (evaluated), and the rows' log-probabilities
        where asked."""
        picked, logprobs = sample_next(self.seqs, logits)
        # Computed before a run-ahead step starts: on MLX's CPU backend a token whose graph
        # goes out with the next step's arrives only when both are done (a newly solo
        # sequence's token took two forward passes; docs/performance.md).
        mx.eval(picked)
        return picked, logprobs

    def _started_for(self, seqs: list[Sequence]) -> bool:
        started = self.ahead[0] if self.ahead is not None else ()
        return len(started) == len(seqs) and all(a is b for a, b in zip(started, seqs, strict=True))

    def _may_run_ahead(self, seqs: list[Sequence]) -> bool:
        """Start the next step now only when it is likely to be these rows' plain decode,
        with room for one more token each (a row that ends now rolls it back)."""
        if self.cache is not None:
            if not (self.batch_run_ahead
                    and isinstance(self.cache[0], SlotKVCache | ArenaKVCache)):
                return False
        elif len(seqs) != 1 or not all(layer.is_trimmable() for layer in seqs[0].cache):
            return False
        if self.drafting(seqs):
            return False
        return all(seq.params.logprobs is None  # those are read from this step's logits
                   and seq.num_output_tokens + 2 <= seq.params.max_tokens
                   and seq.num_tokens + 2 <= self.context_length for seq in seqs)

    # -- checking drafts (engine/speculation.py) ---------------------------------------------
    def verify_alone(self, drafts: list[int]) -> mx.array:
        """The lone row's input and `drafts` in one pass: the logits after each
        (1 + len(drafts), vocab), unevaluated; its cache holds them all until `take_back`."""
        seq = self.seqs[0]
        self.roll_back_ahead()
        return self.runner.verify(seq.cache, [seq.next_input] + list(drafts))

    def can_verify_rows(self) -> bool:
        """Whether the batch's rows can check drafts in a pass of their own (`verify_rows`):
        its KV is slot rows (a GPU's batch, or a CPU's without the ragged pass)."""
        return self.cache is not None and isinstance(self.cache[0], SlotKVCache | ArenaKVCache)

    def verify_rows(self, drafts: list[list[int]]) -> mx.array:
        """Every row's input and its `drafts[row]` in one pass of (rows, 1 + the most drafts)
        positions, shorter rows padded with their input: the logits after each row's input
        and drafts, row after row (sum of 1 + len(drafts[row]), vocab), unevaluated. Each
        row's cache then holds its input and drafts (the padding is taken back here, the
        refused drafts by `take_back`)."""
        self.roll_back_ahead()
        kv.grow_ahead(self.cache, self.room)
        width = 1 + max(map(len, drafts))
        pads = [width - 1 - len(d) for d in drafts]
        inputs, rows, positions = [], [], []
        for row, (seq, row_drafts, pad) in enumerate(zip(self.seqs, drafts, pads, strict=True)):
            inputs.append([seq.next_input] + list(row_drafts) + [seq.next_input] * pad)
            rows += [row] * (1 + len(row_drafts))
            positions += range(1 + len(row_drafts))
        logits = self.runner.verify_rows(self.cache, inputs, rows, positions)
        for row, pad in enumerate(pads):
            if pad:
                self.take_back(row, pad)
        return logits

    def take_back(self, row: int, n: int) -> None:
        """Forget row `row`'s last `n` keys (its drafts that were refused)."""
        if self.cache is not None:
            for layer in self.cache:
                layer.take_back(row, n)
        else:
            for layer in self.seqs[row].cache:
                layer.trim(n)

    def roll_back_ahead(self) -> None:
        """Undo a started step that will not be used: its cache entries are taken back."""
        if self.ahead is None:
            return
        seqs, _ = self.ahead
        self.ahead = None
        if self.cache is not None:
            for layer in self.cache:
                layer.unwrite()
        elif seqs[0].cache is not None:
            for layer in seqs[0].cache:
                layer.trim(1)


def _rows_bytes(cache: kv.LayerCaches) -> int:
    """A slot batch's rows in use, as wide as the longest (every layer holds the same
    rows' lengths: read once, not per layer)."""
    first = cache[0]
    return first.rows_nbytes // first.cell_bytes * sum(c.cell_bytes for c in cache)


def _copy_rows_of(layer: Any, rows: list[int], copies: dict[int, kv.LayerCaches],
                  roomy: list[int] | None = None) -> None:
    """One layer's copies of `rows` (and of `roomy`, with room to decode into), evaluated
    now, each added to its row's list in `copies`: a leave a layer at a time."""
    made = [layer.extract(i) for i in rows] + [layer.extract(i, room=True)
                                               for i in roomy or []]
    mx.eval([c.state for c in made])
    for i, c in zip(rows + (roomy or []), made, strict=True):
        copies[i].append(c)


def _rows_reserved(seqs: Iterable[Sequence]) -> int:
    """The KV budget's set-asides of the batch's rows still running (finished rows' were
    handed back)."""
    return sum(s.kv_reserved for s in seqs if not s.is_finished)
