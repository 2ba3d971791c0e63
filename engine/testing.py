"""The engine's test surface: what tests may read of an Engine's insides, and the one hook
through which they may wrap or break its parts. Tests use this module and never
`Engine._core`, so the core can be rearranged without rewriting them (a test in
tests/engine/test_testing_surface.py fails if one does reach in again).

- `facts(engine)`: a read-only snapshot of what the engine is doing and how it runs
  (ragged passes, run-ahead, the decode batch's rows, the compiled step, its module tree,
  the KV's packed form, the prefix cache's entries, the disk store, grammar drafts).
- `sequence(engine, request_id)`: an unfinished request's own record.
- `tick(engine, hand_over)`, `deliver(engine, events)`: one tick as the engine thread runs
  it, with its early hand-over.
- `internals(engine)`: the hook. The live parts, for spies (count passes, watch a decision),
  fault injection (a pass or a tick that raises), pokes (a budget set, an eviction run) and
  calling a part's own method (the runner's `view` of a cache); anything a test only reads
  belongs in `facts` instead.
- `runs_ragged(runner)`, `without_ragged_passes(monkeypatch)`: whether a model runner (a
  draft model's, one a test built) shares a tick's rows and chunks in one ragged pass, and
  every runner as on a GPU (no ragged pass) for one test: the one place tests name how the
  runner decides it.

Facts that the app could use too are in `Engine.stats()` (`kv_bytes_per_token`, the KV
budget, the prefix cache): tests read those there. Nothing outside tests imports this module
(an import-linter contract).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .grammar_planner import GrammarPlanner
from .worker import apply

if TYPE_CHECKING:
    import mlx.nn as nn
    import pytest

    from .cache import LayerCaches
    from .cpu_options import CpuOptions
    from .decode_batch import DecodeBatch
    from .engine import Engine
    from .engine_core import EngineCore, HandOver
    from .kv_policy import KvPolicy
    from .kv_quant import KvPacking
    from .model_runner import ModelRunner
    from .scheduler import BudgetController
    from .sequence import Sequence
    from .speculation import DraftSource, Speculation
    from .token_event import TokenEvent


@dataclass(frozen=True)
class EngineFacts:
    """What an engine is doing and how it runs, read at one moment (between ticks)."""

    ragged: bool  # a tick's decode rows and prompt chunks share one ragged pass (CPU kernels)
    running_ahead: bool  # the decode rows' next step was started before this tick's tokens
    batched: bool  # the decode rows run as one batch cache (not a lone row's own cache)
    decode_rows: tuple[str, ...]  # the decode batch's request ids, in row order
    spare_batch_buffers: bool  # an emptied batch's buffers are kept for the next batch
    batch_kv_bytes: int  # the decode batch's KV buffers (0: no batch), its spare ones apart
    compiled_traces: int | None  # graphs the compiled decode step traced; None: not compiled
    fast_cpu_kernels: bool  # the engine's own CPU attention/MLP kernels are in its model copy
    cpu: CpuOptions  # the CPU options the runner decided from (EngineConfig.cpu)
    module_tree: nn.Module  # the engine's own copy of the model, its kernels in it
    draft_source: DraftSource | None  # who drafts (speculative decoding); None: it is off
    grammar_drafts: int  # the most forced tokens a grammar row checks in a pass; 0: none
    kv_packing: KvPacking | None  # the form the KV rows are kept in; None: float rows
    fused_kv: bool  # the attention kernel reads the packed rows as they are
    prefix_kv: tuple[LayerCaches, ...]  # each cached prefix's KV layers, the cache's order
    whole_prefix_entries: bool  # a cached prefix is reused only whole (a recurrent state)
    disk_store_id: str | None  # the model id the disk store keys its files by; None: no store


def facts(engine: Engine) -> EngineFacts:
    """What `engine` is doing now; call it between ticks, or from a spy inside one (the
    rows at that moment), or on a started engine only for what does not change while it
    runs: how it runs, its model, its draft source, its disk store."""
    core = engine._core
    runner, batch, kv = core.runner, core.batch, core.memory
    grammar = [p for p in core.scheduler.planners if isinstance(p, GrammarPlanner)]
    return EngineFacts(
        ragged=runs_ragged(runner),
        running_ahead=batch.ahead is not None,
        batched=batch.is_batched,
        decode_rows=tuple(s.request_id for s in batch.seqs),
        spare_batch_buffers=batch.has_spare,
        batch_kv_bytes=sum(layer.nbytes for layer in batch.cache) if batch.cache else 0,
        compiled_traces=runner.compiled.traces if runner.compiled is not None else None,
        fast_cpu_kernels=runner.fast_cpu_kernels,
        cpu=runner.cpu,
        module_tree=runner.model,
        draft_source=core.speculation.source if core.speculation is not None else None,
        grammar_drafts=grammar[0].max_drafts if grammar else 0,
        kv_packing=runner.packing,
        fused_kv=runner.fused_kv,
        prefix_kv=tuple(e.cache for e in kv.prefix.entries) if kv.prefix is not None else (),
        whole_prefix_entries=kv.prefix is not None and kv.prefix.whole_entries,
        disk_store_id=kv.store.model_id if kv.store is not None else None,
    )


def sequence(engine: Engine, request_id: str) -> Sequence:
    """The engine's record of an unfinished request (its prompt and output tokens as the
    core holds them, which a stream sees only once delivered); KeyError once it ended."""
    return engine._core.by_id[request_id]


def tick(engine: Engine, hand_over: HandOver) -> list[TokenEvent]:
    """One tick as the engine thread runs it, on an engine that was not started: queued
    commands applied, then `EngineCore.step(hand_over)`, whose early events `hand_over`
    receives (it must deliver them: `deliver(engine, events)`); the tick's other events
    are delivered to their streams and returned."""
    if engine.running:
        raise RuntimeError("tick() is for an engine that was not started")
    apply(engine._core, engine._inbox.drain())
    events = engine._core.step(hand_over=hand_over)
    engine._deliver(events)
    return events


def deliver(engine: Engine, events: list[TokenEvent]) -> None:
    """Hand `events` to their requests' streams, as the engine does after a tick."""
    engine._deliver(events)


@dataclass(frozen=True)
class Internals:
    """The hook: an engine's live parts, to wrap (a spy that counts or logs, then calls the
    real method) or to break (a method that raises) from a test, with pytest's monkeypatch
    so they are restored. Reading a fact from them belongs in `EngineFacts`."""

    core: EngineCore  # the tick itself: `step` (a tick that raises); a weak reference to it
    runner: ModelRunner  # the forward passes: decode, prefill, prefill_many, ragged; head
    batch: DecodeBatch  # the decode rows: roll_back_ahead
    kv: KvPolicy  # every KV decision: keep_finished, keep_row, evict, prefix_budget
    budget: BudgetController  # the tick's token budget: observe
    speculation: Speculation | None  # drafting and its measured costs; None: off


def internals(engine: Engine) -> Internals:
    """The hook into `engine`'s live parts (see `Internals`)."""
    core = engine._core
    return Internals(core=core, runner=core.runner, batch=core.batch, kv=core.memory,
                     budget=core.scheduler.budget, speculation=core.speculation)


def runs_ragged(runner: ModelRunner) -> bool:
    """Whether `runner` (an engine's, a draft model's, or one a test built) runs a tick's
    decode rows and prompt chunks in one ragged pass (the CPU kernels' model)."""
    return runner.ragged_ok


def without_ragged_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model runner, for the rest of the test, as on a GPU: no ragged pass, so a
    batch's step is its own pass and drafts are checked in a padded pass of their own."""
    from .model_runner import ModelRunner

    monkeypatch.setattr(ModelRunner, "ragged_ok", property(lambda self: False))
