"""Issue #46 item 22: while a reply streams, its chat's row in the sidebar shows the reply
so far (throttled, twice a second), not the first word or nothing until the end. The
reply comes from a test server that streams "." every 20 ms (as slowly as a real model,
where the tiny local one writes its whole preview at once)."""

from __future__ import annotations

from app.history.sidebar import one_line
from app.remote import Connection
from tests.remote.broken_server import API_KEY, BrokenServer
from tests.ui.conftest import run_until
from tests.ui.test_remote_tabs import remote_tab


def test_the_preview_follows_a_streaming_reply(history_app, loop, settings):
    server = BrokenServer()
    loop.run_until_complete(server.start())
    try:
        window = history_app.start()
        tab = remote_tab(window, settings, Connection(server.url, model="endless",
                                                      api_key=API_KEY, name="slow"))
        conv = tab.conversation

        def preview() -> str:
            row = next((r for r in window.sidebar.rows()
                        if r.session_id == conv.session_id), None)
            return row.preview if row is not None else ""

        assert tab.send_text("count slowly")
        run_until(loop, lambda: len(conv.messages[-1].content) > 3)
        run_until(loop, lambda: len(preview()) >= 40, timeout=10)  # about 0.8 s of dots
        assert conv.is_busy  # while it streams
        assert one_line(conv.messages[-1].content).startswith(preview().rstrip("…"))
        tab.stop()
        run_until(loop, lambda: not conv.is_busy)
    finally:
        loop.run_until_complete(server.stop())
