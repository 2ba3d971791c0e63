"""Images in chats (#52), end to end: through the official `openai` client on loopback, a
data-URL image request to a tiny VLM (tests/vision_models.py, mlx-vlm's classes) streams
its answer, the answer the engine gives the same image directly, and a follow-up with the
same image reports its image tokens as cached; a text-only model refuses the same request
with a 400 naming the part (tests/server/test_image_parts_api.py has the other refusals).
"""

from __future__ import annotations

import base64

import openai
import pytest

from engine import Engine, SamplingParams
from tests.server.conftest import MODEL, serving
from tests.vision_models import make_tiny_vlm, png_bytes

RED = png_bytes((200, 10, 10))


def _asking(text: str) -> list[dict]:
    url = "data:image/png;base64," + base64.b64encode(RED).decode()
    return [{"role": "user", "content": [{"type": "text", "text": text},
                                         {"type": "image_url", "image_url": {"url": url}}]}]


async def test_an_image_request_streams_its_answer(tmp_path) -> None:
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "smolvlm", "smolvlm")))
    async with serving(engine) as s:
        stream = await s.client.chat.completions.create(
            model=MODEL, messages=_asking("What is this?"), max_tokens=8, temperature=0,
            stream=True, stream_options={"include_usage": True})
        pieces, usage = [], None
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
            usage = chunk.usage or usage
        assert len(pieces) > 1  # streamed, not one piece
        direct = engine.submit(
            messages=[{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                   {"type": "image"}]}],
            params=SamplingParams(max_tokens=8, temperature=0.0), images=[RED])
        assert "".join(pieces) == await direct.result()
        assert usage.completion_tokens == 8
        # the same image again: its tokens come from the prefix cache
        again = await s.client.chat.completions.create(
            model=MODEL, messages=_asking("What is this?"), max_tokens=2, temperature=0)
        image_tokens = engine.vision.prepare(
            [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                          {"type": "image"}]}], [RED]).images_end
        assert again.usage.prompt_tokens_details.cached_tokens >= image_tokens


async def test_a_text_only_model_refuses_it_naming_the_part(serve) -> None:
    s = await serve()
    with pytest.raises(openai.BadRequestError) as e:
        await s.client.chat.completions.create(model=MODEL, messages=_asking("What is it?"),
                                               max_tokens=4, stream=True)
    assert e.value.status_code == 400
    assert e.value.body["param"] == "messages[0].content[1]"
    assert "reads text only" in e.value.message


LOOKUP = [{"type": "function", "function": {
    "name": "lookup", "description": "Look a word up",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}}]


async def test_an_image_with_tools_is_refused_naming_the_part_and_why(tmp_path) -> None:
    """Tools render the prompt into tokens here (app.tools), where a vision model's image
    cannot be placed: a 400 naming the image part and why, streamed or not, and the same
    image without tools is answered."""
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "smolvlm", "smolvlm")))
    async with serving(engine) as s:
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as e:
                await s.client.chat.completions.create(
                    model=MODEL, messages=_asking("What is it?"), tools=LOOKUP,
                    max_tokens=4, stream=stream)
            assert e.value.status_code == 400
            assert e.value.body["param"] == "messages[0].content[1]"
            assert "cannot be sent with tools" in e.value.message
            assert "image processor" in e.value.message  # why
        ok = await s.client.chat.completions.create(
            model=MODEL, messages=_asking("What is it?"), max_tokens=2, temperature=0)
        assert ok.usage.completion_tokens == 2
