"""Issue #46 item 14: `batchchat serve`'s memory under varied load stays within its documented
bound (app/process_memory.memory_bound: RSS when ready + KV budget + 512 MiB), checked the
way bench/soak.py checks it: a real server subprocess on the bundled model, real requests
over loopback, its RSS sampled from outside.

CI-sized: 48 requests (the soak sends 400) with a 96 MiB KV budget (the default is
720 MiB), so the bound's KV term is scaled down with the run. It still reaches the state
the full soak measures: prompts of 5-250 words take 0.4-18 MiB of KV each, so the prefix
cache is full after a few requests and evicts for the rest, with 8 requests running beside
it and follow-ups restoring earlier chats; a prefix cache beyond its cap, KV outside the
budget (the ragged pass's cycle once held ~370 MiB) or glibc's freed memory growing without
bound would put the peak above start + 96 + 512 MiB.
"""

from __future__ import annotations

import pytest

from bench.soak import parse_args, run

pytestmark = pytest.mark.bundled

MIB = 1 << 20
BUDGET_MIB = 96


async def test_a_busy_servers_memory_stays_within_its_bound():
    args = parse_args(["--requests", "48", "--concurrency", "8", "--max-tokens", "16",
                       "--kv-budget", str(BUDGET_MIB), "--sample-s", "0.1"])
    soak = await run(args)
    assert not soak.errors and soak.done == 48
    assert soak.budget == BUDGET_MIB * MIB
    # The cache filled and evicted: what it keeps is within its cap, the budget.
    assert 0 < soak.prefix_bytes <= soak.budget and soak.entries < 48
    assert soak.at_peak["batchchat_prefix_cache_bytes"] <= soak.budget
    # The samples saw the server busy (KV, activations), not only at rest.
    assert soak.peak > soak.rss_start + 32 * MIB and len(soak.samples) > 10
    assert soak.peak <= soak.bound, (
        f"peak RSS {soak.peak // MIB} MiB above the bound {soak.bound // MIB} MiB "
        f"(start {soak.rss_start // MIB} + KV budget {BUDGET_MIB} + 512); at the peak: "
        f"{soak.at_peak}")
