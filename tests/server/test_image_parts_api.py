"""OpenAI `image_url` content parts on /v1/chat/completions (issue #52), through the official
openai client on loopback: the tiny model reads text only, so an image part is a 400 naming
the part (streamed or not); http(s) URLs are refused with the reason (the server runs
offline); bad images and images in other roles are 400s naming the part; for a model that
sees images the parts are passed on as data URLs of what app.images keeps."""

from __future__ import annotations

import base64
import io

import openai
import pytest
from PIL import Image

from app.images import read_image, to_data_url
from app.server import schemas
from tests.server.conftest import MODEL


def _png(size: tuple[int, int] = (32, 24)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 120, 240)).save(out, format="PNG")
    return out.getvalue()


def _url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _image(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


async def _refused(client, messages, *, stream: bool = False) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as e:
        got = await client.chat.completions.create(model=MODEL, max_tokens=4,
                                                   messages=messages, stream=stream)
        if stream:
            async for _ in got:
                pass
    assert e.value.status_code == 400
    return e.value


@pytest.mark.parametrize("stream", [False, True])
async def test_a_text_only_model_refuses_an_image_naming_the_part(serve, stream) -> None:
    s = await serve()
    err = await _refused(s.client, [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                     _image(_url(_png()))]}], stream=stream)
    assert err.body["param"] == "messages[1].content[1]"
    assert "'messages[1].content[1]' is an image" in err.message
    assert "reads text only" in err.message
    # text parts alone are still one string for it
    r = await s.client.chat.completions.create(model=MODEL, max_tokens=3, messages=[
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    assert r.choices[0].finish_reason == "length"


async def test_http_urls_are_refused_with_the_reason(serve) -> None:
    s = await serve()
    err = await _refused(s.client, [{"role": "user", "content": [
        {"type": "text", "text": "See"}, _image("https://example.com/cat.png")]}])
    assert err.body["param"] == "messages[0].content[1].image_url.url"
    assert "not fetched" in err.message and "offline" in err.message


async def test_bad_images_and_images_outside_user_messages_are_refused(serve) -> None:
    s = await serve()
    cut = _png((200, 200))[:120]
    err = await _refused(s.client, [{"role": "user", "content": [_image(_url(cut))]}])
    assert err.body["param"] == "messages[0].content[0].image_url.url"
    assert "damaged or truncated" in err.message
    err = await _refused(s.client, [{"role": "user", "content": [
        _image(_url(b"plain text, not a picture"))]}])
    assert "not an image" in err.message
    err = await _refused(s.client, [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [_image(_url(_png()))]},
        {"role": "user", "content": "and?"}])
    assert err.body["param"] == "messages[1].content[0]"
    assert "only a user message" in err.message


def test_image_parts_are_passed_on_as_data_urls_of_the_kept_image() -> None:
    gif = io.BytesIO()
    Image.new("RGB", (8, 8), (255, 0, 0)).save(gif, format="GIF")
    png = _png()
    parsed = schemas.parse_chat({"model": MODEL, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Compare"}, _image(_url(png)),
        _image(_url(gif.getvalue(), "image/gif"))]}]}, 64)
    content = parsed.messages[0]["content"]
    assert content[0] == {"type": "text", "text": "Compare"}
    assert content[1] == _image(_url(png))  # a PNG as sent
    kept = read_image(gif.getvalue())  # a GIF's first frame, as PNG
    assert kept.mime == "image/png" and content[2] == _image(to_data_url(kept))
