"""The HTTP serving bench (`python -m bench.serving`) against two real servers in one
run: every request completes, token counts come from the servers' usage, the multi-turn
scenario sees the earlier turns cached."""

import asyncio

from bench.serving import parse_args, parse_target, print_table, run

N = 8


async def test_online_and_multi_turn_against_two_servers(serve, capsys):
    long = {"context_length": 4096}  # the byte-level tiny tokenizer makes long prompts
    ours, other = await serve(engine=long), await serve(engine=long)
    args = parse_args(["--target", f"ours={ours.url}/v1", "--target", f"other={other.url}/v1",
                       "--requests", "6", "--rate", "50", "--new-tokens", str(N),
                       "--conversations", "2", "--turns", "2"])
    targets = [parse_target(t, None) for t in args.target]
    results = await run(targets, args)
    assert set(results["targets"]) == {"ours", "other"}
    for name, s in (("ours", ours), ("other", other)):
        r = results["targets"][name]
        assert r["model"] == "tiny"
        online = r["online"]
        assert online["completed"] == 6 and online["total_output_tokens"] == 6 * N
        assert online["ttft_s"]["n"] == 6 and online["tpot_s"]["n"] == 6
        assert 0 < online["itl_s"]["n"] <= 6 * (N - 1)  # one gap per text chunk after the first
        multi = r["multiturn"]
        assert multi["completed"] == 4
        first, second = multi["by_turn"]
        assert second["prompt_tokens_mean"] > first["prompt_tokens_mean"]
        assert second["cached_tokens_mean"] >= first["prompt_tokens_mean"]  # turn 1 reused
        assert first["cached_tokens_mean"] < first["prompt_tokens_mean"] / 2  # fresh chats
        engine_cached = [f.cached_tokens for f in s.engine.finished_requests()[-4:]]
        assert sum(engine_cached) == sum(q["cached_tokens"] for q in multi["per_request"])
    print_table(results)
    out = capsys.readouterr().out
    assert "== online over HTTP" in out and "ours turn 2" in out


async def test_head_of_line_times_the_long_prompt_and_the_gaps_it_caused(serve, capsys):
    server = await serve(engine={"context_length": 4096})
    args = parse_args(["--target", f"ours={server.url}/v1", "--scenarios", "hol",
                       "--hol-streams", "3", "--long-chars", "1500", "--sampling", "greedy"])
    results = await run([parse_target(t, None) for t in args.target], args)
    hol = results["targets"]["ours"]["hol"]
    # the byte-level tiny tokenizer: about a token a character, plus the chat template
    assert 1500 <= hol["long_prompt_tokens"] < 1700
    assert hol["long_ttft_s"] > 0 and hol["streams"] == 3
    assert hol["gaps_during"] == 0 or hol["itl_during_max_s"] >= hol["itl_during_p99_s"] > 0
    # the streams were cut off (client gone) once the long prompt had its tokens
    for _ in range(200):
        done = server.engine.finished_requests()
        if len(done) == 4:
            break
        await asyncio.sleep(0.05)
    reasons = sorted(r.finish_reason for r in done)
    assert reasons[-1] == "length" and reasons[:3] == ["cancelled"] * 3, reasons
    print_table(results)
    assert "== head of line over HTTP" in capsys.readouterr().out


async def test_one_stream_against_the_physical_floor(serve, capsys, tmp_path):
    server = await serve(engine={"context_length": 4096})
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\0" * (4 << 20))
    args = parse_args(["--target", f"ours={server.url}/v1", "--scenarios", "solo",
                       "--solo-requests", "2", "--solo-tokens", str(N), "--sampling", "greedy",
                       "--weights", str(weights)])
    results = await run([parse_target(t, None) for t in args.target], args)
    solo = results["targets"]["ours"]["solo"]
    assert solo["output_tokens"] == [N, N] and len(solo["decode_tps"]) == 2
    assert solo["decode_tps_median"] > 0
    floor = results["floor"]
    assert floor["weight_bytes"] == 4 << 20 and floor["bandwidth_gbs"] > 0
    assert floor["floor_tps"] == floor["bandwidth_gbs"] * 1e9 / (4 << 20)
    print_table(results)
    out = capsys.readouterr().out
    assert "== one stream over HTTP" in out and "% of the floor" in out
