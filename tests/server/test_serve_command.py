"""`batchchat serve` as a real process: prints its URL, serves, and on SIGTERM ends the
in-flight stream and exits 0."""

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp

from app.main import main
from tests.api_clients import openai_client

ROOT = Path(__file__).resolve().parents[2]


async def read_until(proc, marker: str, lines: int = 200) -> str:
    for _ in range(lines):
        line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
        if marker in line:
            return line
        if not line:
            break
    raise AssertionError(f"{marker!r} never printed")


async def test_serve_prints_url_serves_and_stops_cleanly_on_sigterm(tiny_dir):
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--model", str(tiny_dir), "--port", "0",
        "--served-model-name", "tiny", cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        env=os.environ | {"BATCHCHAT_API_KEY": ""})
    try:
        line = await read_until(proc, "ready at")
        url = line.split("ready at ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        async with aiohttp.ClientSession() as http, http.get(url[:-3] + "/health") as r:
            assert r.status == 200
        client = openai_client(url, api_key="unused", max_retries=0)
        stream = await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "go on"}], stream=True,
            max_tokens=50_000)
        got = [await anext(aiter(stream)) for _ in range(3)]
        proc.send_signal(signal.SIGTERM)
        rest = [c async for c in stream]  # the stream ends instead of hanging
        assert len(got) + len(rest) < 50_000
        assert rest[-1].choices[0].finish_reason == "cancelled"
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        await client.close()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_serve_refuses_a_public_address_without_a_key(capsys, monkeypatch):
    monkeypatch.delenv("BATCHCHAT_API_KEY", raising=False)
    monkeypatch.setenv("BATCHCHAT_NO_BLAS_PRELOAD", "1")  # no re-exec of the test process
    assert main(["serve", "--host", "0.0.0.0", "--model", "unused"]) == 2
    assert "without an API key" in capsys.readouterr().err


async def test_a_request_just_after_sigterm_gets_503_not_a_refused_connection(tiny_dir):
    """With nothing in flight the drain is instant; the port still answers 503 (as
    documented) for a moment instead of vanishing under a client that comes 50 ms late."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--model", str(tiny_dir), "--port", "0",
        "--served-model-name", "tiny", cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=os.environ | {"BATCHCHAT_API_KEY": ""})
    try:
        line = await read_until(proc, "ready at")
        base = line.split("ready at ", 1)[1].split()[0][:-3]
        proc.send_signal(signal.SIGTERM)
        for _ in range(200):  # the server has begun stopping once it says so
            said = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            if said.startswith("Stopping") or not said:
                break
        await asyncio.sleep(0.05)
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/health") as r:
                assert r.status == 503
                assert (await r.json())["error"]["code"] == "shutting_down"
            async with http.post(base + "/v1/chat/completions", json={
                    "model": "tiny", "messages": [{"role": "user", "content": "hi"}]}) as r:
                assert r.status == 503
                assert (await r.json())["error"]["code"] == "shutting_down"
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
