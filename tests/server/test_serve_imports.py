"""`batchchat serve` and the simulator start without the libraries they need only later:
sqlite-utils (and pandas, which it imports) with the first stored response or history write,
bm25s (and scipy) with the first file index. Each costs ~0.5-2 s of every start (the suite
starts ~40 such processes)."""

from __future__ import annotations

import pytest

from tests.import_probe import modules_loaded_by

LATER = ("sqlite_utils", "pandas", "bm25s", "scipy")


@pytest.mark.parametrize("module", ["app.server.serve", "app.simulator.run", "app.main"])
def test_a_start_imports_no_storage_or_index_library(module):
    assert modules_loaded_by(module, LATER) == []


def test_the_stores_still_load_when_named():
    # app.storage's SafeStore and Store are loaded on first use (a module __getattr__)
    assert "sqlite_utils" in modules_loaded_by("app.storage.safe_store", LATER)
    from app.storage import SafeStore, Store
    from app.storage.safe_store import SafeStore as Safe
    from app.storage.store import Store as Plain

    assert (SafeStore, Store) == (Safe, Plain)
