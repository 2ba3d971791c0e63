"""The stats panel's conversation-memory lines, from EngineStats figures (docs/memory.md)."""

from __future__ import annotations

from app.stats.memory import format_bytes, memory_figures

from .test_stats_model import stats

MiB, GiB = 2**20, 2**30


def test_bytes_read_as_binary_units_with_at_most_three_figures() -> None:
    assert [format_bytes(n) for n in (0, 512, 1023, 1024, 46 * 1024 + 300, int(1.5 * MiB),
                                      312 * MiB, int(5.9 * GiB), 3 * 2**40)] == [
        "0 B", "512 B", "1023 B", "1.0 KiB", "46 KiB", "1.5 MiB", "312 MiB", "5.9 GiB",
        "3.0 TiB"]


def test_kv_in_use_is_running_plus_cached_of_the_budget() -> None:
    m = memory_figures(stats(kv_budget_bytes=int(5.9 * GiB), kv_reserved_bytes=40 * MiB,
                             prefix_cached_bytes=272 * MiB, prefix_cached_tokens=6034,
                             prefix_entries=6, prefix_evictions=2))
    assert m.kv == "312 MiB of 5.9 GiB"
    assert m.kv_split == "40 MiB / 272 MiB"
    assert m.kv_used_bytes == 312 * MiB
    assert abs(m.kv_fraction - 312 / (5.9 * 1024)) < 1e-6
    assert m.cached == "6034 tok · 272 MiB · 6 entries"
    assert m.evictions == "2"


def test_hit_rate_is_the_token_share_then_requests_that_hit() -> None:
    m = memory_figures(stats(prefix_lookups=15, prefix_hits=12, prefix_hit_tokens=810,
                             prefix_lookup_tokens=1000))
    assert m.hit_rate == "81% · 12 of 15 hit"
    assert memory_figures(stats(prefix_lookups=1, prefix_lookup_tokens=9)).hit_rate == \
        "0% · 0 of 1 hit"


def test_an_idle_or_cacheless_engine_shows_dashes_not_zeros() -> None:
    m = memory_figures(stats(prefix_entries=1, prefix_cached_tokens=5))
    assert (m.hit_rate, m.kv, m.kv_fraction, m.disk) == ("–", "–", 0.0, "none")
    assert m.cached == "5 tok · 0 B · 1 entry"
    assert dict(m.texts()).keys() == {"hit_rate", "cached", "evictions", "kv", "kv_split",
                                      "disk"}


def test_disk_store_files_size_saves_and_loads() -> None:
    m = memory_figures(stats(prefix_disk_files=3, prefix_disk_bytes=41 * MiB,
                             prefix_disk_saves=5, prefix_disk_loads=2))
    assert m.disk == "3 files · 41 MiB · 5 saved, 2 loaded"
    # Saved this session but since evicted from disk: still says what happened.
    assert memory_figures(stats(prefix_disk_saves=1)).disk == "0 files · 0 B · 1 saved, 0 loaded"
