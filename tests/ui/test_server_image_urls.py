"""Server ▸ Server settings…'s "Fetch http(s) image URLs" box (#52): unticked (the default)
the in-app API server refuses an http URL saying where to turn it on; ticked, it fetches the
image from a real loopback aiohttp server (the tiny model reads text only, so the 400 then
names the part itself, not its url). The official openai client talks to the real server."""

from __future__ import annotations

import json

import openai
import pytest
from aiohttp import web

from app.images import fetch
from tests.api_clients import openai_client
from tests.ui.conftest import run_until
from tests.ui.test_api_server import free_port
from tests.vision_models import png_bytes
from ui.server_controls import FETCH_URLS_TEXT

PART = "messages[0].content[1]"


@pytest.fixture
def image_url(loop):
    async def png(_: web.Request) -> web.Response:
        return web.Response(body=png_bytes((200, 10, 10)), content_type="image/png")

    app = web.Application()
    app.add_routes([web.get("/red.png", png)])
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/red.png"
    loop.run_until_complete(runner.cleanup())
    fetch.allow_image_urls(False)  # process-wide: leave it as other tests expect


def _refusal(loop, client, url: str) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as e:
        loop.run_until_complete(client.chat.completions.create(
            model="tiny", max_tokens=2, messages=[{"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": url}}]}]))
    return e.value


def test_the_box_turns_fetching_on_for_the_in_app_server(window, loop, image_url):
    settings = window.ctx.settings
    settings.server_port = port = free_port()
    controls = window.api_server
    controls.toggle()
    run_until(loop, lambda: controls.server.running)
    client = openai_client(f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0)

    err = _refusal(loop, client, image_url)  # unticked: nothing fetched, and where to change it
    assert err.body["param"] == PART + ".image_url.url"
    assert "not fetched" in err.message and "Server settings" in err.message

    dialog = controls.edit_settings()
    box = dialog.fetch_urls
    assert box.text() == FETCH_URLS_TEXT and not box.isChecked()
    assert "any http(s) address this machine can reach" in box.toolTip()
    box.setChecked(True)
    dialog.accept()  # a running server restarts with the dialog's settings
    run_until(loop, lambda: not controls._tasks and controls.server.running)
    assert json.loads(settings.path.read_text())["allow_image_urls"] is True

    err = _refusal(loop, client, image_url)  # fetched and read: the text-only model's 400
    assert err.body["param"] == PART and "reads text only" in err.message
    loop.run_until_complete(client.close())
