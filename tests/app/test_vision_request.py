"""Images in chats (#52), the request side: a ChatRequest whose user message carries OpenAI
`image_url` data URLs (app/images/parts.py, as the window and the API server make them)
reaches a local VLM as the engine's image parts and bytes (app/request/images.py), through
LocalBackend and LocalTarget on a started engine.
"""

from __future__ import annotations

import asyncio

import pytest

from app.backend import LocalBackend, LocalTarget
from app.images import read_image
from app.images.parts import with_images
from app.request import ChatRequest, Refusal
from engine import Engine, EngineConfig, SamplingParams
from tests.vision_models import make_tiny_vlm, png_bytes

GREEDY = SamplingParams(max_tokens=8, temperature=0.0)
RED = png_bytes((200, 10, 10))


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory):
    return make_tiny_vlm(tmp_path_factory.mktemp("vlm") / "smolvlm", "smolvlm")


def request(content) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": content}], params=GREEDY)


async def tokens_of(backend: LocalBackend, req: ChatRequest) -> list[int]:
    [stream] = backend.submit(req).streams
    while not stream.finished:
        await asyncio.sleep(0.01)
    return list(stream.tokens)


async def test_an_image_url_reaches_the_engine_as_its_image(vlm_dir):
    engine = Engine.load(str(vlm_dir), config=EngineConfig(prefix_cache=False))
    target = LocalTarget(engine)
    backend = LocalBackend(target)
    assert backend.sees_images and target.sees_images
    await engine.start()
    try:
        got = await tokens_of(backend, request(with_images("what is it?", [read_image(RED)])))
        want = engine.submit(messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is it?"}, {"type": "image"}]}],
            params=GREEDY, images=[RED])
        while not want.finished:
            await asyncio.sleep(0.01)
        assert got == list(want.tokens)
        # the count the window and count_tokens see: the image's tokens included
        counted = backend.prompt_tokens(request(with_images("what is it?",
                                                            [read_image(RED)])))
        assert engine.vision.image_token_id in counted
        assert len(counted) == len(want.prompt_tokens)
        # a part whose data app/images refuses is refused naming the part
        bad = [{"type": "text", "text": "and this?"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}]
        with pytest.raises(Refusal) as refused:
            backend.submit(request(bad))
        assert "messages[0].content[1]" in refused.value.message
        assert refused.value.param == "messages"
    finally:
        await engine.shutdown()


def test_a_text_model_does_not_see_images(make_engine):
    target = LocalTarget(make_engine())
    assert not LocalBackend(target).sees_images
    # a chat holding images counts its text alone for a model that reads text only
    with_image = [{"role": "user", "content": with_images("hi", [read_image(RED)])}]
    assert target.prompt_tokens(with_image) == target.prompt_tokens(
        [{"role": "user", "content": "hi"}])
