"""/metrics reports the engine's KV budget and use, and the server's resident memory (#28)."""

from __future__ import annotations

import aiohttp

from app.process_memory import resident_bytes
from engine.public import heap_bytes

from .conftest import MODEL


async def scrape(url: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as r:
        assert r.status == 200
        text = await r.text()
    return {name: float(value) for name, value in (line.rsplit(" ", 1) for line in
                                                   text.splitlines()
                                                   if line and not line.startswith("#"))}


async def test_metrics_report_the_engines_kv_budget_and_what_it_holds(serve):
    s = await serve(engine={"kv_budget_bytes": 48 << 20})
    await s.client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "keep this in the cache"}],
        max_tokens=4, temperature=0)
    m = await scrape(s.url)
    stats = s.engine.stats()
    assert m["batchchat_kv_cache_budget_bytes"] == stats.kv_budget_bytes == 48 << 20
    assert m["batchchat_kv_cache_bytes_per_token"] == stats.kv_bytes_per_token > 0
    # Nothing runs: what is in use is the finished request's KV, kept as a prefix.
    assert m["batchchat_kv_cache_used_bytes"] == m["batchchat_prefix_cache_bytes"] \
        == stats.prefix_cached_bytes > 0
    assert m["batchchat_prefix_cache_entries"] == stats.prefix_entries == 1


async def test_metrics_report_the_default_budget_and_the_process_memory(serve, monkeypatch):
    monkeypatch.delenv("BATCHCHAT_KV_BUDGET_MB", raising=False)
    s = await serve()
    m = await scrape(s.url)
    assert m["batchchat_kv_cache_budget_bytes"] == s.engine.stats().kv_budget_bytes
    assert s.engine.stats().kv_budget_basis.startswith("default:")
    rss = resident_bytes()
    assert rss is not None
    # the server runs in this process: the same figure, give or take what ran in between
    assert abs(m["batchchat_process_resident_memory_bytes"] - rss) < 64 << 20
    # MLX's live arrays hold at least the weights, and never more than they ever held
    assert 0 < m["batchchat_memory_active_bytes"] <= m["batchchat_memory_peak_bytes"]
    heap = heap_bytes()  # glibc's malloc: MLX's CPU arrays are in its bytes in use
    if heap is not None:
        assert abs(m["batchchat_process_heap_in_use_bytes"] - heap[0]) < 64 << 20
        assert m["batchchat_process_heap_in_use_bytes"] >= m["batchchat_memory_active_bytes"]
        assert m["batchchat_process_heap_freed_held_bytes"] >= 0
