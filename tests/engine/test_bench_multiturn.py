"""The multi-turn chat scenarios, end to end on the tiny model, against the engine, mlx-lm's
cached path and a real `mlx_lm.server` on loopback (started on the exported weights)."""

import asyncio
import json

import mlx.core as mx
import pytest

from bench.__main__ import parse_args, run
from bench.report import plot, print_table, write_json
from engine.loader import ModelLoadError, load_model
from engine.loader.export_dir import save_mlx_dir
from tests.tiny_model import make_tiny_model


def test_an_exported_model_loads_with_the_same_logits_template_and_end_tokens(tmp_path):
    tiny = make_tiny_model(context_length=1024)
    loaded = load_model(str(save_mlx_dir(tiny, tmp_path / "tiny")))
    ids = mx.array([[1, 5, 9, 12, 30]])
    assert mx.array_equal(tiny.model(ids), loaded.model(ids))
    msgs = [{"role": "user", "content": "the cat"}]
    assert loaded.tokenizer.apply_chat_template(msgs, add_generation_prompt=True) == \
        tiny.tokenizer.apply_chat_template(msgs, add_generation_prompt=True)
    assert loaded.eos_token_ids == tiny.eos_token_ids and loaded.context_length == 1024


def test_a_model_with_gguf_rope_frequencies_is_refused(tmp_path):
    tiny = make_tiny_model()
    for layer in tiny.model.model.layers:
        layer.self_attn.rope._freqs = mx.ones(8)
    with pytest.raises(ModelLoadError, match="RoPE frequencies"):
        save_mlx_dir(tiny, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_chat_scenarios_run_against_the_engine_mlx_lm_and_its_server(tmp_path, capsys):
    # greedy: the replies must match mlx_lm.server's word for word
    args = parse_args(["--sampling", "greedy", "--scenarios", "chat,chats", "--chat-turns", "3",
                       "--chats", "3", "--chats-turns", "2", "--turn-tokens", "6",
                       "--think-s", "0.05", "--chat-repeats", "2", "--out", str(tmp_path)])
    results = asyncio.run(run(args, loaded=make_tiny_model(context_length=4096)))
    print_table(results)
    data = json.loads(write_json(results, tmp_path).read_text())["multiturn"]
    chat = {c["client"]: c for c in data["chat"]}
    assert set(chat) == {"engine", "mlx_lm", "mlx_lm.server"}
    for c in chat.values():
        assert len(c["turns"]) == 3 and all(t["tokens"] > 0 for t in c["turns"])
        assert c["repeats"] == 2 and len(c["all_turns"]) == 6 and len(c["ttft_s"]) == 3
    # Greedy on the same weights: the real server's first reply is the engine's.
    assert chat["mlx_lm.server"]["turns"][0]["text"] == chat["engine"]["turns"][0]["text"]
    assert chat["mlx_lm"]["turns"][0]["text"] == chat["engine"]["turns"][0]["text"]
    # Conversation memory: each later turn reuses at least the whole previous prompt.
    turns = chat["engine"]["turns"]
    for before, after in zip(turns, turns[1:], strict=False):
        assert after["cached_tokens"] >= before["prompt_tokens"]
    many = {m["client"]: m for m in data["chats"]}
    assert set(many) == {"engine", "mlx_lm.server"}  # mlx-lm's path serves one chat only
    for m in many.values():
        assert len(m["turns"]) == 6 and m["output_tps"] > 0
    assert many["engine"]["hit_rate"] > 0.3
    out = capsys.readouterr().out
    assert "one chat, 3 turns" in out and "3 chats x 2 turns" in out
    assert (tmp_path / "mlx_lm_server.log").exists()
    assert any(p.name == "multiturn_ttft.png" for p in plot(results, tmp_path))
