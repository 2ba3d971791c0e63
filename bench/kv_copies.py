"""`python -m bench.kv_copies`: the KV bytes copied between layouts, by kind, per join/leave.

A sequence's KV is prefilled into mlx-lm's per-sequence `KVCache`, copied into a slot row
of the decode batch when it joins (engine/slot_cache.py), and copied out again when it
leaves (for the prefix cache, or back to a lone row's own cache). This bench counts the
bytes each of those copies moves, on the bundled model in step mode, in three scenarios
(16 prompts at once; 8 prompts arriving every 3 ticks; 4 chats of 3 turns, their next
turns restoring the last one's KV), and prints, per scenario, the bytes by kind and per
join and leave, and the time `DecodeBatch.drop_finished` took for the rows that left.
Counted at the Python calls that copy (wrapped here, nothing changed):

- `prefill growth`: a `KVCache` outgrowing its buffer (mlx-lm's `concatenate` copies what
  it holds: a prompt's chunks, a restored prefix's first write, a lone row's 256-step
  growth);
- `join`: `SlotKVCache.add` (a prefilled prompt, or the lone row, copied into slot rows);
- `leave: row out`: `SlotKVCache.extract` (a finished row for the prefix cache; the last
  row back to a lone cache);
- `leave: row moves`: `SlotKVCache._move` (the last rows into the gaps, copied twice:
  out, then in);
- `slot growth` / `slot shrink`: a slot buffer copied into a bigger or smaller one;
- `leave: new columns`: a finished row's columns its prompt's entry lacked, written into
  that entry's buffer (`PrefixCache.extend`, the tree after #47's leave change);
- `prefix compact`: a prefix entry copied to its exact size.

Run it on two trees to compare (the scenarios are deterministic: greedy, step mode):

    cd BEFORE && PYTHONPATH=. python -m bench.kv_copies
    cd AFTER && PYTHONPATH=. python -m bench.kv_copies
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from engine.preload import ensure_preloads

COPIED: Counter[str] = Counter()
EVENTS: Counter[str] = Counter()


def _column_bytes(keys: Any, values: Any) -> int:
    """Bytes of one position of one row (keys and values, all heads)."""
    return keys.shape[1] * (keys.shape[3] * keys.dtype.size + values.shape[3] * values.dtype.size)


def instrument() -> None:
    """Wrap the calls that copy KV between layouts with counters."""
    from mlx_lm.models.cache import KVCache

    from engine import prefix_cache
    from engine.decode_batch import DecodeBatch
    from engine.slot_cache import SlotKVCache

    grow = KVCache.update_and_fetch

    def kv_update(self: Any, keys: Any, values: Any) -> Any:
        if self.keys is not None and self.offset + keys.shape[2] > self.keys.shape[2]:
            COPIED["prefill growth"] += self.offset * _column_bytes(self.keys, self.values)
        return grow(self, keys, values)

    KVCache.update_and_fetch = kv_update  # type: ignore[method-assign]

    def slot_bytes(layer: Any) -> int:
        return _column_bytes(layer.keys, layer.values)

    add, extract, move = SlotKVCache.add, SlotKVCache.extract, SlotKVCache._move
    ensure, shrink = SlotKVCache._ensure, SlotKVCache.shrink

    def slot_add(self: Any, caches: list[Any], rows: int = 0) -> None:
        if self.keys.shape[0]:  # (a new buffer's first rows are counted below)
            COPIED["join"] += sum(c.offset for c in caches) * slot_bytes(self)
        return add(self, caches, rows)

    def slot_extract(self: Any, row: int, **kwargs: Any) -> Any:
        COPIED["leave: row out"] += self.lengths[row] * slot_bytes(self)
        return extract(self, row, **kwargs)

    def slot_move(self: Any, moves: list[tuple[int, int]]) -> None:
        COPIED["leave: row moves"] += 2 * sum(self.lengths[m] for _, m in moves) * slot_bytes(self)
        return move(self, moves)

    def slot_ensure(self: Any, rows: int, columns: int) -> None:
        if rows > self.keys.shape[0] or columns > self.keys.shape[2]:
            COPIED["slot growth"] += sum(self.lengths) and (
                len(self.lengths) * max(self.lengths) * slot_bytes(self))
        return ensure(self, rows, columns)

    def slot_shrink(self: Any) -> bool:
        before = self.keys
        shrank = shrink(self)
        if shrank and self.lengths:
            COPIED["slot shrink"] += (len(self.lengths) * max(self.lengths)
                                      * _column_bytes(before, self.values))
        return shrank

    SlotKVCache.add = slot_add  # type: ignore[method-assign]
    SlotKVCache.extract = slot_extract  # type: ignore[method-assign]
    SlotKVCache._move = slot_move  # type: ignore[method-assign]
    SlotKVCache._ensure = slot_ensure  # type: ignore[method-assign]
    SlotKVCache.shrink = slot_shrink  # type: ignore[method-assign]
    new = SlotKVCache.__init__

    def slot_init(self: Any, caches: list[Any], *args: Any, **kwargs: Any) -> None:
        first = next(c for c in caches if c.keys is not None)
        COPIED["join"] += sum(c.offset for c in caches) * _column_bytes(first.keys,
                                                                        first.values)
        new(self, caches, *args, **kwargs)

    SlotKVCache.__init__ = slot_init  # type: ignore[method-assign]

    compacted = prefix_cache.compacted

    def compact(cache: Any, n: int) -> Any:
        for layer in cache:
            keys = getattr(layer, "keys", None)
            if keys is not None and keys.shape[2] != n:
                COPIED["prefix compact"] += n * _column_bytes(keys, layer.values)
        return compacted(cache, n)

    prefix_cache.compacted = compact

    if hasattr(prefix_cache.PrefixCache, "extend"):  # the tree after issue #47's leave
        extend = prefix_cache.PrefixCache.extend

        def prefix_extend(self: Any, tokens: list[int], read: Any) -> Any:
            def counted(i: int, a: int, b: int) -> Any:
                keys, values = read(i, a, b)
                COPIED["leave: new columns"] += (b - a) * _column_bytes(keys, values)
                return keys, values
            return extend(self, tokens, counted)

        prefix_cache.PrefixCache.extend = prefix_extend

    join, drop = DecodeBatch.join, DecodeBatch.drop_finished

    def batch_join(self: Any, ready: list[Any], coming: int = 0) -> None:
        EVENTS["joins"] += sum(not s.is_finished for s in ready)
        return join(self, ready, coming)

    def batch_drop(self: Any, keep: Any) -> Any:
        leaving = sum(s.is_finished for s in self.seqs)
        EVENTS["leaves"] += leaving
        t = time.perf_counter()
        out = drop(self, keep)
        if leaving:
            EVENTS["leave_us"] += round((time.perf_counter() - t) * 1e6)
        return out

    DecodeBatch.join = batch_join  # type: ignore[method-assign]
    DecodeBatch.drop_finished = batch_drop  # type: ignore[method-assign]


def run(loaded: Any, prompts: list[list[int]], tokens: int, every: int = 0,
        turns: int = 1) -> None:
    """`prompts` all at once or one every `every` ticks; with `turns` > 1, each reply is
    followed by a next turn on the same prompt and reply (the prefix cache restores it)."""
    from engine.config import EngineConfig
    from engine.engine import Engine
    from engine.sampling import SamplingParams
    from engine.worker import apply

    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=17))
    core = engine._core  # (a bench may not import engine.testing: its internals directly)
    core.scheduler.budget.observe = lambda *a, **k: None  # the plan must not follow times
    follow = "\nAnd then?"
    pending = [(p, turns) for p in prompts]
    live: list[tuple[Any, list[int], int]] = []
    tick = 0
    while pending or live or engine.has_work():
        while pending and (not every or tick % every == 0):
            prompt, left = pending.pop(0)
            stream = engine.submit(prompt_tokens=prompt, params=SamplingParams(
                max_tokens=tokens, temperature=0))
            live.append((stream, prompt, left))
            if every:
                break
        apply(core, engine._inbox.drain())
        engine._deliver(core.step())
        for item in list(live):
            stream, prompt, left = item
            if stream.finished:
                live.remove(item)
                if left > 1:
                    extra = list(loaded.tokenizer.encode(follow, add_special_tokens=False))
                    pending.append((prompt + list(stream.tokens) + extra, left - 1))
        tick += 1


def report(label: str) -> None:
    total = sum(COPIED.values())
    joins, leaves = EVENTS["joins"], EVENTS["leaves"]
    kinds = ", ".join(f"{k} {v / 2**20:.2f}" for k, v in sorted(COPIED.items()))
    print(f"{label}: joins {joins}, leaves {leaves}; MiB copied {total / 2**20:.2f} "
          f"({kinds}); per join+leave {total / max(1, joins) / 2**10:.0f} KiB; rows leaving "
          f"took {EVENTS['leave_us'] / 1e3:.1f} ms in all")
    COPIED.clear()
    EVENTS.clear()


def main() -> None:
    ensure_preloads()
    from engine.engine import Engine
    from engine.loader import load_model

    from . import scenarios

    loaded = load_model("bundled")
    instrument()
    templating = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                        context_length=loaded.context_length)
    stories = [scenarios.chat_tokens(templating, t) for t in scenarios.prompt_texts(16)]
    COPIED.clear()
    run(loaded, stories, 32)
    report("burst16")
    run(loaded, stories[:8], 32, every=3)
    report("staggered8")
    run(loaded, stories[:4], 24, turns=3)
    report("chats4x3")


if __name__ == "__main__":
    main()
