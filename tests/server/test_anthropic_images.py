"""Anthropic `image` blocks on /v1/messages (issue #52), through the official anthropic
client on loopback: on a tiny SmolVLM (tests/vision_models.py) an image block is read as
the chat route's image_url part, so the streamed answer is the OpenAI route's answer for the
same image; a text-only model refuses it with a 400 naming the block; a URL source and a
bad image are refused naming the block's source."""

from __future__ import annotations

import base64

import anthropic
import pytest

from engine import Engine
from tests.server.conftest import MODEL, serving
from tests.server.test_anthropic_api import client_of, streamed
from tests.vision_models import make_tiny_vlm, png_bytes

RED = png_bytes((200, 10, 10))


def _image_block(data: bytes = RED) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                        "data": base64.b64encode(data).decode()}}


async def test_an_image_block_on_a_vision_model_answers_as_the_chat_route(tmp_path) -> None:
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "smolvlm", "smolvlm")))
    async with serving(engine) as s:
        client = client_of(s)
        try:
            text, final, _kinds = await streamed(
                client, model=MODEL, max_tokens=6, extra_body={"temperature": 0},
                messages=[{"role": "user", "content": [
                    {"type": "text", "text": "What is this?"}, _image_block()]}])
            url = "data:image/png;base64," + base64.b64encode(RED).decode()
            chat = await s.client.chat.completions.create(
                model=MODEL, max_tokens=6, temperature=0, messages=[{"role": "user", "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": url}}]}])
            assert text == chat.choices[0].message.content
            assert final.usage.output_tokens == 6
            assert final.usage.input_tokens == chat.usage.prompt_tokens  # image tokens too
            with pytest.raises(anthropic.BadRequestError) as e:
                await client.messages.create(model=MODEL, max_tokens=4, messages=[
                    {"role": "user", "content": [{"type": "image", "source": {
                        "type": "url", "url": "https://example.com/a.png"}}]}])
            assert "'messages[0].content[0].source'" in e.value.message
            assert "not fetched" in e.value.message
            big = png_bytes((200, 10, 10), (300, 200))
            with pytest.raises(anthropic.BadRequestError) as e:
                await client.messages.create(model=MODEL, max_tokens=4, messages=[
                    {"role": "user", "content": [_image_block(big[:len(big) - 30])]}])
            assert "'messages[0].content[0].source.data' cannot be used: damaged or " \
                   "truncated" in e.value.message
        finally:
            await client.close()


async def test_a_text_only_model_refuses_an_image_block_naming_it(serve) -> None:
    s = await serve()
    client = client_of(s)
    try:
        with pytest.raises(anthropic.BadRequestError) as e:
            await client.messages.create(model=MODEL, max_tokens=4, messages=[
                {"role": "user", "content": [{"type": "text", "text": "See"}, _image_block()]}])
        assert e.value.status_code == 400
        assert "'messages[0].content[1]' is an image block, and this model reads text only " \
               "and cannot see images" in e.value.message
    finally:
        await client.close()
