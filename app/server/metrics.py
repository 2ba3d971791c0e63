"""GET /metrics: Prometheus text exposition. Engine-wide figures (every request, the chat tabs
and simulator included) come from `engine.stats()`; latencies are what this server's clients
saw, as vLLM's and llama.cpp's servers report them."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from engine.public import heap_bytes

from ..process_memory import resident_bytes

if TYPE_CHECKING:
    from engine.public import EngineStats

PREFIX = "batchchat_"
# vLLM's buckets for time to first token and inter-token latency (seconds)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0)


class Histogram:
    def __init__(self, name: str, doc: str, buckets: tuple[float, ...]) -> None:
        self.name, self.doc, self.buckets = name, doc, buckets
        self.counts = [0] * (len(buckets) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self) -> list[str]:
        name = PREFIX + self.name
        out = [f"# HELP {name} {self.doc}", f"# TYPE {name} histogram"]
        total = 0
        for le, n in zip((*map(_num, self.buckets), "+Inf"), self.counts, strict=True):
            total += n
            out.append(f'{name}_bucket{{le="{le}"}} {total}')
        out += [f"{name}_sum {_num(self.sum)}", f"{name}_count {self.count}"]
        return out


class ServerMetrics:
    """Counters and histograms of the API's own requests (the loop thread writes them)."""

    def __init__(self) -> None:
        self.ttft = Histogram("time_to_first_token_seconds",
                              "API requests: arrival to first token", TTFT_BUCKETS)
        self.itl = Histogram("inter_token_latency_seconds",
                             "API requests: time between consecutive tokens", ITL_BUCKETS)
        self.e2e = Histogram("e2e_request_latency_seconds",
                             "API requests: arrival to last token", E2E_BUCKETS)
        self.responses: dict[tuple[str, int], int] = {}  # (endpoint, status) -> count
        self.finished: dict[str, int] = {}  # finish reason -> count

    def count_response(self, endpoint: str, status: int) -> None:
        key = (endpoint, status)
        self.responses[key] = self.responses.get(key, 0) + 1

    def count_finish(self, reason: str) -> None:
        self.finished[reason] = self.finished.get(reason, 0) + 1

    def render(self, stats: EngineStats | None) -> str:
        out: list[str] = []
        if stats is not None:
            out += _engine_lines(stats)
        name = PREFIX + "http_requests_total"
        out += [f"# HELP {name} HTTP responses by endpoint and status",
                f"# TYPE {name} counter"]
        out += [f'{name}{{endpoint="{e}",status="{s}"}} {n}'
                for (e, s), n in sorted(self.responses.items())]
        name = PREFIX + "request_success_total"
        out += [f"# HELP {name} API requests finished, by finish reason",
                f"# TYPE {name} counter"]
        out += [f'{name}{{finished_reason="{r}"}} {n}' for r, n in sorted(self.finished.items())]
        for h in (self.ttft, self.itl, self.e2e):
            out += h.lines()
        return "\n".join(out) + "\n"


def _engine_lines(s: EngineStats) -> list[str]:
    kv_use = s.kv_used_bytes / s.kv_budget_bytes if s.kv_budget_bytes else 0.0
    figures = [
        ("num_requests_running", "gauge", "requests prefilling or decoding (all sources)",
         s.active),
        ("num_requests_waiting", "gauge", "requests waiting for a slot (all sources)", s.queued),
        ("prompt_tokens_total", "counter", "prompt tokens computed (cached ones excluded)",
         s.total_prompt_tokens),
        ("generation_tokens_total", "counter", "tokens generated", s.total_generated_tokens),
        ("kv_cache_usage_perc", "gauge", "KV budget in use, running requests and cached "
         "prefixes (0-1; above 1 while the decode batch's buffers hold more than its rows' "
         "set-asides)", kv_use),
        ("kv_cache_budget_bytes", "gauge", "the engine's KV memory budget (docs/memory.md)",
         s.kv_budget_bytes),
        ("kv_cache_used_bytes", "gauge", "KV set aside by running requests (or what the "
         "decode batch's buffers hold, if more) plus held by cached prefixes",
         s.kv_used_bytes),
        ("kv_cache_bytes_per_token", "gauge", "KV bytes one token takes (all layers)",
         s.kv_bytes_per_token),
        ("kv_cache_tokens_per_mib", "gauge", "tokens of KV one MiB holds, at the engine's "
         "KV bits", s.kv_tokens_per_mib),
        ("kv_cache_bits", "gauge", "bits a KV value is stored in (0: the model's float)",
         s.kv_bits),
        ("prefix_cache_bytes", "gauge", "KV held by cached prefixes", s.prefix_cached_bytes),
        ("prefix_cache_budget_bytes", "gauge", "the most KV cached prefixes keep, of the "
         "budget", s.kv_prefix_budget_bytes),
        ("prefix_cache_queries_total", "counter", "prompt tokens looked up in the prefix cache",
         s.prefix_lookup_tokens),
        ("prefix_cache_hits_total", "counter", "prompt tokens served from the prefix cache",
         s.prefix_hit_tokens),
        ("prefix_cache_entries", "gauge", "cached prefixes", s.prefix_entries),
        ("memory_active_bytes", "gauge", "memory MLX's live arrays take (weights, KV, "
         "activations)", s.memory_bytes),
        ("memory_peak_bytes", "gauge", "the most MLX's live arrays took", s.peak_memory_bytes),
        ("batch_size", "gauge", "rows in the current decode batch", s.batch_size),
        ("generation_tokens_per_second", "gauge", "generated tokens per second, recent window",
         s.tokens_per_s),
        ("inter_token_gap_p99_seconds", "gauge", "99th percentile of the gaps between a "
         "stream's tokens, all streams, recent window", s.itl_p99_s),
        ("inter_token_gap_max_seconds", "gauge", "the largest gap between a stream's tokens, "
         "recent window (a stall)", s.itl_max_s),
        ("stream_stall_seconds", "gauge", "the longest a running stream has waited for its "
         "next token, now", s.stall_s),
        ("spec_decode_num_draft_tokens_total", "counter", "draft tokens checked by "
         "speculative decoding (docs/performance.md)", s.drafted_tokens),
        ("spec_decode_num_accepted_tokens_total", "counter", "of those, accepted",
         s.accepted_tokens),
        ("spec_decode_acceptance_rate", "gauge", "accepted / drafted tokens since start (0: "
         "nothing drafted)", s.acceptance_rate or 0.0),
        ("decode_tokens_per_step", "gauge", "tokens a decode row got per step since start "
         "(1 without speculation)", s.tokens_per_step),
    ]
    rss = resident_bytes()
    if rss is not None:
        figures.append(("process_resident_memory_bytes", "gauge", "the server process's "
                        "resident memory (weights, KV, everything else)", rss))
    heap = heap_bytes()  # None where malloc is not glibc's (docs/memory.md)
    if heap is not None:
        figures += [("process_heap_in_use_bytes", "gauge", "glibc malloc's bytes in use, "
                     "every arena (MLX's CPU arrays come from it)", heap[0]),
                    ("process_heap_freed_held_bytes", "gauge", "freed memory glibc's arenas "
                     "hold (resident until given back, or already returned)", heap[1])]
    out = []
    for name, kind, doc, value in figures:
        out += [f"# HELP {PREFIX}{name} {doc}", f"# TYPE {PREFIX}{name} {kind}",
                f"{PREFIX}{name} {_num(value)}"]
    return out


def _num(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)
