"""Simulator settings: validation, JSON round trip, templates, and arrival statistics."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from app.simulator.config import SimConfig, SimConfigError
from app.simulator.templates import PromptSet, default_prompt_set

N = 20_000


def take(gaps, n: int = N) -> list[float]:
    return list(itertools.islice(gaps, n))


def test_uniform_gaps_match_the_distribution():
    g = take(SimConfig(arrival="uniform").gaps(seed=1))
    assert min(g) >= 0.5 and max(g) <= 2.0
    assert statistics.fmean(g) == pytest.approx(1.25, abs=0.02)
    # Uniform on [a, b]: variance (b - a)^2 / 12; each quarter holds a quarter of draws.
    assert statistics.pvariance(g) == pytest.approx(1.5**2 / 12, rel=0.05)
    quarters = [sum(0.5 + 0.375 * q <= x < 0.5 + 0.375 * (q + 1) for x in g) for q in range(4)]
    assert all(abs(c / N - 0.25) < 0.02 for c in quarters)


def test_poisson_gaps_are_exponential_at_the_rate():
    g = take(SimConfig(arrival="poisson", rate=4.0).gaps(seed=2))
    mean = statistics.fmean(g)
    assert mean == pytest.approx(0.25, rel=0.03)
    assert statistics.pstdev(g) / mean == pytest.approx(1.0, abs=0.04)  # CV of 1
    # P(gap > t) = exp(-rate t): the median is ln 2 / rate.
    assert statistics.median(g) == pytest.approx(0.6931 / 4.0, rel=0.04)


def test_bursts_send_size_at_once_then_wait():
    g = take(SimConfig(arrival="burst", burst_size=3, burst_every_s=2.0).gaps(seed=None), 9)
    # request 0 goes at once; gaps before requests 1..9
    assert g == [0.0, 0.0, 2.0, 0.0, 0.0, 2.0, 0.0, 0.0, 2.0]


def test_same_seed_same_arrivals_and_prompts():
    cfg = SimConfig(arrival="poisson", rate=2.0)
    assert take(cfg.gaps(5), 50) == take(cfg.gaps(5), 50)
    ps = cfg.prompt_set()
    a = [ps.expand(i, random.Random(9)) for i in range(10)]
    assert a == [ps.expand(i, random.Random(9)) for i in range(10)]


@pytest.mark.parametrize("change, words", [
    ({"templates": ["  ", ""]}, "template"),
    ({"arrival": "weekly"}, "Arrival"),
    ({"uniform_low_s": 3.0}, "Uniform"),
    ({"rate": 0.0}, "Poisson"),
    ({"burst_size": 0}, "burst"),
    ({"num_requests": None, "duration_s": None}, "number of requests"),
    ({"num_requests": 0}, "at least 1"),
    ({"duration_s": -1.0}, "duration"),
    ({"max_tokens_min": 10, "max_tokens_max": 5}, "Max tokens"),
    ({"max_tokens_min": 0}, "Max tokens"),
    ({"sampling": "creative"}, "Sampling"),
    ({"temperature": -0.1}, "Temperature"),
    ({"top_p": 0.0}, "Top-p"),
    ({"sampling": "random", "temperature": 1.5, "temperature_max": 1.0}, "temperature"),
    ({"cancel_probability": 1.5}, "Cancel"),
    ({"max_concurrent": 0}, "concurrency"),
])
def test_invalid_settings_are_refused_with_a_reason(change, words):
    with pytest.raises(SimConfigError, match=words):
        SimConfig(**change).validate()


def test_json_round_trip_and_unknown_keys():
    cfg = SimConfig(arrival="burst", burst_size=5, templates=["a {topic}"], seed=3)
    assert SimConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(SimConfigError, match="rate_per_s"):
        SimConfig.from_dict({"rate_per_s": 3})


def test_default_templates_ship_in_resources_and_expand():
    ps = default_prompt_set()
    assert len(ps.templates) >= 5 and len(ps.topics) >= 5
    rng = random.Random(0)
    texts = [ps.expand(i, rng) for i in range(100)]
    assert not any("{topic}" in t or "{n}" in t for t in texts)
    assert len(set(texts)) > 50


def test_expand_keeps_other_braces_and_numbers_requests():
    ps = PromptSet(("def f(): return {'k': {n}} # {topic}",), ("x",))
    assert ps.expand(4, random.Random(0)) == "def f(): return {'k': 5} # x"
    assert PromptSet(("about {topic}",)).expand(0, random.Random(0)) == "about anything"
