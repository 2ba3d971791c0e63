"""The model ladder's bench (bench/model_ladder.py, bench/ladder_models.py) without llama.cpp:
which GGUFs a --cells filter picks and in what order, the cells' configs, and the table's
ratios and missed targets from a run's figures; the one-stream scenario's order."""

import pytest

from bench.http_client import Target
from bench.ladder_models import cell_names, hf_config
from bench.model_ladder import find_cells, parse_args, print_table, targets_met


def test_cells_smallest_first_and_filtered(tmp_path):
    for name in ("qwen3-1.5b-Q4_K_M", "llama-1.5b-Q8_0", "gemma3-135m-Q4_0", "llama-135m-Q4_K_M",
                 "llama-1.5b-Q4_K_M", "phi3-135m-Q4_K_M", "llama-135m-f16x"):
        (tmp_path / f"{name}.gguf").write_bytes(b"")
    every = [c for c, _ in find_cells(tmp_path, None)]
    # unknown architectures and names the ladder does not make are left out
    assert every == ["llama-135m-Q4_K_M", "gemma3-135m-Q4_0", "llama-1.5b-Q4_K_M",
                     "qwen3-1.5b-Q4_K_M", "llama-1.5b-Q8_0"]
    picked = find_cells(tmp_path, "*-1.5b-Q4_K_M,gemma3-*")
    assert [c for c, _ in picked] == ["gemma3-135m-Q4_0", "llama-1.5b-Q4_K_M",
                                      "qwen3-1.5b-Q4_K_M"]
    assert picked[1][1] == tmp_path / "llama-1.5b-Q4_K_M.gguf"


def test_arguments():
    args = parse_args(["--models", "/m", "--llama-server", "/l", "--scenarios", "solo,long"])
    assert args.scenarios == ["solo", "long"] and args.burst == 16 and args.long_tokens == 8000
    with pytest.raises(SystemExit):
        parse_args(["--models", "/m", "--llama-server", "/l", "--scenarios", "solo,hol"])


def test_configs_and_cell_names():
    g = hf_config("gemma3", "1.5b")
    assert g["architectures"] == ["Gemma3ForCausalLM"] and g["head_dim"] == 128
    assert g["tie_word_embeddings"] is False  # the engine's loader refuses a tied Gemma 3
    assert g["layer_types"][:6] == ["sliding_attention"] * 5 + ["full_attention"]
    assert hf_config("qwen3", "135m")["tie_word_embeddings"] is True
    assert cell_names("qwen3-1.5b,llama-135m") == [("llama", "135m"), ("qwen3", "1.5b")]
    with pytest.raises(SystemExit):
        cell_names("llama-7b")


def _row(cell, solo_b, solo_l, itl_b, itl_l, floor=20.0):
    side = lambda solo, itl, burst: {  # noqa: E731
        "solo": {"tps": solo, "short": 0},
        "burst": {"tps": burst, "ttft_p50_s": 0.5, "itl_p99_s": itl, "short": 1},
        "long": {"ttft_s": 4.0, "prompt_tokens": 8000}, "rss_mib": 900.0}
    return {"cell": cell, "file_bytes": 10**9, "floor": {"floor_tps": floor},
            "load_before": 1.5, "batchchat": side(solo_b, itl_b, 60.0),
            "llama": side(solo_l, itl_l, 40.0)}


def test_targets_and_table(capsys):
    slow = _row("qwen3-1.5b-Q4_K_M", solo_b=8.0, solo_l=12.0, itl_b=0.2, itl_l=0.1)
    assert targets_met(slow) == ["solo tok/s", "ITL p99", "50% of floor"]
    fast = _row("llama-135m-Q4_K_M", solo_b=8.0, solo_l=6.0, itl_b=0.1, itl_l=0.2)
    assert targets_met(fast) == []  # the floor's share is a target at 1.5B only
    print_table([fast, slow])
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("qwen3-1.5b"))
    assert " 0.67x" in row and " 1.50x" in row  # solo 8 / 12, burst 60 / 40
    assert "40%" in row and "60%" in row  # of the 20 tok/s floor
    assert row.endswith("solo tok/s, ITL p99, 50% of floor")
    assert next(line for line in lines if line.startswith("llama-135m")).endswith("none")


def test_solo_takes_the_servers_requests_in_turn(monkeypatch):
    """One stream on each server, request by request in turn (B L, L B, B L): a shared
    host's drift falls on both; each side's median and short count from its own requests."""
    import asyncio

    from bench import model_ladder

    calls: list[str] = []

    async def fake_one_stream(session, target, texts, requests, max_tokens, sampling):
        calls.append(target.name)
        assert requests == 1 and len(texts) == 1 and sampling is model_ladder.TABS
        n = len(calls)
        return {"decode_tps": [10.0 * n], "output_tokens": [max_tokens - (n == 2)]}

    monkeypatch.setattr(model_ladder, "one_stream", fake_one_stream)
    targets = {"batchchat": Target("batchchat", "u1", "m"), "llama": Target("llama", "u2", "m")}
    args = parse_args(["--models", "/m", "--llama-server", "/l", "--solo-requests", "3"])
    out = asyncio.run(model_ladder.solo(None, targets, args))
    assert calls == ["batchchat", "llama", "llama", "batchchat", "batchchat", "llama"]
    assert out["batchchat"]["runs"] == [10.0, 40.0, 50.0] and out["batchchat"]["tps"] == 40.0
    assert out["llama"]["runs"] == [20.0, 30.0, 60.0] and out["llama"]["short"] == 1


def test_a_scenario_runs_on_every_server_in_order_and_a_failure_stays_its_own(monkeypatch):
    """Burst and long run server by server in the cell's order; one server's failure is an
    {"error"} for it alone (the table shows '-') and the other still runs; a failed one-stream
    run fails both, since their requests alternate."""
    import asyncio

    from bench import model_ladder

    calls: list[str] = []

    async def fake_one(name, session, target, args, long_prompt):
        calls.append(target.name)
        if target.name == "llama":
            raise RuntimeError("llama: the long prompt failed")
        return {"ttft_s": 1.5}

    async def failing_solo(session, targets, args):
        raise TimeoutError("no answer")

    monkeypatch.setattr(model_ladder, "one_scenario", fake_one)
    monkeypatch.setattr(model_ladder, "solo", failing_solo)
    targets = {"llama": Target("llama", "u2", "m"), "batchchat": Target("batchchat", "u1", "m")}
    args = parse_args(["--models", "/m", "--llama-server", "/l"])
    out = asyncio.run(model_ladder.scenario("long", None, targets, args, "text"))
    assert calls == ["llama", "batchchat"]
    assert out == {"llama": {"error": "llama: the long prompt failed"},
                   "batchchat": {"ttft_s": 1.5}}
    out = asyncio.run(model_ladder.scenario("solo", None, targets, args, "text"))
    assert out == {"llama": {"error": "no answer"}, "batchchat": {"error": "no answer"}}
