"""An image request's processor (decode, resize, patching) runs off the server's loop (#52):
while it works on a slow image, another client's stream on the same loop keeps receiving
tokens, and the submit that follows finds the processor's work done (it runs once)."""

from __future__ import annotations

import asyncio
import base64
import threading
import time

import mlx_vlm.utils
import pytest

from engine import Engine
from tests.server.conftest import MODEL, serving
from tests.vision_models import make_tiny_vlm, png_bytes

SLOW = 1.0  # seconds the processor is made to take: a large photo on a real model


async def _beat(gaps: list[float], stop: asyncio.Event) -> None:
    """The loop's largest pause between two wake-ups, kept in gaps[0]."""
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.002)
        now = time.perf_counter()
        gaps[0] = max(gaps[0], now - last)
        last = now


async def test_a_slow_image_does_not_stall_another_stream(tmp_path, monkeypatch) -> None:
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "smolvlm", "smolvlm")))
    real = mlx_vlm.utils.process_inputs
    ran: list[tuple[str, float, float]] = []  # (thread, start, end) of each processor run

    def slow(*args, **kwargs):  # the real processor, made as slow as a large photo's
        start = time.perf_counter()
        time.sleep(SLOW)
        out = real(*args, **kwargs)
        ran.append((threading.current_thread().name, start, time.perf_counter()))
        return out

    monkeypatch.setattr(mlx_vlm.utils, "process_inputs", slow)
    url = "data:image/png;base64," + base64.b64encode(png_bytes((200, 10, 10))).decode()
    image_messages = [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": url}}]}]
    async with serving(engine) as s:
        arrivals: list[float] = []
        first = asyncio.Event()

        async def text_stream() -> None:
            stream = await s.client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Tell a long story."}],
                max_tokens=400, temperature=0, stream=True)
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    arrivals.append(time.perf_counter())
                    first.set()

        texting = asyncio.create_task(text_stream())
        await first.wait()
        gaps, stop = [0.0], asyncio.Event()
        beating = asyncio.create_task(_beat(gaps, stop))
        answer = await s.client.chat.completions.create(
            model=MODEL, messages=image_messages, max_tokens=4, temperature=0)
        stop.set()
        await beating
        await texting
    assert answer.usage.completion_tokens == 4
    _, start, end = ran[0]
    during = [t for t in arrivals if start <= t <= end]
    print(f"loop's largest gap {gaps[0] * 1000:.0f} ms; {len(during)} text tokens in the "
          f"processor's {(end - start) * 1000:.0f} ms")
    assert gaps[0] < SLOW / 4, f"the loop stalled {gaps[0] * 1000:.0f} ms"
    assert len(during) >= 5, f"{len(during)} text tokens arrived in the image's {SLOW} s"
    # the processor ran once, off the loop's thread: the submit found its work done
    assert len(ran) == 1 and ran[0][0] != threading.current_thread().name


async def test_what_the_processor_refuses_is_a_400_before_anything_streams(
        tmp_path, monkeypatch) -> None:
    import openai

    engine = Engine.load(str(make_tiny_vlm(tmp_path / "smolvlm", "smolvlm")))

    def refusing(*args, **kwargs):  # a processor that cannot take the image
        raise ValueError("the image is too narrow to tile")

    monkeypatch.setattr(mlx_vlm.utils, "process_inputs", refusing)
    url = "data:image/png;base64," + base64.b64encode(png_bytes((200, 10, 10))).decode()
    async with serving(engine) as s:
        with pytest.raises(openai.BadRequestError) as e:
            await s.client.chat.completions.create(
                model=MODEL, max_tokens=4, stream=True, messages=[{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": url}}]}])
    assert e.value.status_code == 400
    assert "too narrow to tile" in e.value.message
