"""Fixtures every test folder shares: the tiny random-weight model and an engine factory.

MLX loads when a test first uses one of them, so storage-only runs stay quick."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from engine import Engine
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
