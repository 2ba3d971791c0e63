"""The connections dialog: URL validation, models from /v1/models (and a clear error when
that fails), saving into the settings and the tabs' backend pickers."""

from __future__ import annotations

from typing import Any

import pytest

from app.server import ApiServer, ServerConfig
from ui.connections_dialog import ConnectionsDialog

KEY = "sk-dialog"


@pytest.fixture
def own_server(ctx: Any, loop: Any) -> Any:
    server = ApiServer(lambda: ctx.bridge.local, lambda: "tiny",
                       ServerConfig(port=0, api_key=KEY))
    url = loop.run_until_complete(server.start())
    yield url
    loop.run_until_complete(server.stop())


def test_add_a_connection(window, loop, settings, own_server):
    dialog = ConnectionsDialog(settings, window)
    dialog.url.setText("ftp://nope")
    assert not dialog.save_current()
    assert "must start with http://" in dialog.status.text()

    dialog.url.setText(own_server)
    dialog.key.setText("wrong")
    assert loop.run_until_complete(dialog.start_fetch()) is None
    assert "not authorized (401)" in dialog.status.text()
    dialog.key.setText(KEY)
    assert loop.run_until_complete(dialog.start_fetch()) == ["tiny"]
    assert dialog.model.currentText() == "tiny"
    dialog.name.setText("own")
    assert dialog.save_current(), dialog.status.text()
    conn = settings.connection("own")
    assert conn is not None and conn.model == "tiny" and conn.api_key == KEY
    # every open tab's picker offers it at once
    picker = window.current_tab().backend_picker
    assert picker.findData("own") > 0
    assert dialog.list.count() == 1 and dialog.list.item(0).text() == "own (tiny)"

    dialog.new_connection()  # a second one with the same name is refused
    dialog.url.setText(own_server)
    dialog.model.setCurrentText("tiny")
    dialog.name.setText("own")
    assert not dialog.save_current() and "already a connection named" in dialog.status.text()

    dialog.list.setCurrentRow(0)
    dialog.delete_current()
    assert settings.connections == [] and picker.findData("own") == -1
    dialog.close()


def test_unreachable_server_is_reported(window, loop, settings):
    dialog = ConnectionsDialog(settings, window)
    dialog.url.setText("http://127.0.0.1:9")
    assert loop.run_until_complete(dialog.start_fetch()) is None
    assert "cannot reach" in dialog.status.text()
    assert dialog.fetch_button.isEnabled()  # ready to try again
    dialog.model.setCurrentText("")
    assert not dialog.save_current() and "Pick a model" in dialog.status.text()
    dialog.close()
