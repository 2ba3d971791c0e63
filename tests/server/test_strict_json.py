"""Responses are strict JSON even when the numbers are not: an extreme repetition penalty
(found by the fuzzer: 5e-324) makes logprobs minus infinity or NaN, which json.dumps writes
as -Infinity / NaN, which strict parsers (JavaScript's JSON.parse) refuse."""

from __future__ import annotations

import json

import aiohttp
import pytest

from app.server.responses import LOGPROB_FLOOR
from tests.server.conftest import MODEL


def strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


EXTREME = {"repetition_penalty": 5e-324, "temperature": 0, "max_tokens": 6}


@pytest.mark.parametrize("stream", [False, True])
async def test_logprobs_of_an_extreme_penalty_are_json_numbers(serve, stream):
    s = await serve()
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "abcabcabc"}],
            "logprobs": True, "top_logprobs": 3, "stream": stream} | EXTREME
    completion = {"model": MODEL, "prompt": "abcabcabc", "logprobs": 3,
                  "stream": stream} | EXTREME
    values = []
    async with aiohttp.ClientSession() as http:
        for path, body in (("/v1/chat/completions", chat), ("/v1/completions", completion)):
            async with http.post(s.url + path, json=body) as r:
                assert r.status == 200
                text = await r.text()
            events = [line[6:] for line in text.splitlines()
                      if line.startswith("data: ") and line != "data: [DONE]"] \
                if stream else [text]
            for event in events:
                choice = strict(event)["choices"][0]
                lp = choice["logprobs"]
                if lp is None:  # a stream's opening (role) or closing chunk
                    continue
                if "content" in lp:
                    values += [e["logprob"] for e in lp["content"]]
                    values += [t["logprob"] for e in lp["content"] for t in e["top_logprobs"]]
                else:
                    values += lp["token_logprobs"]
                    values += [v for top in lp["top_logprobs"] for v in top.values()]
    assert values and all(LOGPROB_FLOOR <= v <= 0 for v in values)
