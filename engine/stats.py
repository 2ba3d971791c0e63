"""Per-request stats, per-tick telemetry and the aggregate the UI and benchmarks read."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from .sequence import Sequence


@dataclass(frozen=True, slots=True)
class RequestStats:
    request_id: str
    tag: str | None
    priority: str
    queue_s: float  # submit -> admitted
    prompt_tokens: int
    ttft_s: float | None  # submit -> first token (None if none came)
    generated_tokens: int
    decode_s: float  # first token -> finish
    tokens_per_s: float  # (generated - 1) / decode_s: the decode rate, as vLLM's 1/TPOT
    e2e_s: float  # submit -> finish
    finish_reason: str
    seed: int
    error: str | None = None
    cached_tokens: int = 0  # prompt tokens reused from the prefix cache (not computed)
    # speculative decoding (engine/speculation.py): draft tokens checked, of those accepted,
    # and the decode steps the reply took (its tokens after the first / steps = per step)
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    decode_steps: int = 0

    @property
    def acceptance(self) -> float | None:
        """The share of its drafts accepted (None: nothing drafted)."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else None

    @property
    def tokens_per_step(self) -> float | None:
        """Tokens each decode step gave it (1.0 without speculation; None: no step)."""
        return (self.generated_tokens - 1) / self.decode_steps if self.decode_steps else None

    @classmethod
    def of(cls, seq: Sequence) -> RequestStats:
        end = seq.t_finish if seq.t_finish is not None else time.perf_counter()
        admit = seq.t_admit if seq.t_admit is not None else end
        first = seq.t_first_token
        decode_s = end - first if first is not None else 0.0
        n = seq.num_output_tokens
        return cls(
            request_id=seq.request_id,
            tag=seq.tag,
            priority=seq.priority.name.lower(),
            queue_s=admit - seq.t_submit,
            prompt_tokens=seq.num_prompt_tokens,
            cached_tokens=seq.cached_tokens,
            ttft_s=first - seq.t_submit if first is not None else None,
            generated_tokens=n,
            decode_s=decode_s,
            tokens_per_s=(n - 1) / decode_s if n > 1 and decode_s > 0 else 0.0,
            e2e_s=end - seq.t_submit,
            finish_reason=seq.finish_reason or "unknown",
            seed=seq.seed,
            error=seq.error,
            drafted_tokens=seq.drafted,
            accepted_tokens=seq.accepted_drafts,
            decode_steps=seq.decode_steps,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TickRecord:
    index: int
    t: float  # perf_counter at tick end
    decode_rows: int
    prefill_tokens: int
    prefill_seqs: int
    step_s: float  # whole tick
    forward_s: float  # model forwards + sampling (the rest is scheduler overhead)
    budget: int  # token budget the tick was planned with
    tokens_out: int  # tokens produced this tick
    batched: bool  # decode ran the batched path (False: solo fast path or none)


@dataclass(frozen=True, slots=True)
class RequestRow:
    """One live or recent request, for the stats table."""

    request_id: str
    tag: str | None
    state: str
    prompt_tokens: int
    generated_tokens: int
    ttft_s: float | None
    tokens_per_s: float
    cached_tokens: int = 0  # prompt tokens reused from the prefix cache
    queue_position: int | None = None  # queued: requests admitted before it (0: next)
    prompt_done: int = 0  # prompt tokens in the KV cache so far (cached or computed)


@dataclass(frozen=True, slots=True)
class RequestProgress:
    """Where a request that has no token yet stands: queued (how many go first) or reading
    its prompt (how many prompt tokens are in the KV cache)."""

    request_id: str
    state: str  # "queued" | "prefilling"
    queue_position: int | None  # queued: requests of its class or higher admitted first
    prompt_tokens: int
    prompt_done: int

    @property
    def prefill_fraction(self) -> float:
        return min(1.0, self.prompt_done / self.prompt_tokens) if self.prompt_tokens else 0.0


@dataclass(frozen=True, slots=True)
class EngineStats:
    active: int
    prefilling: int
    decoding: int
    queued: int
    completed: int
    cancelled: int
    failed: int
    total_generated_tokens: int
    total_prompt_tokens: int
    tokens_per_s: float  # generated tokens over the recent window
    mean_batch_size: float  # decode rows per decoding tick, recent window
    batch_size: int  # decode rows right now
    budget: int  # current adaptive token budget
    step_s: float  # last tick's time
    step_s_ewma: float
    ticks: int
    memory_bytes: int
    peak_memory_bytes: int
    uptime_s: float
    # KV memory (engine/kv_memory.py) and conversation memory (engine/prefix_cache.py)
    kv_bytes_per_token: int = 0
    kv_bits: int = 0  # bits a KV value is stored in: 0 = the model's float (EngineConfig.kv_bits)
    kv_tokens_per_mib: float = 0.0  # tokens of KV one MiB holds (all layers), at kv_bits
    kv_budget_bytes: int = 0
    kv_budget_basis: str = ""  # how the budget was chosen: "default: ..." or "set: ..."
    kv_prefix_budget_bytes: int = 0  # the most cached prefixes keep, of kv_budget_bytes
    kv_reserved_bytes: int = 0  # set aside by running requests
    # what running requests' KV holds: their set-asides, or the decode batch's buffers in
    # place of its rows' if more (as wide as the longest row; decode_batch.DecodeBatch.held_with)
    kv_running_bytes: int = 0
    kv_state_bytes_per_sequence: int = 0  # a hybrid model's recurrent state, in each share
    prefix_entries: int = 0
    prefix_cached_tokens: int = 0
    prefix_cached_bytes: int = 0
    prefix_lookups: int = 0
    prefix_hits: int = 0  # lookups that reused at least one token
    prefix_hit_tokens: int = 0  # prompt tokens served from the cache
    prefix_lookup_tokens: int = 0  # prompt tokens of every lookup
    prefix_evictions: int = 0
    prefix_disk_files: int = 0  # this model's saved prefixes (EngineConfig.kv_disk_dir)
    prefix_disk_bytes: int = 0
    prefix_disk_saves: int = 0
    prefix_disk_loads: int = 0
    # Gaps between a stream's tokens, over the recent window (stalls: issue #26)
    itl_p99_s: float = 0.0
    itl_max_s: float = 0.0  # the largest gap of the window
    stall_s: float = 0.0  # the longest a running stream has now waited for its next token
    # Speculative decoding (engine/speculation.py): the mode, draft tokens checked and
    # accepted since start, and decode row-steps and the tokens they gave (tokens a step)
    speculative: str = "off"
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    decode_row_steps: int = 0
    decode_row_tokens: int = 0

    @property
    def acceptance_rate(self) -> float | None:
        """Share of drafted tokens accepted since start (None: nothing drafted yet)."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else None

    @property
    def tokens_per_step(self) -> float:
        """Tokens a decode row got per step since start (1.0 without speculation)."""
        return self.decode_row_tokens / self.decode_row_steps if self.decode_row_steps else 0.0

    @property
    def prefix_hit_rate(self) -> float:
        """Share of admitted prompt tokens that came from the cache."""
        looked = self.prefix_lookup_tokens
        return self.prefix_hit_tokens / looked if looked else 0.0

    @property
    def kv_used_bytes(self) -> int:
        return max(self.kv_reserved_bytes, self.kv_running_bytes) + self.prefix_cached_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class StatsCollector:
    """Counts that only the engine thread writes; readers get immutable snapshots."""

    def __init__(self, window_s: float, telemetry_size: int) -> None:
        self.window_s = window_s
        self.ticks: deque[TickRecord] = deque(maxlen=telemetry_size)
        self.finished: deque[RequestStats] = deque(maxlen=telemetry_size)
        self.num_ticks = 0
        self.completed = 0
        self.cancelled = 0
        self.failed = 0
        self.total_generated = 0
        self.total_prompt = 0
        self.t_start = time.perf_counter()
        self.lock = threading.Lock()  # readers on other threads take it too
        self._window: deque[tuple[float, int, int]] = deque()  # (time, tokens, decode rows)
        self._gaps: deque[tuple[float, float]] = deque()  # (time, gap since the last token)

    def record_tick(self, rec: TickRecord, gaps: list[float] | None = None) -> None:
        """A finished tick, and the gaps between tokens its streams waited (seconds)."""
        with self.lock:
            self._gaps.extend((rec.t, g) for g in gaps or ())
            self.num_ticks += 1
            self.ticks.append(rec)
            self.total_generated += rec.tokens_out
            self.total_prompt += rec.prefill_tokens
            if rec.tokens_out or rec.decode_rows:
                self._window.append((rec.t, rec.tokens_out, rec.decode_rows))
            self._trim(rec.t)

    def record_finish(self, stats: RequestStats) -> None:
        with self.lock:
            self.finished.append(stats)
            if stats.finish_reason in ("cancelled", "shutdown"):
                self.cancelled += 1
            elif stats.finish_reason == "error":
                self.failed += 1
            else:
                self.completed += 1

    def _trim(self, now: float) -> None:
        while self._window and self._window[0][0] < now - self.window_s:
            self._window.popleft()
        while self._gaps and self._gaps[0][0] < now - self.window_s:
            self._gaps.popleft()

    def gap_figures(self, now: float) -> tuple[float, float]:
        """(p99, max) of the gaps between tokens over the recent window; hold lock."""
        self._trim(now)
        gaps = sorted(g for _, g in self._gaps)
        if not gaps:
            return 0.0, 0.0
        return gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))], gaps[-1]

    def window_rates(self, now: float) -> tuple[float, float]:
        """(tokens/s, mean decode rows per decoding tick) over the recent window; hold lock."""
        self._trim(now)
        span = min(self.window_s, now - self.t_start)
        tokens = sum(n for _, n, _ in self._window)
        rows = [r for _, _, r in self._window if r]
        return (
            tokens / span if span > 0 else 0.0,
            sum(rows) / len(rows) if rows else 0.0,
        )
