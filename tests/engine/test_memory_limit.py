"""Issue #46 item 14: an engine keeps its process under the memory limit the app sets
(engine/memory_limit.py): close to it, memory goes back to the system and cached prefixes
give way; their cap rises again as memory frees up; running requests are never touched."""

from __future__ import annotations

import pytest

import engine.memory_limit as memory_limit
from engine import SamplingParams
from engine import cpu_memory

MIB = 1 << 20


async def _chats(engine, n: int = 4) -> list[str]:
    """`n` different prompts run to the end: each leaves its KV as a cached prefix."""
    replies = []
    for i in range(n):
        stream = engine.submit(prompt_tokens=[3 + i, 5, 7, 11 + i] * 8,
                               params=SamplingParams(max_tokens=6))
        replies.append(await stream.result())
    return replies


async def test_over_its_limit_an_engine_gives_cached_prefixes_away_not_running_requests(
        make_engine, monkeypatch) -> None:
    rss = [100 * MIB]  # the process's memory as the limit reads it
    monkeypatch.setattr(cpu_memory, "resident_bytes", lambda: rss[0])
    engine = make_engine()
    engine.set_memory_limit(rss[0] + memory_limit.HEADROOM + 512 * MIB)  # well under it
    await engine.start()
    try:
        alone = await _chats(engine)
        before = engine.stats()
        assert before.prefix_entries == 4 and before.memory_limit_evicted_bytes == 0
        assert before.memory_limit_bytes == rss[0] + memory_limit.HEADROOM + 512 * MIB

        # Over the mark by a little more than one entry: the least recently used give way,
        # as many as it takes, and no more; the requests that run end as they would.
        entry = before.prefix_cached_bytes // before.prefix_entries
        rss[0] += 512 * MIB + entry + entry // 2
        again = await _chats(engine, 1)
        assert again == alone[:1]  # the same reply (computed again or not)
        after = engine.stats()
        assert after.memory_limit_evicted_bytes >= 2 * entry
        assert after.prefix_entries < before.prefix_entries
        assert 0 < after.memory_limit_prefix_cap_bytes < before.prefix_cached_bytes
        assert after.prefix_cached_bytes <= after.memory_limit_prefix_cap_bytes
        assert after.memory_limit_give_backs >= 1
        # and, on glibc, freed memory stops staying resident while memory is short
        assert cpu_memory._tight == cpu_memory.keep_freed_memory()

        # Memory frees up: the cap rises again (half the room a second) and goes.
        rss[0] = 0
        monkeypatch.setattr(memory_limit, "RELAX_S", 0.0)
        await _chats(engine, 4)
        assert engine.stats().memory_limit_prefix_cap_bytes == 0  # no cap any more
        assert engine.stats().prefix_entries == 4
        assert not cpu_memory._tight
    finally:
        await engine.shutdown()


async def test_with_no_limit_nothing_is_read_and_nothing_given_away(make_engine,
                                                                     monkeypatch) -> None:
    reads = []
    monkeypatch.setattr(cpu_memory, "resident_bytes", lambda: reads.append(1) or 1 << 40)
    engine = make_engine()
    await engine.start()
    try:
        await _chats(engine)
        stats = engine.stats()
        assert reads == [] and stats.memory_limit_bytes == 0
        assert stats.prefix_entries == 4 and stats.memory_limit_evicted_bytes == 0
    finally:
        await engine.shutdown()


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "1"])
def test_a_limit_that_is_no_size_is_refused(make_engine, bad) -> None:
    with pytest.raises(ValueError, match="memory limit"):
        make_engine().set_memory_limit(bad)
