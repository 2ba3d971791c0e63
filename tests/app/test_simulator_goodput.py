"""Goodput as `vllm bench serve --goodput` counts it."""

import pytest

from app.simulator.config import SimConfig, SimConfigError
from app.simulator.goodput import Slo, goodput
from app.simulator.workload import RequestResult


def result(ttft: float, e2e: float, tokens: int, finish: str = "length") -> RequestResult:
    return RequestResult(index=0, prompt="p", ttft_s=ttft, e2e_s=e2e, output_tokens=tokens,
                         finish_reason=finish)


def test_good_requests_per_second_meet_every_limit():
    results = [
        result(0.1, 1.1, 11),  # TPOT 0.1
        result(0.1, 2.1, 11),  # TPOT 0.2: too slow per token
        result(0.5, 0.5, 1),  # TTFT too slow; one token: TPOT 0 as in vLLM
        result(0.2, 0.2, 1),  # good
        result(0.1, 0.3, 3, finish="error"),  # fast, but failed: never good
        result(0.1, 0.3, 3, finish="cancelled"),
        result(0.1, 0.3, 3, finish="stop"),  # good
    ]
    out = goodput(results, 2.0, Slo(ttft_s=0.3, tpot_s=0.15))
    assert out == {"goodput": 1.5, "slo_met": 3,
                   "slo": {"ttft_s": 0.3, "tpot_s": 0.15, "e2e_s": None}}
    assert goodput(results, 2.0, Slo(e2e_s=1.1))["slo_met"] == 4  # all but the 2.1 s one
    assert goodput(results, 2.0, Slo()) == {"goodput": None, "slo_met": None,
                                            "slo": {"ttft_s": None, "tpot_s": None,
                                                    "e2e_s": None}}


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="TTFT limit"):
        Slo(ttft_s=0)
    for bad in (-1, 0, float("nan"), float("inf"), "0.5", True):
        with pytest.raises(SimConfigError, match="TPOT limit"):
            SimConfig(slo_tpot_s=bad).validate()
    cfg = SimConfig(slo_ttft_s=0.5, slo_e2e_s=4)
    assert cfg.slo() == Slo(0.5, None, 4)
    assert SimConfig.from_dict(cfg.to_dict()) == cfg
    assert Slo(0.5, 0.05).describe() == "TTFT ≤ 500 ms, TPOT ≤ 50 ms"
