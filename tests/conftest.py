"""Fixtures every test folder shares: the tiny random-weight model and an engine factory.

MLX loads when a test first uses one of them, so storage-only runs stay quick."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# Entry points called in this process (app.main, bench mains) would re-execute it onto
# mimalloc (engine/preload.py), replacing the test runner; the tests run on glibc as the
# test command preloads it, and tests/engine/test_allocator.py starts mimalloc processes.
os.environ.setdefault("BATCHCHAT_NO_MIMALLOC", "1")
# Engine.load's warm-up (engine/warm_up.py) would add ~0.3-1 s to each of the suite's ~100
# loads; tests/engine/test_warm_up.py runs it, and the processes the tests start inherit this.
os.environ.setdefault("BATCHCHAT_NO_WARM_UP", "1")

if TYPE_CHECKING:
    from engine import Engine
    from tests.mlx_reference import ReferenceCache
    from tests.tiny_model import TinyModel


@pytest.fixture(scope="session")
def tiny() -> TinyModel:
    from tests.tiny_model import make_tiny_model

    return make_tiny_model()


@pytest.fixture
def make_engine(tiny: TinyModel) -> Callable[..., Engine]:
    """`make_engine(eos=None, context_length=None, **config)`: an Engine on the tiny model,
    not started; with no end token (the default) every reply runs to max_tokens."""
    from engine import Engine, EngineConfig

    def build(eos: list[int] | None = None, context_length: int | None = None,
              **config: Any) -> Engine:
        return Engine(tiny.model, tiny.tokenizer, eos_token_ids=eos or [],
                      context_length=context_length or tiny.context_length,
                      config=EngineConfig(**config), description="tiny test model")

    return build


def session_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's base temp folder, which every xdist worker's own base is under."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def _freeze_imported_objects() -> None:
    """What exists before the first test (every module, class and function the collection
    imported, pytest's items: ~525,000 objects in a worker that collected the whole tree)
    is moved out of the cyclic collector's reach (gc.freeze). None of it becomes garbage
    during the session, yet every full collection walked all of it (~0.25 CPU-s at 196,000
    objects), and the UI tests collect twice a test (tests/ui/conftest.py). What the tests
    make is collected as before."""
    import gc

    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def _session_files(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Files built from other files are made once a session (tests/session_files.py)."""
    from tests import session_files

    session_files.folder = session_base(tmp_path_factory) / "session-files"


@pytest.fixture(scope="session")
def mlx_lm_greedy(tmp_path_factory: pytest.TempPathFactory) -> ReferenceCache:
    """mlx-lm's greedy tokens (`.greedy(model, tokenizer, prompts, n)`), each computed once a
    session and shared by the xdist workers (tests/mlx_reference.py)."""
    from tests.mlx_reference import ReferenceCache

    return ReferenceCache(session_base(tmp_path_factory) / "mlx-lm-greedy")
