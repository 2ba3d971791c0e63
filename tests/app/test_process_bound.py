"""Issue #46 item 14: every local engine the process runs is told the process's memory bound
(app/backend/process_bound.py) and keeps under it; with several models the bound counts
every one's KV budget, and a model that stops leaves the others' figure."""

from __future__ import annotations

from app.backend.local_target import LocalTarget
from app.process_memory import OVERHEAD_BYTES, resident_bytes

MIB = 1 << 20


async def test_each_running_model_is_told_the_bound_of_the_models_running_now(make_engine):
    first = LocalTarget(make_engine(kv_budget_bytes=64 * MIB))
    second = LocalTarget(make_engine(kv_budget_bytes=32 * MIB))
    assert first.memory_bound() is None  # nothing runs yet

    await first.start()
    alone = first.memory_bound()
    assert first.resident_at_start is not None and resident_bytes() is not None
    assert alone == first.resident_at_start + 64 * MIB + OVERHEAD_BYTES
    assert first.engine.stats().memory_limit_bytes == alone

    await second.start()
    both = first.memory_bound()
    assert both == second.memory_bound() == (max(first.resident_at_start,
                                                  second.resident_at_start)
                                             + 96 * MIB + OVERHEAD_BYTES)
    assert first.engine.stats().memory_limit_bytes == both
    assert second.engine.stats().memory_limit_bytes == both

    await second.shutdown()
    assert first.engine.stats().memory_limit_bytes == alone == first.memory_bound()
    await first.shutdown()
    assert first.memory_bound() is None
