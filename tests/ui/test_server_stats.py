"""The stats panel's Server box: BatchChat's own server's /metrics while a remote tab
streams; a server without /metrics falls back to what this app measures."""

from __future__ import annotations

from typing import Any

import pytest

from app.remote import Connection
from app.server import ApiServer, ServerConfig
from tests.remote.broken_server import API_KEY as BROKEN_KEY
from tests.remote.broken_server import BrokenServer
from tests.ui.conftest import run_until, spin
from tests.ui.test_remote_tabs import remote_tab

KEY = "sk-stats"


@pytest.fixture
def own_server(ctx: Any, loop: Any) -> Any:
    server = ApiServer(lambda: ctx.bridge.local, lambda: "tiny",
                       ServerConfig(port=0, api_key=KEY))
    url = loop.run_until_complete(server.start())
    yield url
    loop.run_until_complete(server.stop())


def read(loop: Any, box: Any) -> Any:
    future = box.poll()
    assert future is not None
    return loop.run_until_complete(future)


def test_own_server_metrics_while_a_tab_streams(window, loop, settings, own_server):
    tab = remote_tab(window, settings, Connection(own_server, model="tiny", api_key=KEY,
                                                  name="own"))
    window.stats_dock.show()
    box = window.stats_dock.server_box
    box.choose("own")
    first = read(loop, box)
    assert first.source == "metrics" and first.running == 0
    tab.panel.fields["max_tokens"].setValue(5000)
    tab.send_text("keep going")
    run_until(loop, lambda: len(tab.conversation.messages[-1].content) > 3)
    # Read while the reply streams: the tiny model fills its 512-token context in ~0.4 s,
    # so a fixed wait before one read raced the reply's end.
    for _ in range(40):
        load = read(loop, box)
        if load.running == 1 and load.generation_tokens_per_s or not tab.conversation.is_busy:
            break
        spin(loop, 0.02)
    assert load.source == "metrics" and load.running == 1  # the server counts the tab
    assert load.generation_tokens_per_s is not None and load.generation_tokens_per_s > 0
    assert box.values["running"].text() == "1"
    assert box.values["source"].text() == "its /metrics"
    tab.stop()
    run_until(loop, lambda: not tab.conversation.is_busy)


def test_server_without_metrics_shows_client_numbers(window, loop, settings):
    broken = BrokenServer()
    loop.run_until_complete(broken.start())
    try:
        tab = remote_tab(window, settings, Connection(broken.url, model="endless",
                                                      api_key=BROKEN_KEY, name="plain"))
        window.stats_dock.show()
        box = window.stats_dock.server_box
        box.choose("plain")
        tab.send_text("Hi")
        run_until(loop, lambda: len(tab.conversation.messages[-1].content) > 3)
        read(loop, box)
        # the rate is over the tokens between two reads: on a loaded machine 0.3 s may see
        # none, so read again (up to ~10 s) until some arrived
        for _ in range(30):
            spin(loop, 0.3)
            load = read(loop, box)
            if load.generation_tokens_per_s:
                break
        assert load.source == "client" and "404" in load.note
        assert load.running == 1 and load.generation_tokens_per_s > 0
        assert box.values["source"].text() == "this app's requests"
        tab.stop()
        run_until(loop, lambda: not tab.conversation.is_busy)
    finally:
        loop.run_until_complete(broken.stop())
