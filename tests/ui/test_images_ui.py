"""Images in chats in the window (issue #52), offscreen with pytest-qt: a pasted image
becomes a thumbnail chip and, sent, a thumbnail in the message that opens full size; the
request carries it as an image_url part; it survives a restart (the real SQLite file) and
an export/import; the local tiny model reads text only and refuses an image before
sending, the draft and its image kept. The model that sees images here is a remote
connection to a scripted loopback server (a RemoteBackend: the server decides), since no
vision model's weights are available offline."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, Qt, QUrl
from PySide6.QtGui import QGuiApplication, QImage

from app.images import to_data_url
from app.images.refusal import TEXT_ONLY
from app.remote import Connection
from tests.ui.conftest import run_until
from tests.ui.scripted_server import ScriptedServer
from ui.refusals import refusal_sentence

REPLY = "A red square with a green diagonal."


def _png(width: int = 120, height: int = 80) -> bytes:
    img = Image.new("RGB", (width, height), (220, 40, 40))
    for x in range(min(width, height)):
        img.putpixel((x, x), (0, 200, 0))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _paste_image(qtbot: Any, tab: Any, png: bytes) -> None:
    """Ctrl+V with an image on the clipboard (as a screenshot tool leaves it)."""
    mime = QMimeData()
    mime.setImageData(QImage.fromData(png, "PNG"))
    QGuiApplication.clipboard().setMimeData(mime)
    tab.input.setFocus()
    qtbot.keyClick(tab.input, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)


def _read(loop: Any, tab: Any) -> None:
    run_until(loop, lambda: tab.image_chips.chips and not tab.image_chips.reading)


@pytest.fixture
def scripted(loop: Any) -> Any:
    server = ScriptedServer([REPLY])
    loop.run_until_complete(server.start())
    yield server
    loop.run_until_complete(server.stop())


def _on_remote(window: Any, settings: Any, url: str) -> Any:
    settings.set_connections([*settings.connections,
                              Connection(f"{url}/v1", model="scripted", name="vision")])
    tab = window.current_tab()
    index = tab.backend_picker.findData("vision")
    tab.backend_picker.setCurrentIndex(index)
    tab.backend_picker.activated.emit(index)
    assert tab.conversation.backend == "vision"
    return tab


def test_a_text_only_model_refuses_before_sending_and_keeps_the_draft(window, loop, qtbot):
    tab = window.current_tab()
    qtbot.keyClicks(tab.input, "What is in this picture?")
    _paste_image(qtbot, tab, _png())
    _read(loop, tab)
    assert tab.input.toPlainText() == "What is in this picture?"  # the paste typed nothing
    [chip] = tab.image_chips.chips
    assert chip.thumb is not None and not chip.thumb.icon().isNull()
    assert chip.label.text() == "120 x 80"
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    assert tab.notice.isVisible()
    assert TEXT_ONLY in tab.notice.text() and tab.notice.text().startswith("Not sent")
    assert tab.conversation.messages == []  # nothing was added or sent
    assert tab.input.toPlainText() == "What is in this picture?"
    assert [c.item for c in tab.image_chips.chips] == [chip.item]
    chip.remove_button.click()  # without the image it goes
    assert tab.image_chips.images() == []
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert [m.role for m in tab.conversation.messages] == ["user", "assistant"]


def test_bad_images_are_red_chips_with_the_reason(window, loop, qtbot, tmp_path):
    tab = window.current_tab()
    broken = tmp_path / "cut.png"
    broken.write_bytes(_png(300, 300)[:200])
    text = tmp_path / "notes.jpg"
    text.write_text("not a picture at all\n" * 20)
    drop = QMimeData()
    drop.setUrls([QUrl.fromLocalFile(str(broken)), QUrl.fromLocalFile(str(text))])
    tab.input.insertFromMimeData(drop)  # a drop: image files by suffix go to image chips
    run_until(loop, lambda: len(tab.image_chips.chips) == 2 and not tab.image_chips.reading)
    assert tab.chips.chips == []
    reasons = {c.name: c.item.reason for c in tab.image_chips.chips}
    assert "damaged or truncated" in reasons["cut.png"]
    assert "not an image" in reasons["notes.jpg"]
    assert all(c.property("refused") == "true" for c in tab.image_chips.chips)
    assert tab.image_chips.images() == []


def test_a_pasted_image_is_sent_shown_and_kept_across_restart_and_export(
        history_app, loop, qtbot, settings, scripted, tmp_path):
    window = history_app.start()
    tab = _on_remote(window, settings, scripted.url)
    png = _png()
    qtbot.keyClicks(tab.input, "Describe it")
    _paste_image(qtbot, tab, png)
    _read(loop, tab)
    [image] = tab.image_chips.images()
    # the clipboard's image comes back as Qt's PNG: the same pixels
    assert (image.width, image.height) == (120, 80)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.image_chips.chips == [] and tab.input.toPlainText() == ""
    user, reply = tab.conversation.messages
    assert user.images == (image,) and reply.content == REPLY
    # the request: the text part, then the image as a data URL
    [body] = scripted.requests
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "Describe it"},
        {"type": "image_url", "image_url": {"url": to_data_url(image)}}]
    # the message shows its thumbnail; a click opens it full size
    widget = tab.messages.widgets[0]
    [thumb] = widget.images.thumbs
    assert widget.images.isVisible()
    qtbot.mouseClick(thumb, Qt.MouseButton.LeftButton)
    assert thumb.dialog is not None and thumb.dialog.isVisible()
    assert thumb.dialog.picture.pixmap().size().width() == 120
    thumb.dialog.close()
    session_id = tab.conversation.session_id
    history_app.stop()

    window = history_app.start()  # a restart on the same SQLite file
    tab = window.current_tab()
    assert tab.conversation.session_id == session_id
    user = tab.conversation.messages[0]
    assert user.images == (image,) and user.attachments == ()
    assert len(tab.messages.widgets[0].images.thumbs) == 1
    # a follow-up sends the earlier image again (the chat as the model sees it)
    qtbot.keyClicks(tab.input, "And the colour?")
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    first = next(m for m in scripted.requests[-1]["messages"] if m["role"] == "user")
    assert first["content"][1]["image_url"]["url"] == to_data_url(image)

    view = window.history.show_history()
    assert view.select(session_id)
    exported = tmp_path / "chat.json"
    view.ask_save_path = lambda _name, _filter: str(exported)
    view.export_actions[("session", "json")].trigger()
    doc = json.loads(exported.read_text())
    assert [a["kind"] for a in doc["attachments"]] == ["image/png"]
    history_app.stop()

    history_app.db = tmp_path / "other.db"  # import into a fresh database
    window = history_app.start()
    view = window.history.show_history()
    view.ask_open_path = lambda: str(exported)
    view.import_button.click()
    assert view.message.text().startswith("Imported 1 chat"), view.message.text()
    loaded = history_app.history.load_conversation(session_id, window.ctx.bridge)
    assert loaded.messages[0].images == (image,)


def test_n_answers_and_compare_send_the_images_to_every_target(
        window, loop, qtbot, settings, scripted):
    from app.conversation import ReplyTarget

    tab = _on_remote(window, settings, scripted.url)
    tab.set_answers(2)
    qtbot.keyClicks(tab.input, "Two takes")
    _paste_image(qtbot, tab, _png(40, 30))
    _read(loop, tab)
    [image] = tab.image_chips.images()
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert len(scripted.requests) == 2  # one request per answer, each with the image
    for body in scripted.requests:
        assert body["messages"][-1]["content"][1] == {
            "type": "image_url", "image_url": {"url": to_data_url(image)}}
    # Compare: two targets on the connection, and the local text-only model refusing it
    conv = tab.conversation
    targets = [ReplyTarget("vision", {"temperature": 0.0}, "a"),
               ReplyTarget("vision", {"temperature": 1.0}, "b")]
    outcomes = conv.compare("Compare takes", targets, [image])
    run_until(loop, lambda: not conv.is_busy)
    assert len(outcomes) == 2 and len(scripted.requests) == 4
    assert all(b["messages"][-1]["content"][1]["image_url"]["url"] == to_data_url(image)
               for b in scripted.requests[2:])
    assert conv.compare("Again", [*targets, ReplyTarget(None, {})], [image]) == []
    assert len(scripted.requests) == 4  # nothing sent: one target reads text only
    refused = conv.image_refusal([image], [ReplyTarget(None, {})])
    assert refused is not None and TEXT_ONLY in refusal_sentence(refused)


def test_a_chat_with_images_switched_to_a_text_only_model_refuses_before_adding(
        window, loop, qtbot, settings, scripted):
    tab = _on_remote(window, settings, scripted.url)
    qtbot.keyClicks(tab.input, "Look")
    _paste_image(qtbot, tab, _png())
    _read(loop, tab)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    index = tab.backend_picker.findData(None)  # the local engine: the tiny text-only model
    tab.backend_picker.setCurrentIndex(index)
    tab.backend_picker.activated.emit(index)
    assert tab.conversation.backend is None
    qtbot.keyClicks(tab.input, "and now?")
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    assert "this chat has images" in tab.notice.text() and TEXT_ONLY in tab.notice.text()
    assert len(tab.conversation.messages) == 2 and tab.input.toPlainText() == "and now?"
    assert not tab.regenerate()  # the reply to the image cannot be made here either
    assert len(tab.conversation.messages) == 2 and len(scripted.requests) == 1
