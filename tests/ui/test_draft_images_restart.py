"""Issue #52: a tab's unsent draft keeps its image and file chips across a restart, not only
its text. The real window on a real SQLite file (history_app: a restart is a new window,
context and HistoryWriter on the same file); the chips come back from the history's
content-addressed store (draft_attachments), a send after the restart sends them, and once
sent (or the tab closed) the draft's rows are gone. An export of a chat leaves its unsent
draft out (docs/app.md says why). The model that sees images is a remote connection to a
scripted loopback server, as in test_images_ui."""

from __future__ import annotations

import json
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.images import to_data_url
from app.storage import Store
from tests.ui.conftest import run_until
from tests.ui.scripted_server import ScriptedServer
from tests.ui.test_images_ui import _on_remote, _paste_image, _png

REPLY = "Noted."
NOTES = "Meeting notes: the red square stays on the left.\n"


@pytest.fixture
def scripted(loop: Any) -> Any:
    server = ScriptedServer([REPLY])
    loop.run_until_complete(server.start())
    yield server
    loop.run_until_complete(server.stop())


def _saved_drafts(db: Any) -> dict[str, list[tuple[str, str]]]:
    """What the SQLite file holds of the drafts' files: (name, kind) by session id."""
    store = Store.open(db, read_only=True)
    try:
        return {sid: [(f["name"], f["kind"]) for f in files]
                for sid, files in store.draft_files().items()}
    finally:
        store.close()


def _settled(loop: Any, tab: Any) -> None:
    run_until(loop, lambda: not tab.image_chips.reading and not tab.chips.reading
              and len(tab.image_chips.chips) + len(tab.chips.chips) >= 1)


def test_a_drafts_images_and_files_come_back_after_a_restart_and_are_sent(
        history_app, loop, qtbot, settings, scripted, tmp_path):
    window = history_app.start()
    tab = _on_remote(window, settings, scripted.url)
    tab.send_text("Hello")  # a chat with a message: its export has something to carry
    run_until(loop, lambda: not tab.conversation.is_busy)
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    qtbot.keyClicks(tab.input, "Compare the picture with my notes")
    _paste_image(qtbot, tab, _png())
    tab.attach_files([str(notes)])
    run_until(loop, lambda: len(tab.chips.chips) == 1 and tab.chips.chips[0].item is not None
              and not tab.chips.reading and tab.image_chips.images())
    [image] = tab.image_chips.images()
    session_id = tab.conversation.session_id
    assert _saved_drafts(history_app.db) == {
        session_id: [("notes.txt", "text"), ("pasted image", "image/png")]}
    notes.unlink()  # the chip's text is in the history now, not read from the disk again
    history_app.stop()

    for _restart in range(2):  # a second restart brings the same back, not twice
        window = history_app.start()  # a restart on the same SQLite file
        tab = window.current_tab()
        assert tab.conversation.session_id == session_id
        assert tab.input.toPlainText() == "Compare the picture with my notes"
        _settled(loop, tab)
        [chip] = tab.image_chips.chips
        assert chip.item == image and chip.name == "pasted image"
        assert chip.label.text() == "120 x 80" and not chip.thumb.icon().isNull()
        [file_chip] = tab.chips.chips
        assert file_chip.item.name == "notes.txt" and file_chip.item.text == NOTES
        assert file_chip.tokens is not None  # counted again, off the UI thread
        assert _saved_drafts(history_app.db) == {
            session_id: [("notes.txt", "text"), ("pasted image", "image/png")]}
        history_app.stop()

    window = history_app.start()
    tab = window.current_tab()
    _settled(loop, tab)
    # an export of the chat carries what was said, never the unsent draft
    view = window.history.show_history()
    assert view.select(session_id)
    exported = tmp_path / "chat.json"
    view.ask_save_path = lambda _name, _filter: str(exported)
    view.export_actions[("session", "json")].trigger()
    doc = json.loads(exported.read_text())
    assert [m["content"] for m in doc["session"]["messages"]] == ["Hello", REPLY]
    assert "attachments" not in doc and "Compare the picture" not in exported.read_text()
    view.close()

    qtbot.keyClick(tab.input, Qt.Key.Key_Return)  # Send: the restored chips go with it
    run_until(loop, lambda: not tab.conversation.is_busy and len(scripted.requests) == 2)
    content = scripted.requests[-1]["messages"][-1]["content"]
    assert content[-1] == {"type": "image_url", "image_url": {"url": to_data_url(image)}}
    assert NOTES.strip() in json.dumps(content)  # the file, framed into the text part
    user = tab.conversation.messages[2]
    assert user.images == (image,) and [a.name for a in user.attachments] == ["notes.txt"]
    assert tab.image_chips.chips == [] and tab.chips.chips == []
    assert _saved_drafts(history_app.db) == {}  # sent: no draft left to bring back
    history_app.stop()

    window = history_app.start()
    tab = window.current_tab()
    assert tab.image_chips.chips == [] and tab.chips.chips == []
    assert tab.conversation.messages[2].images == (image,)  # the message kept them


def test_an_images_only_draft_comes_back_and_a_closed_tabs_draft_goes(
        history_app, loop, qtbot):
    window = history_app.start()
    kept = window.current_tab()
    _paste_image(qtbot, kept, _png(64, 64))  # an image alone, no text: still a draft
    closed = window.new_tab()
    _paste_image(qtbot, closed, _png(30, 20))
    run_until(loop, lambda: kept.image_chips.images() and closed.image_chips.images())
    assert len(_saved_drafts(history_app.db)) == 2
    window.close_tab(window.tabs.indexOf(closed))  # its draft goes with it
    assert list(_saved_drafts(history_app.db)) == [kept.conversation.session_id]
    [image] = kept.image_chips.images()
    history_app.stop()

    window = history_app.start()
    [tab] = window.chat_tabs()
    _settled(loop, tab)
    assert tab.image_chips.images() == [image] and tab.input.toPlainText() == ""
    assert list(_saved_drafts(history_app.db)) == [tab.conversation.session_id]


def test_a_chat_deleted_in_the_sidebar_and_undone_gets_its_draft_images_back(
        history_app, loop, qtbot):
    from tests.ui.test_sidebar import chat, key_on_row, listed

    window = history_app.start()
    conv = chat(window, loop, "keep me please")
    run_until(loop, lambda: conv.session_id in listed(window))
    tab = window.tabs.tab_for(conv)
    _paste_image(qtbot, tab, _png())
    run_until(loop, lambda: tab.image_chips.images())
    [image] = tab.image_chips.images()
    key_on_row(qtbot, window, conv.session_id, Qt.Key.Key_Delete)  # its tab closes
    assert _saved_drafts(history_app.db) == {}
    qtbot.mouseClick(window.sidebar.undo_bar.button, Qt.MouseButton.LeftButton)
    back = window.workspace.find(conv.session_id)
    assert back is not None and window.tabs.tab_for(back).image_chips.images() == [image]
    assert list(_saved_drafts(history_app.db)) == [conv.session_id]
