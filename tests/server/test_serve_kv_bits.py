"""`batchchat serve --kv-bits` (issue #54): the setting reaches the engine, which answers
with quantized KV and says so on /metrics (bits, tokens a MiB)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.api_clients import openai_client

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.bundled


def metric(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(name + " "))
    return float(line.split()[1])


async def serve(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    env = os.environ | {"BATCHCHAT_API_KEY": ""}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--model", "bundled", "--port", "0", *args,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, env=env)
    for _ in range(50):
        line = (await asyncio.wait_for(proc.stdout.readline(), 180)).decode()
        if "ready at" in line or not line:
            break
    assert "ready at" in line, line
    return proc, line.split("ready at ", 1)[1].split()[0]


async def test_serve_kv_bits_8_answers_and_shows_its_tokens_a_mib() -> None:
    figures = {}
    for bits in ("16", "8"):
        proc, url = await serve("--kv-bits", bits)
        try:
            client = openai_client(url, api_key="none")
            reply = await client.chat.completions.create(
                model="bundled", messages=[{"role": "user", "content": "Say hello"}],
                max_tokens=8, temperature=0)
            assert reply.choices[0].message.content
            async with aiohttp.ClientSession() as http, \
                    http.get(url[:-3] + "/metrics") as r:
                text = await r.text()
            figures[bits] = (metric(text, "batchchat_kv_cache_bits"),
                             metric(text, "batchchat_kv_cache_tokens_per_mib"),
                             metric(text, "batchchat_kv_cache_bytes_per_token"))
        finally:
            proc.terminate()
            assert await asyncio.wait_for(proc.wait(), 30) == 0
    assert figures["16"][0] == 0 and figures["8"][0] == 8
    # float32 on the CPU: 256 B a head a token; 8 bits: 64 + 8 (one group of 64)
    assert figures["8"][1] >= 3 * figures["16"][1]
    assert figures["8"][1] == pytest.approx((1 << 20) / figures["8"][2])
