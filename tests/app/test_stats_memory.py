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
    assert (m.kv, m.running, m.cached) == ("312 MiB of 5.9 GiB", "40 MiB", "272 MiB · 6034 tok")
    assert m.kv_used_bytes == 312 * MiB
    assert abs(m.kv_fraction - 312 / (5.9 * 1024)) < 1e-6
    assert m.entries == "6 (2 evicted)"


def test_hit_rate_is_the_token_share_then_requests_that_hit() -> None:
    m = memory_figures(stats(prefix_lookups=15, prefix_hits=12, prefix_hit_tokens=810,
                             prefix_lookup_tokens=1000))
    assert (m.hit_rate, m.hits) == ("81% of tokens", "12 of 15")
    m = memory_figures(stats(prefix_lookups=1, prefix_lookup_tokens=9))
    assert (m.hit_rate, m.hits) == ("0% of tokens", "0 of 1")


def test_an_idle_or_cacheless_engine_shows_dashes_not_zeros() -> None:
    m = memory_figures(stats())
    assert (m.hit_rate, m.hits, m.kv, m.kv_fraction, m.disk) == ("–", "–", "–", 0.0, "none")
    assert (m.running, m.cached, m.entries) == ("0 B", "0 B · 0 tok", "0 (0 evicted)")
    assert [k for k, _ in m.texts()] == ["hit_rate", "hits", "kv", "running", "cached",
                                         "entries", "disk", "process"]
    assert (m.process, m.over_bound) == ("–", False)


def test_the_process_memory_of_its_bound_and_when_it_is_over() -> None:
    m = memory_figures(stats(), resident=700 * MiB, bound=1500 * MiB)
    assert (m.process, m.over_bound) == ("700 MiB of 1.5 GiB", False)
    m = memory_figures(stats(), resident=1600 * MiB, bound=1500 * MiB)
    assert (m.process, m.over_bound) == ("1.6 GiB of 1.5 GiB", True)
    assert memory_figures(stats(), resident=700 * MiB).process == "700 MiB"  # no bound yet


def test_disk_store_files_and_size_with_saves_and_loads_as_detail() -> None:
    m = memory_figures(stats(prefix_disk_files=3, prefix_disk_bytes=41 * MiB,
                             prefix_disk_saves=5, prefix_disk_loads=2))
    assert m.disk == "3 files · 41 MiB"
    assert m.disk_detail.startswith("5 saved, 2 loaded")
    # Saved this session but since deleted from disk: still not "none".
    assert memory_figures(stats(prefix_disk_saves=1)).disk == "0 files · 0 B"
    assert memory_figures(stats(prefix_disk_files=1, prefix_disk_bytes=512)).disk == \
        "1 file · 512 B"


def test_the_kv_tooltip_says_how_the_budget_was_chosen() -> None:
    basis = "default: 16 slots x 512 + 8192 tokens, x 45 KiB a token"
    m = memory_figures(stats(kv_budget_bytes=720 * MiB, kv_budget_basis=basis))
    assert m.kv == "0 B of 720 MiB"
    assert m.kv_detail == f"Budget 720 MiB, {basis}."
    assert memory_figures(stats()).kv_detail == ""  # no budget reported: nothing to explain
