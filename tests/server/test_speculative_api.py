"""Speculative decoding through the API (issue #31): `batchchat serve --speculative ngram`
as a real process drafts a copy-style prompt's reply and /metrics says so; the same reply
without speculation is token for token the same; a bad --speculative is a usage error."""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path

import aiohttp
from openai import AsyncOpenAI
from openai.types import Completion

from tests.api_clients import openai_client
from tests.engine.conftest import drafting_pays

from .conftest import MODEL
from .test_metrics_memory import scrape

ROOT = Path(__file__).resolve().parents[2]


def copy_prompt(seed: int, length: int = 24, repeats: int = 3) -> list[int]:
    """Token ids that repeat a random phrase: the reply is easy to draft from the prompt
    (as tests/engine/test_speculation.py's)."""
    rng = random.Random(seed)
    phrase = [rng.randrange(0, 256) for _ in range(length)]
    return phrase * repeats + phrase[: length // 2]


# Seed 1 first: its reply copies its prompt from the first step, so its first checks (made
# before the engine has measured what a drafted position costs) accept drafts; in the real
# serve process later checks follow the measured costs, which on a model this small are
# mostly noise (in-process, drafting_pays pins them).
SEEDS = [1, 0, 2, 3]


async def replies(client: AsyncOpenAI, seeds: list[int]) -> list[Completion]:
    return [await client.completions.create(model=MODEL, prompt=copy_prompt(seed),
                                            max_tokens=160, temperature=0) for seed in seeds]


async def test_served_speculation_moves_the_metrics_and_keeps_the_replies(serve):
    plain = await serve(engine={"speculative": "off"})
    drafted = await serve(engine={"speculative": "ngram"})
    drafting_pays(drafted.engine)  # (whatever a drafted position costs on the tiny model)
    seeds = SEEDS
    spec, off_replies = await replies(drafted.client, seeds), await replies(plain.client, seeds)
    assert [r.choices[0].text for r in spec] == [r.choices[0].text for r in off_replies]
    m, off = await scrape(drafted.url), await scrape(plain.url)
    stats = drafted.engine.stats()
    # each response's usage: its drafts as OpenAI's prediction tokens (none without)
    spec_usage, plain_usage = [r.usage for r in spec], [r.usage for r in off_replies]
    assert sum(u.completion_tokens_details.accepted_prediction_tokens
               for u in spec_usage) == stats.accepted_tokens
    assert sum(u.completion_tokens_details.rejected_prediction_tokens
               for u in spec_usage) == stats.drafted_tokens - stats.accepted_tokens
    assert all(u.completion_tokens_details.accepted_prediction_tokens
               == u.completion_tokens_details.rejected_prediction_tokens == 0
               for u in plain_usage)
    assert [u.completion_tokens for u in spec_usage] == [u.completion_tokens for u in plain_usage]
    assert m["batchchat_spec_decode_num_draft_tokens_total"] == stats.drafted_tokens > 0
    assert m["batchchat_spec_decode_num_accepted_tokens_total"] == stats.accepted_tokens
    assert 0 < m["batchchat_spec_decode_acceptance_rate"] <= 1
    assert m["batchchat_decode_tokens_per_step"] > 1
    assert off["batchchat_spec_decode_num_draft_tokens_total"] == 0
    assert off["batchchat_decode_tokens_per_step"] == 1


async def read_line(proc: asyncio.subprocess.Process, marker: str) -> str:
    for _ in range(200):
        line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
        if marker in line or not line:
            return line
    return ""


async def test_batchchat_serve_speculative_ngram_drafts(tiny_dir: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--model", str(tiny_dir), "--port", "0",
        "--served-model-name", MODEL, "--speculative", "ngram", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, env=os.environ | {"BATCHCHAT_API_KEY": ""})
    try:
        line = await read_line(proc, "ready at")
        assert "ready at" in line, line
        url = line.split("ready at ", 1)[1].split()[0]
        client = openai_client(url, api_key="unused", max_retries=0)
        before = await scrape(url[:-3])
        assert before["batchchat_spec_decode_num_draft_tokens_total"] == 0
        await replies(client, SEEDS)
        await client.close()
        m = await scrape(url[:-3])
        assert m["batchchat_spec_decode_num_draft_tokens_total"] > 0
        assert 0 < m["batchchat_spec_decode_acceptance_rate"] <= 1
        async with aiohttp.ClientSession() as http, http.get(url[:-3] + "/health") as r:
            assert r.status == 200
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
