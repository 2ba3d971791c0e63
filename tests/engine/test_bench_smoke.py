"""The benchmark runs end to end on a tiny model and writes its table, JSON and plots."""

import asyncio
import json

from app.simulator.workload import burst_gaps, gamma_gaps, summarize, uniform_gaps
from bench.__main__ import parse_args, run
from bench.report import plot, print_table, write_json
from tests.tiny_model import make_tiny_model


def test_bench_smoke(tmp_path, capsys):
    args = parse_args(["--scenarios", "solo,offline,online,hol", "--concurrency", "1,2",
                       "--new-tokens", "6", "--repeats", "1", "--online-requests", "4",
                       "--online-rate", "50", "--long-prompt", "200", "--peer-kernels",
                       "--out", str(tmp_path)])
    results = asyncio.run(run(args, loaded=make_tiny_model(context_length=4096)))
    print_table(results)
    path = write_json(results, tmp_path)
    plots = plot(results, tmp_path)
    data = json.loads(path.read_text())
    assert {r["concurrency"] for r in data["offline"]} == {1, 2}
    assert all(r["engine_output_tps"] > 0 and r["batch_generator_output_tps"] > 0
               for r in data["offline"])
    assert all(r["batch_generator_kernels_output_tps"] > 0 for r in data["offline"])
    assert data["online"]["requests"] == 4 and data["online"]["completed"] == 4
    assert data["head_of_line"]["engine"]["long_prompt_tokens"] == 200
    assert data["solo"]["engine_decode_tps"] > 0 and data["solo"]["mlx_lm_decode_tps"] > 0
    out = capsys.readouterr().out
    assert "offline throughput" in out and "head-of-line" in out
    assert "with the engine's CPU kernels" in out
    for p in plots:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_arrival_processes_have_the_requested_rates():
    n = 4000
    poisson = [g for g, _ in zip(gamma_gaps(rate=5.0, seed=1), range(n), strict=False)]
    mean = sum(poisson) / n
    assert abs(mean - 0.2) < 0.2 * 0.05  # mean gap 1/rate within 5 %
    var = sum((g - mean) ** 2 for g in poisson) / n
    assert abs(var / mean**2 - 1.0) < 0.1  # exponential: coefficient of variation 1
    bursty = [g for g, _ in zip(gamma_gaps(rate=5.0, burstiness=0.25, seed=2), range(n),
                                strict=False)]
    bmean = sum(bursty) / n
    bvar = sum((g - bmean) ** 2 for g in bursty) / n
    assert bvar / bmean**2 > 3  # burstier than Poisson: CV^2 = 1 / burstiness = 4
    uni = [g for g, _ in zip(uniform_gaps(0.5, 2.0, seed=3), range(n), strict=False)]
    assert 0.5 <= min(uni) and max(uni) <= 2.0 and abs(sum(uni) / n - 1.25) < 0.03
    bursts = [g for g, _ in zip(burst_gaps(4, 1.5), range(12), strict=False)]
    assert bursts == [0, 0, 0, 1.5, 0, 0, 0, 1.5, 0, 0, 0, 1.5]  # 4 at once, then 4 more


def test_summary_uses_vllm_definitions():
    from app.simulator.workload import RequestResult

    r = RequestResult(index=0, prompt="p", output_tokens=5, finish_reason="length",
                      ttft_s=1.0, e2e_s=3.0, itl_s=[0.5, 0.5, 0.5, 0.5])
    s = summarize([r], duration_s=4.0)
    assert s["tpot_s"]["mean"] == 0.5  # (3 - 1) / (5 - 1)
    assert s["output_throughput"] == 5 / 4.0 and s["completed"] == 1


def test_profile_step_runs_decode_and_prefill_with_and_without_kernels():
    from bench.profile_step import profile, profile_prefill
    from engine import cpu_kernels, cpu_layers, module_tree

    stock = make_tiny_model(context_length=512).model
    for fast in (False, True):
        model = module_tree.clone(stock) if fast else stock
        scope = cpu_kernels.active() if fast and cpu_layers.install(model) else None
        if scope:
            scope.__enter__()
        try:
            step = profile(model, rows=3, context=20)
            prefill = profile_prefill(model, rows=2, tokens=12)
        finally:
            if scope:
                scope.__exit__(None, None, None)
        assert {"step (model call)", "lm_head", "  SDPA"} <= step.keys()
        assert {"whole pass (no lm_head)", "one layer", "  SiLU x up"} <= prefill.keys()
        assert all(ms > 0 for ms in (*step.values(), *prefill.values()))


def test_gaps_counts_every_streams_long_gaps(tmp_path, capsys) -> None:
    import json

    from bench import gaps

    scenario = {"output_throughput": 100.0, "ttft_s": {"median": 0.2}, "itl_s": {"p99": 0.09},
                "per_request": [{"itl_s": [0.02, 0.06, 0.3]}, {"itl_s": [0.09, 0.13]},
                                {"itl_s": None}]}
    path = tmp_path / "serving.json"
    path.write_text(json.dumps({"targets": {"a": {"multiturn": scenario, "model": "m"}}}))
    assert gaps.main([str(path)]) == 0
    out = capsys.readouterr().out.strip()
    assert out == ("a          multiturn: tok/s 100.0 TTFT med 200 ITL p99 90 max 300; "
                   "gaps >50 4, >80 3, >120 2, >200 1 (n 5)")


def test_the_benchmarks_load_without_the_app_s_storage() -> None:
    """bench/ uses the simulator's load generator (app.simulator.workload), but not the
    history store: a machine with only mlx, mlx-lm and aiohttp (a lent GPU) runs it."""
    import subprocess
    import sys

    code = ("import sys, bench.scenarios, bench.serving, bench.exactness; "
            "print(sorted(m for m in sys.modules if m.startswith(('app.storage', "
            "'sqlite_utils', 'PySide6'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert out.stdout.strip() == "[]", out.stdout


def test_draft_costs_times_every_way_of_checking_drafts(capsys) -> None:
    """bench.draft_costs on the bundled model: two rows (the ragged pass's segments and the
    padded pass) and one (its input and k drafts), every way timed."""
    from bench import draft_costs

    assert draft_costs.main(["--rows", "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 row(s)" in out
    for way in ("plain step", "ragged, no drafts", "ragged, every row x 4",
                "padded, 1 row x 8", "padded, every row x 2"):
        assert f"  {way} " in out, out
    assert draft_costs.main(["--rows", "1", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "alone, 0 drafts" in out and "alone, 16 drafts" in out


def test_constrained_bench_times_grammars_and_counts_steps_started_ahead(capsys,
                                                                          monkeypatch) -> None:
    """bench.constrained on the bundled model, with the clock, the tabs' sampling and batches
    running ahead as on a GPU: every way's trial line says how many decode steps used a step
    started ahead (a lone row or such a batch runs ahead, grammar or not), the constrained
    ways' grammar work, the sampling, and the ratios. The clock and the mask path replace
    engine functions: put back after."""
    import argparse
    import re

    from bench import constrained
    from engine import constraint, next_token

    monkeypatch.setattr(next_token, "mask_logits", next_token.mask_logits)
    monkeypatch.setattr(constraint.RowMatcher, "_take", constraint.RowMatcher._take)
    constrained.main(argparse.Namespace(model="bundled", max_tokens=8, repeats=1, clock=True,
                                        micro=False, steps=0, mask="now", sampling="tabs",
                                        batch_ahead=True, grammar_drafts=False))
    out = capsys.readouterr().out
    lines = {m.group(1).strip(): (int(m.group(2)), int(m.group(3)))
             for m in re.finditer(r"trial 1 (.+?) decode .*?, (\d+)/(\d+) steps started ahead",
                                  out)}
    assert set(lines) == {"16 rows, 8 constrained", "16 rows, none constrained",
                          "1 stream, constrained", "1 stream, free"}, out
    for way, (started, steps) in lines.items():
        assert steps >= 6 and started >= steps - 2, (way, out)
    assert "grammar work" in out and "ratio 16 rows (8 constrained / none)" in out
    assert "sampling tabs ({'temperature': 0.7" in out, out


def test_constrained_bench_with_grammar_drafts_takes_forced_tokens_in_fewer_steps(
        capsys, monkeypatch) -> None:
    """bench.constrained --grammar-drafts (the engine's default) runs every way through the
    clock's mask wrapper, and a constrained stream takes its schema's forced tokens as
    drafts: fewer decode steps than the free stream for the same tokens."""
    import argparse
    import re

    from bench import constrained
    from engine import constraint, next_token

    monkeypatch.setattr(next_token, "mask_logits", next_token.mask_logits)
    monkeypatch.setattr(constraint.RowMatcher, "_take", constraint.RowMatcher._take)
    constrained.main(argparse.Namespace(model="bundled", max_tokens=16, repeats=1, clock=True,
                                        micro=False, steps=0, mask="now", sampling="tabs",
                                        batch_ahead=False, grammar_drafts=True))
    out = capsys.readouterr().out
    steps = {m.group(1).strip(): int(m.group(2))
             for m in re.finditer(r"trial 1 (.+?) decode .*?, \d+/(\d+) steps started ahead",
                                  out)}
    assert set(steps) == {"16 rows, 8 constrained", "16 rows, none constrained",
                          "1 stream, constrained", "1 stream, free"}, out
    assert steps["1 stream, constrained"] < steps["1 stream, free"], out


def test_grammar_engines_probes_hold_for_the_engines_json_grammars() -> None:
    """bench.grammar_engines' probes, on llguidance (what the engine uses; xgrammar is not
    installed here): inside a JSON string, bounded or not, the engine's schema grammars
    refuse a raw control character and a special token, and take an escaped quote, each
    after its control text passed. Without xgrammar the bench says so and exits 2."""
    from bench import grammar_engines as g
    from engine.loader import load_model

    loaded = load_model("bundled")
    hf = getattr(loaded.tokenizer, "_tokenizer", loaded.tokenizer)
    ll = g.Llguidance(loaded.tokenizer, sorted(loaded.eos_token_ids))
    want = ["refuses it", "refuses it", "takes it"]
    for schema in (g.PERSON, g.NAMED):
        grammar = ll.compile(schema)
        assert [g.probe(ll, grammar, hf, text, control)
                for text, control in g.PROBES.values()] == want
    try:
        import xgrammar  # noqa: F401
    except ImportError:
        assert g.main(["--steps", "1"]) == 2
