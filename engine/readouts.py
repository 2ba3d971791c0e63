"""What other threads may read of the core while it runs: the aggregate and one row per
unfinished request. Counters are read under the stats lock; the rest are single reads of
plain attributes, atomic under the GIL."""

from __future__ import annotations

import time

import mlx.core as mx

from .engine_core import EngineCore
from .sequence import Status
from .stats import EngineStats, RequestProgress, RequestRow, RequestStats


def engine_stats(core: EngineCore) -> EngineStats:
    now = time.perf_counter()
    st, budget = core.stats, core.scheduler.budget
    prefix = core.memory.prefix.stats() if core.memory.prefix is not None else None
    spec = core.speculation
    with st.lock:
        tps, mean_batch = st.window_rates(now)
        itl_p99, itl_max = st.gap_figures(now)
        decoding = core.batch.running()
        stall = max((now - s.t_last_token for s in decoding if s.t_last_token is not None),
                    default=0.0)
        last = st.ticks[-1] if st.ticks else None
        return EngineStats(
            active=core.num_active,
            prefilling=len(core.scheduler.prefilling),
            decoding=len(decoding),
            queued=core.scheduler.num_waiting,
            completed=st.completed,
            cancelled=st.cancelled,
            failed=st.failed,
            total_generated_tokens=st.total_generated,
            total_prompt_tokens=st.total_prompt,
            tokens_per_s=tps,
            mean_batch_size=mean_batch,
            batch_size=len(decoding),
            budget=budget.last_budget,
            step_s=last.step_s if last else 0.0,
            step_s_ewma=budget.step_s,
            ticks=st.num_ticks,
            memory_bytes=mx.get_active_memory(),
            peak_memory_bytes=mx.get_peak_memory(),
            uptime_s=now - st.t_start,
            kv_bytes_per_token=core.memory.per_token,
            kv_bits=core.runner.packing.bits if core.runner.packing is not None else 0,
            kv_tokens_per_mib=(1 << 20) / core.memory.per_token,
            kv_budget_bytes=core.memory.budget,
            kv_budget_basis=core.memory.basis,
            kv_prefix_budget_bytes=core.memory.prefix_budget,
            kv_reserved_bytes=core.memory.reserved,
            # what the running requests' KV holds in memory: their set-asides, or the
            # batch buffers in place of its rows' where those hold more (shown, not
            # budgeted: docs/memory.md)
            kv_running_bytes=max(core.memory.reserved,
                                 core.batch.held_with(core.memory.reserved)),
            kv_state_bytes_per_sequence=core.memory.per_sequence,
            itl_p99_s=itl_p99,
            itl_max_s=itl_max,
            stall_s=stall,
            speculative=core.speculative,  # "off" where the model cannot draft
            drafted_tokens=spec.drafted if spec is not None else 0,
            accepted_tokens=spec.accepted if spec is not None else 0,
            decode_row_steps=core.row_steps,
            decode_row_tokens=core.row_tokens,
            **({} if prefix is None else {
                "prefix_entries": prefix.entries,
                "prefix_cached_tokens": prefix.cached_tokens,
                "prefix_cached_bytes": prefix.cached_bytes,
                "prefix_lookups": prefix.lookups,
                "prefix_hits": prefix.hits,
                "prefix_hit_tokens": prefix.hit_tokens,
                "prefix_lookup_tokens": prefix.lookup_tokens,
                "prefix_evictions": prefix.evictions,
            }),
            **({} if core.memory.store is None else {
                "prefix_disk_files": len(core.memory.store.saved),
                "prefix_disk_bytes": core.memory.store.nbytes,
                "prefix_disk_saves": core.memory.store.saves,
                "prefix_disk_loads": core.memory.store.loads,
            }),
        )


def request_rows(core: EngineCore) -> list[RequestRow]:
    rows = []
    positions = queue_positions(core)
    for seq in core.by_id.copy().values():  # copy(): one atomic call under the GIL
        s = RequestStats.of(seq)
        rows.append(RequestRow(seq.request_id, seq.tag, seq.status.value, s.prompt_tokens,
                               s.generated_tokens, s.ttft_s, s.tokens_per_s, s.cached_tokens,
                               positions.get(seq.request_id),
                               min(seq.num_cached, seq.num_prompt_tokens)))
    return rows


def queue_positions(core: EngineCore) -> dict[str, int]:
    """Waiting request id -> how many waiting requests will be admitted before it (higher
    classes first, then arrival order: Scheduler.admit's order)."""
    out: dict[str, int] = {}
    ahead = 0
    waiting = core.scheduler.waiting
    for priority in sorted(waiting):
        queue = tuple(waiting[priority])  # one atomic copy under the GIL
        for i, seq in enumerate(queue):
            out[seq.request_id] = ahead + i
        ahead += len(queue)
    return out


def request_progress(core: EngineCore) -> dict[str, RequestProgress]:
    """Every request that has no token yet (queued or reading its prompt): cheap enough to
    call each frame, since it looks only at the waiting queues and the prefilling set."""
    out: dict[str, RequestProgress] = {}
    seqs = {seq.request_id: seq for q in core.scheduler.waiting.values() for seq in tuple(q)}
    positions = queue_positions(core)
    for seq in tuple(core.scheduler.prefilling):
        seqs[seq.request_id] = seq
    for rid, seq in seqs.items():
        if seq.output_tokens:
            continue
        queued = seq.status is Status.WAITING
        out[rid] = RequestProgress(rid, "queued" if queued else "prefilling",
                                   positions.get(rid) if queued else None,
                                   seq.num_prompt_tokens,
                                   0 if queued else min(seq.num_cached, seq.num_prompt_tokens))
    return out
