"""The Responses API's `input_image` parts on /v1/responses (issue #52), through the official
openai client on loopback: on a tiny SmolVLM (tests/vision_models.py) a user's input_image
is read as the chat route's image_url part, so the answer is the chat route's for the same
image, streamed too; a bad image and an image outside a user message are 400s naming the
part (the text-only refusal: test_responses_api's refusals)."""

from __future__ import annotations

import base64

import openai
import pytest

from engine import Engine
from tests.server.conftest import MODEL, serving
from tests.vision_models import make_tiny_vlm, png_bytes

RED = png_bytes((200, 10, 10))
URL = "data:image/png;base64," + base64.b64encode(RED).decode()


async def test_input_image_on_a_vision_model_answers_as_the_chat_route(tmp_path) -> None:
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "smolvlm", "smolvlm")))
    async with serving(engine) as s:
        chat = await s.client.chat.completions.create(
            model=MODEL, max_tokens=6, temperature=0, messages=[{"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": URL}}]}])
        asked = [{"role": "user", "content": [{"type": "input_text", "text": "What is this?"},
                                              {"type": "input_image", "image_url": URL}]}]
        r = await s.client.responses.create(model=MODEL, max_output_tokens=6, temperature=0,
                                            input=asked, store=False)
        assert r.output_text == chat.choices[0].message.content
        assert r.usage.input_tokens == chat.usage.prompt_tokens  # the image's tokens too
        events = await s.client.responses.create(model=MODEL, max_output_tokens=6,
                                                 temperature=0, input=asked, store=False,
                                                 stream=True)
        deltas = [e.delta async for e in events if e.type == "response.output_text.delta"]
        assert len(deltas) > 1 and "".join(deltas) == r.output_text
        with pytest.raises(openai.BadRequestError) as e:
            await s.client.responses.create(model=MODEL, max_output_tokens=4, input=[
                {"role": "user", "content": [{"type": "input_image",
                                              "image_url": "https://example.com/a.png"}]}])
        assert e.value.body["param"] == "input[0].content[0].image_url"
        assert "not fetched" in e.value.message
        with pytest.raises(openai.BadRequestError) as e:
            await s.client.responses.create(model=MODEL, max_output_tokens=4, input=[
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "input_image", "image_url": URL}]},
                {"role": "user", "content": "and?"}])
        assert e.value.body["param"] == "input[1].content[0].type"
        assert "images are read in a user message only" in e.value.message
