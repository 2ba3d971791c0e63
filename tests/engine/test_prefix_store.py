"""Conversation memory across restarts: saved prefixes load instead of being recomputed."""

import logging

from engine import Engine, EngineConfig, SamplingParams
from tests.engine.conftest import prompts, reference_tokens, run_to_end
from tests.tiny_model import make_tiny_model

N = 10


def engine_on(tiny, kv_dir, **config) -> Engine:
    return Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                  context_length=tiny.context_length,
                  config=EngineConfig(kv_disk_dir=str(kv_dir), **config))


def finish(engine, prompt, n=N):
    stream = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=n))
    run_to_end(engine)
    return stream


async def first_turn_saved(tiny, kv_dir) -> tuple[list[int], list[int]]:
    """Turn 1 on one engine, saved; returns (turn 1 prompt + reply, turn 2 prompt)."""
    engine = engine_on(tiny, kv_dir)
    turn1 = prompts(4, seed=41)[3] + [6] * 20
    first = finish(engine, turn1)
    history = turn1 + first.tokens
    assert await engine.save_prefix(prompt_tokens=history + [1]) == len(history) - 1
    await engine.shutdown()
    return history, history + [70, 71, 72]


async def test_a_saved_prefix_is_loaded_after_a_restart(tiny, tmp_path):
    history, turn2 = await first_turn_saved(tiny, tmp_path)
    assert len(list(tmp_path.glob("*.safetensors"))) == 1
    restarted = engine_on(tiny, tmp_path)
    assert restarted.stats().prefix_disk_files == 1
    second = finish(restarted, turn2)
    assert second.stats.cached_tokens == len(history) - 1
    assert restarted.stats().prefix_disk_loads == 1
    assert second.tokens == reference_tokens(tiny.model, turn2, N)


async def test_saving_twice_writes_one_file_and_nothing_cached_saves_nothing(tiny, tmp_path):
    engine = engine_on(tiny, tmp_path)
    prompt = prompts(4, seed=42)[3]
    finish(engine, prompt)
    assert await engine.save_prefix(prompt_tokens=prompt + [1] * 30) > 0
    assert await engine.save_prefix(prompt_tokens=prompt + [1] * 30) > 0
    assert await engine.save_prefix(prompt_tokens=[200] * 8) == 0
    assert len(list(tmp_path.glob("*.safetensors"))) == 1
    assert engine.stats().prefix_disk_saves == 1


async def test_a_corrupt_file_is_ignored_and_the_turn_computed(tiny, tmp_path, caplog):
    history, turn2 = await first_turn_saved(tiny, tmp_path)
    (path,) = tmp_path.glob("*.safetensors")
    data = bytearray(path.read_bytes())
    data[len(data) // 2:] = b"\x00" * (len(data) - len(data) // 2)  # keep the header
    path.write_bytes(bytes(data[: len(data) * 3 // 4]))  # and cut the tail off
    restarted = engine_on(tiny, tmp_path)
    with caplog.at_level(logging.WARNING, logger="engine.prefix_store"):
        second = finish(restarted, turn2)
    assert "ignoring KV cache file" in caplog.text
    assert second.stats.cached_tokens == 0
    assert second.tokens == reference_tokens(tiny.model, turn2, N)
    assert not path.exists()


async def test_a_garbage_file_is_ignored_at_start(tiny, tmp_path, caplog):
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    (tmp_path / "empty.safetensors").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="engine.prefix_store"):
        engine = engine_on(tiny, tmp_path)
    assert caplog.text.count("ignoring KV cache file") == 2
    prompt = prompts(4, seed=43)[3]
    assert finish(engine, prompt).tokens == reference_tokens(tiny.model, prompt, N)


async def test_another_models_file_is_not_used(tiny, tmp_path):
    history, turn2 = await first_turn_saved(tiny, tmp_path)
    other = make_tiny_model(seed=1)
    engine = engine_on(other, tmp_path)
    assert engine.stats().prefix_disk_files == 0
    second = finish(engine, turn2)
    assert second.stats.cached_tokens == 0
    assert second.tokens == reference_tokens(other.model, turn2, N)
    assert len(list(tmp_path.glob("*.safetensors"))) == 1  # kept for its own model


async def test_a_file_deleted_after_start_is_ignored(tiny, tmp_path):
    history, turn2 = await first_turn_saved(tiny, tmp_path)
    restarted = engine_on(tiny, tmp_path)
    for path in tmp_path.glob("*.safetensors"):
        path.unlink()
    second = finish(restarted, turn2)
    assert second.stats.cached_tokens == 0
    assert second.tokens == reference_tokens(tiny.model, turn2, N)


async def test_the_directory_stays_within_its_size_least_recently_used_first(tiny, tmp_path):
    engine = engine_on(tiny, tmp_path)
    chats = [prompts(4, seed=50 + i)[3] + [i] * 30 for i in range(4)]
    for chat in chats:
        finish(engine, chat)
    await engine.save_prefix(prompt_tokens=chats[0] + [0] * 20)
    one_file = next(tmp_path.glob("*.safetensors")).stat().st_size
    limited = engine_on(tiny, tmp_path, kv_disk_bytes=int(2.5 * one_file))
    for chat in chats:
        finish(limited, chat)
    for chat in chats[1:]:
        await limited.save_prefix(prompt_tokens=chat + [0] * 20)
    assert len(list(tmp_path.glob("*.safetensors"))) == 2
    kept = {p.name for p in tmp_path.glob("*.safetensors")}
    restarted = engine_on(tiny, tmp_path)
    hits = [finish(restarted, chat + [9]).stats.cached_tokens > 0 for chat in chats]
    assert hits == [False, False, True, True], kept


async def test_a_kv_folder_that_cannot_be_made_leaves_the_engine_working(tiny, tmp_path,
                                                                          caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING):
        engine = engine_on(tiny, blocker / "kv")  # cannot be created under a file
    assert "KV cache across restarts is off" in caplog.text and str(blocker) in caplog.text
    prompt = prompts(1, seed=5)[0]
    assert finish(engine, prompt).tokens == reference_tokens(tiny.model, prompt, N)
    assert await engine.save_prefix(prompt_tokens=prompt) == 0
    await engine.shutdown()
