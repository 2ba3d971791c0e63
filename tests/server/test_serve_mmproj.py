"""`batchchat serve --model X.gguf --mmproj P` (issue #52): a GGUF and its llama.cpp
projector served as one model that sees images: through the official `openai` client a
data-URL image request streams the answer the engine gives the pair directly; a projector
the engine does not map stops the start with its type named (beside the GGUF instead, the
model is served reading text and the start says why)."""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from pathlib import Path

from engine import Engine, SamplingParams
from tests.api_clients import openai_client
from tests.mmproj_models import make_tiny_pair, write_mmproj
from tests.vision_models import png_bytes

ROOT = Path(__file__).resolve().parents[2]
RED = png_bytes((200, 10, 10))


async def start(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    """The server's process and its base URL ("" when it stopped before being ready)."""
    env = os.environ | {"BATCHCHAT_API_KEY": ""}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "serve", "--port", "0", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    line = ""
    for _ in range(50):
        line = (await asyncio.wait_for(proc.stdout.readline(), 180)).decode()
        if "ready at" in line or not line:
            break
    return proc, line.split("ready at ", 1)[1].split()[0] if "ready at" in line else ""


async def test_serve_gguf_with_mmproj_streams_an_image_answer(tmp_path) -> None:
    _, text, mmproj = make_tiny_pair(tmp_path, "gemma3")
    alone = tmp_path / "alone" / text.name  # nothing beside it: --mmproj says where
    alone.parent.mkdir()
    alone.write_bytes(text.read_bytes())
    proc, url = await start("--model", str(alone), "--mmproj", str(mmproj))
    assert url, (await proc.stderr.read()).decode()[-2000:]
    try:
        client = openai_client(url, api_key="none")
        data = "data:image/png;base64," + base64.b64encode(RED).decode()
        stream = await client.chat.completions.create(
            model=alone.stem, max_tokens=8, temperature=0, stream=True,
            messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": data}},
                {"type": "text", "text": "What is this?"}]}])
        pieces = [c.choices[0].delta.content async for c in stream
                  if c.choices and c.choices[0].delta.content]
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    assert len(pieces) > 1  # streamed
    engine = Engine.load(str(alone), mmproj=str(mmproj))
    await engine.start()
    try:
        direct = engine.submit(
            messages=[{"role": "user", "content": [
                {"type": "image"}, {"type": "text", "text": "What is this?"}]}],
            params=SamplingParams(max_tokens=8, temperature=0.0), images=[RED])
        assert "".join(pieces) == await asyncio.wait_for(direct.result(), 60)
    finally:
        await engine.shutdown()


async def test_serve_refuses_a_projector_type_it_does_not_map(tmp_path) -> None:
    vlm, text, _ = make_tiny_pair(tmp_path, "idefics3")
    other = write_mmproj(vlm, tmp_path / "other.gguf", projector="llava")
    proc, url = await start("--model", str(text), "--mmproj", str(other))
    assert not url
    assert await asyncio.wait_for(proc.wait(), 60) == 1
    err = (await proc.stderr.read()).decode()
    assert "cannot load the model" in err and "projector type 'llava'" in err
    # beside the GGUF instead: the model is served reading text, and the start says why
    beside = text.parent / "mmproj-llava.gguf"
    text.with_name("mmproj-tiny-idefics3-f32.gguf").unlink()
    other.rename(beside)
    proc, url = await start("--model", str(text))
    try:
        assert url
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    err = (await proc.stderr.read()).decode()
    assert "Note: it reads text only here" in err and "llava" in err
