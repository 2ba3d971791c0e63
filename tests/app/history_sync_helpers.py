"""Shared bits for the HistoryWriter tests: a tiny-model bridge and a second connection."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

from app.bridge import EngineBridge
from app.storage import Message, Session, Store
from engine import Engine, EngineConfig
from tests.tiny_model import TinyModel, make_tiny_model

# Greedy, no end token: every reply runs to max_tokens.
FAST = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
        "repetition_penalty": 1.0, "max_tokens": 12, "seed": None, "stop": []}


@cache
def tiny(context_length: int = 512) -> TinyModel:
    return make_tiny_model(context_length=context_length)


async def start_bridge(context_length: int = 512) -> EngineBridge:
    t = tiny(context_length)
    bridge = EngineBridge()
    await bridge.use_engine(Engine(t.model, t.tokenizer, eos_token_ids=[],
                                   context_length=t.context_length,
                                   config=EngineConfig(max_concurrent=4)), "tiny")
    return bridge


async def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met within {timeout} s"
        await asyncio.sleep(0.005)


def read_back(path: Path, session_id: str) -> tuple[Session | None, list[Message]]:
    """The session and its messages as another process would see them now."""
    other = Store.open(path, read_only=True)
    try:
        return other.get_session(session_id), other.list_messages(session_id)
    finally:
        other.close()
