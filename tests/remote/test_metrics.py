"""Prometheus /metrics of the servers BatchChat knows, parsed into running / waiting
requests and token counters; rates from two readings."""

from __future__ import annotations

from app.remote.metrics import parse_metrics

VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 5.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="qwen"} 1200.0
vllm:prompt_tokens_created{engine="0",model_name="qwen"} 1.7e9
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="qwen"} 800.0
vllm:generation_tokens_total{engine="1",model_name="qwen"} 200.0
"""

LLAMA_CPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 46
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 412
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
"""


def test_vllm_metrics_sum_over_labels():
    assert parse_metrics(VLLM) == {"running": 3.0, "waiting": 5.0, "prompt_total": 1200.0,
                                   "generated_total": 1000.0}


def test_llama_cpp_metrics():
    assert parse_metrics(LLAMA_CPP) == {"running": 1.0, "waiting": 0.0, "prompt_total": 46.0,
                                        "generated_total": 412.0}


def test_unknown_metrics_are_ignored():
    assert parse_metrics("# TYPE other gauge\nother 1\n") == {}
