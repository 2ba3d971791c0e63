"""The sampling a benchmark's requests ask for, for every side of a comparison: the fields an
OpenAI-compatible server reads, the engine's SamplingParams, and mlx-lm's sampler and logits
processors built from the same values, so that each peer runs the same chain.

TABS is the chat tabs' default (app/settings.py): what users run. llama.cpp's server reads
the penalty as repeat_penalty, BatchChat and vLLM as repetition_penalty (each ignores the
other's name)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.sampling_params import SamplingParams

GREEDY: dict[str, Any] = {"temperature": 0.0}
TABS: dict[str, Any] = {"temperature": 0.7, "top_p": 0.95, "min_p": 0.05,
                        "repetition_penalty": 1.1, "repeat_penalty": 1.1}
SAMPLING = {"greedy": GREEDY, "tabs": TABS}


@dataclass(frozen=True, slots=True)
class RequestSampling:
    name: str
    fields: dict[str, Any]  # as sent over HTTP (one of SAMPLING's values)

    def params(self, max_tokens: int, seed: int | None = None) -> SamplingParams:
        f = self.fields
        return SamplingParams(temperature=f.get("temperature", 0.0), top_p=f.get("top_p", 1.0),
                              min_p=f.get("min_p", 0.0),
                              repetition_penalty=f.get("repetition_penalty", 1.0),
                              max_tokens=max_tokens, seed=seed)

    def mlx_lm_sampler(self) -> Callable[[Any], Any]:
        from mlx_lm.sample_utils import make_sampler

        f = self.fields
        return make_sampler(temp=f.get("temperature", 0.0), top_p=f.get("top_p", 0.0),
                            min_p=f.get("min_p", 0.0))

    def mlx_lm_processors(self) -> list[Callable[[Any, Any], Any]] | None:
        from mlx_lm.sample_utils import make_logits_processors

        penalty = self.fields.get("repetition_penalty")
        return make_logits_processors(repetition_penalty=penalty) if penalty else None

    def mlx_lm_kwargs(self) -> dict[str, Any]:
        """stream_generate's / BatchGenerator's keyword arguments for this chain."""
        return {"sampler": self.mlx_lm_sampler(), "logits_processors": self.mlx_lm_processors()}


def request_sampling(name: str) -> RequestSampling:
    return RequestSampling(name, SAMPLING[name])


GREEDY_REQUESTS = request_sampling("greedy")
