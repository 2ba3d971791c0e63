"""The model manager's memory soak (issue #50): three real models (the bundled model and two
re-quantizations of it by gguf-py) loaded, used and evicted in turn under a budget that holds
two; the process's RSS stays within the budget plus MARGIN of what it was before."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.fleet import Catalog, ModelManager
from app.models.library import folder_models
from app.process_memory import resident_bytes
from tests.fleet_models import bundled_path, requantize

# Beyond the loaded models' estimates: the loader's passing copies and the file pages it
# reads (RssFile), the freed memory glibc keeps for reuse (up to 256 MiB an arena until an
# idle engine trims it: engine/cpu_memory.py), each engine's activations, the tokenizers.
MARGIN = 384 << 20
KV = 16 << 20
ORDER = ["smol", "smol-q8", "smol-q4", "smol", "smol-q4", "smol-q8", "smol"]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fleet-soak")
    (d / "smol.gguf").symlink_to(bundled_path())
    requantize(bundled_path(), d / "smol-q8.gguf", "Q8_0")
    requantize(bundled_path(), d / "smol-q4.gguf", "Q4_0")
    return d


async def test_rss_stays_within_the_budget_in_a_load_use_evict_soak(models):
    catalog = Catalog(lambda: folder_models(models))
    probe = ModelManager(catalog, kv_budget_bytes=KV)
    needs = {n: probe.estimate(n).total for n in ("smol", "smol-q8", "smol-q4")}
    two = sorted(needs.values())[-2:]
    budget = sum(two) + (4 << 20)  # any two fit, never three
    assert sum(needs.values()) > budget
    fleet = ModelManager(catalog, budget_bytes=budget, kv_budget_bytes=KV, max_concurrent=8)
    import mlx_lm  # noqa: F401 - the runtime every engine shares counts in the base

    from engine import Engine  # noqa: F401

    base = resident_bytes()
    assert base is not None
    peak = [base]
    sampling = True

    async def sample() -> None:
        while sampling:
            peak[0] = max(peak[0], resident_bytes() or 0)
            await asyncio.sleep(0.01)

    sampler = asyncio.ensure_future(sample())
    loaded_after = []
    try:
        for name in ORDER:
            async with await fleet.acquire(name) as target:
                streams = [target.submit([{"role": "user", "content": f"Tell me fact {i}."}],
                                         params={"max_tokens": 24, "temperature": 0.0})
                           for i in range(4)]
                for stream in streams:
                    async for _ in stream:
                        pass
                assert all(s.finish_reason in ("length", "stop") for s in streams)
            loaded_after.append(sorted(m.name for m in fleet.running()))
            assert fleet.used_bytes() <= budget
    finally:
        sampling = False
        await sampler
        await fleet.close()
    print(f"\nbase {base >> 20} MiB, peak {peak[0] >> 20} MiB, growth "
          f"{(peak[0] - base) >> 20} MiB; budget {budget >> 20} MiB, margin {MARGIN >> 20} MiB;"
          f" estimates { {n: v >> 20 for n, v in needs.items()} } MiB")
    # the least recently used model made room each time (never more than two loaded)
    assert loaded_after == [["smol"], ["smol", "smol-q8"], ["smol-q4", "smol-q8"],
                            ["smol", "smol-q4"], ["smol", "smol-q4"], ["smol-q4", "smol-q8"],
                            ["smol", "smol-q8"]]
    assert peak[0] - base <= budget + MARGIN, (peak[0] - base) >> 20
