"""The Server toggle: the window serves its own engine over the OpenAI API; a real request
from the openai client batches with a chat tab, shows in the stats table as "api" and is saved
to the history's request stats; toggling off releases the port."""

from __future__ import annotations

import asyncio
import socket

import pytest
from openai import AuthenticationError
from PySide6.QtGui import QKeySequence

from tests.api_clients import openai_client
from tests.ui.conftest import run_until
from ui.server_controls import OFF_TEXT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_toggle_serves_the_app_engine_and_the_request_shows_up(history_app, loop):
    history_app.settings.server_port = port = free_port()
    history_app.settings.server_api_key = "k3y"
    window = history_app.start()
    controls = window.api_server
    assert controls.button.text() == OFF_TEXT and not controls.action.isChecked()
    assert controls.action.shortcut() == QKeySequence("Ctrl+Shift+A")

    controls.action.trigger()
    run_until(loop, lambda: controls.server.running)
    url = f"http://127.0.0.1:{port}/v1"
    assert controls.button.text() == f"API: {url}" and controls.action.isChecked()

    client = openai_client(url, api_key="k3y", max_retries=0)
    model = loop.run_until_complete(client.models.list()).data[0].id
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(400)
    assert tab.conversation.send("a chat at the same time")
    run_until(loop, lambda: len(tab.conversation.generation.stream.tokens) >= 2)
    reply = loop.run_until_complete(client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hello from outside"}],
        max_tokens=8, temperature=0))
    assert reply.usage.completion_tokens == 8
    tab.conversation.stop()
    run_until(loop, lambda: not tab.conversation.is_busy)
    engine = window.ctx.bridge.local.engine
    assert max(t.decode_rows for t in engine.telemetry()) >= 2  # one batch, chat + API

    dock = window.stats_dock
    dock.toggleViewAction().trigger()
    dock.refresh(poll=True)
    api_rows = [r for r in dock.model.rows if r.source == "api"]
    assert len(api_rows) == 1 and api_rows[0].request_id.startswith("api-")
    assert api_rows[0].generated_tokens == 8

    run_until(loop, lambda: any(r.request_id == api_rows[0].request_id
                                for r in history_app.history.reader.list_request_stats()))
    saved = next(r for r in history_app.history.reader.list_request_stats()
                 if r.request_id.startswith("api-"))
    assert (saved.generated_tokens, saved.session_id) == (8, None)

    controls.button.click()  # the status-bar button toggles too
    run_until(loop, lambda: not controls.server.running)
    assert controls.button.text() == OFF_TEXT and not controls.action.isChecked()
    with pytest.raises(ConnectionRefusedError):  # nobody listens there any more
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    loop.run_until_complete(client.close())


def test_a_taken_port_is_reported_not_fatal(window, loop):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        window.ctx.settings.server_port = taken.getsockname()[1]
        window.api_server.toggle()
        run_until(loop, lambda: bool(window.api_server.server.error))
        assert not window.api_server.server.running
        assert "Could not start the API server" in window.statusBar().currentMessage()
        assert window.api_server.button.text() == OFF_TEXT


def test_closing_the_window_stops_the_server(window, loop):
    window.ctx.settings.server_port = free_port()
    window.api_server.toggle()
    run_until(loop, lambda: window.api_server.server.running)
    window.close()
    run_until(loop, lambda: window._closed, timeout=10)
    assert not window.api_server.server.running
    loop.run_until_complete(asyncio.sleep(0))


def test_settings_dialog_saves_port_and_key_and_restarts_a_running_server(window, loop):
    controls = window.api_server
    settings = window.ctx.settings
    settings.server_port = free_port()
    controls.toggle()
    run_until(loop, lambda: controls.server.running)
    new_port = free_port()
    dialog = controls.edit_settings()
    assert dialog.port.value() == settings.server_port and dialog.key.text() == ""
    dialog.port.setValue(new_port)
    dialog.key.setText("  fresh-key ")
    dialog.accept()
    assert (settings.server_port, settings.server_api_key) == (new_port, "fresh-key")
    run_until(loop, lambda: controls.server.url == f"http://127.0.0.1:{new_port}/v1")
    client = openai_client(controls.server.url, api_key="wrong", max_retries=0)
    with pytest.raises(AuthenticationError):  # the new key is enforced
        loop.run_until_complete(client.models.list())
    loop.run_until_complete(client.close())
    assert controls.button.text() == f"API: http://127.0.0.1:{new_port}/v1"
