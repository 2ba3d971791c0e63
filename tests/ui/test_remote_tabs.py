"""Chat tabs on a remote backend: BatchChat's own API server (in-process, on loopback, over
the tiny model) and a deliberately broken server. The tab streams, stops, regenerates and
saves which backend answered; failures show in the tab with the partial reply kept."""

from __future__ import annotations

import json
import os
import stat
from typing import Any

import pytest

from app.bridge import Choice
from app.remote import Connection
from app.server import ApiServer, ServerConfig
from app.settings import Settings
from tests.remote.broken_server import API_KEY as BROKEN_KEY
from tests.remote.broken_server import PARTIAL, BrokenServer

from .conftest import run_until, spin, start_long_reply

KEY = "sk-own-server"


@pytest.fixture
def own_server(ctx: Any, loop: Any) -> Any:
    """BatchChat's own server over the app's engine (as Server → API server runs it)."""
    finished: list[Any] = []
    server = ApiServer(lambda: ctx.bridge.local, lambda: "tiny",
                       ServerConfig(port=0, api_key=KEY), on_finished=finished.append)
    url = loop.run_until_complete(server.start())
    server.finished = finished  # type: ignore[attr-defined]
    yield server, url
    loop.run_until_complete(server.stop())


@pytest.fixture
def broken(loop: Any) -> Any:
    server = BrokenServer()
    loop.run_until_complete(server.start())
    yield server
    loop.run_until_complete(server.stop())


def remote_tab(window: Any, settings: Settings, conn: Connection) -> Any:
    settings.set_connections([*settings.connections, conn])
    tab = window.current_tab()
    picker = tab.backend_picker
    index = picker.findData(conn.name)
    assert index > 0, "the picker lists the new connection"
    picker.setCurrentIndex(index)
    picker.activated.emit(index)  # as a click would
    assert tab.conversation.backend == conn.name
    return tab


def test_tab_on_own_server_streams_stops_and_regenerates(window, loop, settings, own_server):
    server, url = own_server
    tab = remote_tab(window, settings, Connection(url, model="tiny", api_key=KEY, name="own"))
    assert tab.send_text("Hello remote")
    gen = tab.conversation.generation
    assert gen.backend == "own" and type(gen.stream).__name__ == "RemoteStream"
    run_until(loop, lambda: not tab.conversation.is_busy)
    reply = tab.conversation.messages[-1]
    assert reply.finish_reason == "length" and reply.content
    assert reply.stats.generated_tokens == 12 and reply.stats.ttft_s is not None
    assert reply.answered_by == "own (tiny)"
    assert len(server.finished) == 1  # the server, not the local path, produced it
    assert "from own (tiny)" in tab.messages.widgets[-1].stats.text()

    # Regenerate: same greedy reply again, from the server
    first = reply.content
    assert tab.regenerate()
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.conversation.messages[-1].content == first
    assert len(server.finished) == 2

    # Stop closes the stream: the server sees its request end cancelled
    tab.panel.fields["max_tokens"].setValue(5000)
    tab.send_text("A long one")
    run_until(loop, lambda: len(tab.conversation.messages[-1].content) > 3)
    tab.on_escape()
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.conversation.messages[-1].finish_reason == "cancelled"
    run_until(loop, lambda: len(server.finished) == 3)
    assert server.finished[-1].finish_reason == "cancelled"
    assert server.finished[-1].generated_tokens < 5000


def test_edit_and_switching_back_to_local(window, loop, settings, own_server):
    _server, url = own_server
    tab = remote_tab(window, settings, Connection(url, model="tiny", api_key=KEY, name="own"))
    tab.send_text("first")
    run_until(loop, lambda: not tab.conversation.is_busy)
    tab.start_edit(0)
    assert tab.send_text("edited")
    run_until(loop, lambda: not tab.conversation.is_busy)
    msgs = tab.conversation.messages
    assert [m.content for m in msgs[:1]] == ["edited"] and len(msgs) == 2
    assert msgs[1].backend == "own"
    tab.set_backend(None)
    tab.send_text("now local")
    run_until(loop, lambda: not tab.conversation.is_busy)
    msgs = tab.conversation.messages
    assert msgs[-1].backend is None and msgs[-1].token_ids  # the local engine's own ids
    assert msgs[-1].answered_by == window.ctx.bridge.description


@pytest.mark.parametrize("model, why", [
    ("drop", "dropped the connection mid-reply"),
    ("malformed", "malformed SSE"),
])
def test_broken_server_keeps_the_partial_reply(window, loop, settings, broken, model, why):
    tab = remote_tab(window, settings, Connection(broken.url, model=model,
                                                  api_key=BROKEN_KEY, name="broken"))
    assert tab.send_text("Hi")
    run_until(loop, lambda: not tab.conversation.is_busy)
    reply = tab.conversation.messages[-1]
    assert reply.finish_reason == "error" and why in reply.error
    assert reply.content.startswith("".join(PARTIAL))  # nothing received is lost
    assert why in tab.notice.text() and "partial reply is kept" in tab.notice.text()
    assert "partial reply, error:" in tab.messages.widgets[-1].stats.text()
    # still responsive: the next message goes out at once
    assert tab.send_text("again")
    run_until(loop, lambda: not tab.conversation.is_busy)


@pytest.mark.parametrize("conn_kw, why", [
    ({"model": "ok", "api_key": "wrong"}, "not authorized (401)"),
    ({"model": "missing", "api_key": BROKEN_KEY}, "not found (404)"),
    ({"model": "busy", "api_key": BROKEN_KEY}, "retry after 7 s"),
])
def test_refusals_show_in_the_tab(window, loop, settings, broken, conn_kw, why):
    tab = remote_tab(window, settings, Connection(broken.url, name="broken", **conn_kw))
    tab.send_text("Hi")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert why in tab.notice.text()
    assert tab.conversation.messages[-1].finish_reason == "error"


def test_unreachable_server(window, loop, settings):
    tab = remote_tab(window, settings, Connection("http://127.0.0.1:9", model="m",
                                                  name="nowhere", connect_timeout_s=2))
    tab.send_text("Hi")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert "cannot reach" in tab.notice.text()


def test_history_saves_the_backend(history_app, loop, own_server):
    _server, url = own_server
    window = history_app.start()
    tab = remote_tab(window, history_app.settings,
                     Connection(url, model="tiny", api_key=KEY, name="own"))
    tab.send_text("Remember where this came from")
    run_until(loop, lambda: not tab.conversation.is_busy)
    session_id = tab.conversation.session_id
    history_app.stop()

    window = history_app.start()  # a restart on the same database and settings
    tab = window.current_tab()
    assert tab.conversation.session_id == session_id
    reply = tab.conversation.messages[-1]
    assert reply.backend == "own" and reply.answered_by == "own (tiny)"
    assert tab.conversation.backend == "own"  # the tab goes on where it left off
    assert tab.backend_picker.currentData() == "own"
    from app.history.export import session_to_markdown
    loaded = history_app.history.reader.load_session(session_id)
    md = session_to_markdown(loaded)
    assert "answered by own (tiny)" in md and KEY not in md


def test_connections_persist_with_the_key_out_of_settings(tmp_path, loop):
    settings = Settings(tmp_path / "settings.json")
    settings.set_connections([Connection("http://127.0.0.1:8000", model="m",
                                         api_key="sk-secret", name="lab"),
                              Connection("http://10.0.0.2:8080/v1", model="q", name="open")])
    text = (tmp_path / "settings.json").read_text()
    assert "sk-secret" not in text and '"***"' in text  # redacted marker only
    keys = tmp_path / "connection_keys.json"
    assert stat.S_IMODE(os.stat(keys).st_mode) == 0o600
    assert json.loads(keys.read_text()) == {"lab": "sk-secret"}

    again = Settings.load(tmp_path / "settings.json")
    assert again.connections == settings.connections  # key read back from its own file
    assert again.connection("lab").api_key == "sk-secret"
    assert again.connection("open").api_key is None
    assert "sk-secret" not in json.dumps([c.to_dict() for c in again.connections])
    spin(loop, 0)


def test_a_model_switch_ends_local_replies_and_leaves_remote_ones_streaming(
        window, loop, settings, broken):
    """The bridge follows local and remote streams alike (by listener, no task each); a
    model switch stops only the local engine: asked, and told to stop them, its replies end
    "switched" (their text kept), a remote reply streams on and its text keeps coming (it
    is not counted as running: it does not use the engine)."""
    remote = remote_tab(window, settings, Connection(broken.url, model="endless",
                                                     api_key=BROKEN_KEY, name="broken"))
    assert remote.send_text("go on")
    local = window.new_tab()
    local_gen = start_long_reply(local, loop, "a long local one")
    run_until(loop, lambda: len(remote.conversation.messages[-1].content) > 3)
    remote_gen = remote.conversation.generation

    task = window.load_model("another-tiny")
    run_until(loop, lambda: window.switch_question is not None)
    assert window.switch_question.informativeText().startswith(
        f"1 reply is running: 1 in “{local.conversation.title}”.")  # not the remote one
    window.switch_question.buttons[Choice.STOP].click()
    assert loop.run_until_complete(task) is True
    assert local_gen.finish_reason == "switched" and local_gen.is_finished
    assert not local.conversation.is_busy
    assert local.conversation.messages[-1].finish_reason == "switched"
    assert local.conversation.messages[-1].content == local_gen.text
    assert remote.conversation.is_busy and not remote_gen.ended
    seen = len(remote_gen.text)
    run_until(loop, lambda: len(remote.conversation.messages[-1].content) > seen + 3)
    remote.stop()
    run_until(loop, lambda: not remote.conversation.is_busy)
    assert remote.conversation.messages[-1].finish_reason == "cancelled"
    assert remote.conversation.messages[-1].content == remote_gen.text
    # the new model serves local chats
    fresh = window.new_tab()
    assert fresh.send_text("again")
    run_until(loop, lambda: not fresh.conversation.is_busy)
    assert fresh.conversation.messages[-1].finish_reason == "length"
