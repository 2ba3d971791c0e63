"""Issue #52, "paste, drop or attach images in the input box": the paste is covered by
test_images_ui; here the other two roads, the paperclip's file dialog and a drop of image
files, on the real window (pytest-qt, offscreen). Each image file becomes an image chip
with its thumbnail (not a text file chip), a GIF its first frame and a BMP as PNG, and the
send carries them as image_url parts in the order they were attached, to a scripted
loopback server standing in for a vision model (no VLM weights offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QMimeData, Qt, QUrl
from PySide6.QtWidgets import QFileDialog

from app.images import read_image, to_data_url
from tests.app.image_bytes import animated_gif, encoded
from tests.ui.conftest import run_until
from tests.ui.scripted_server import ScriptedServer
from tests.ui.test_images_ui import REPLY, _on_remote


@pytest.fixture
def scripted(loop: Any) -> Any:
    server = ScriptedServer([REPLY])
    loop.run_until_complete(server.start())
    yield server
    loop.run_until_complete(server.stop())


def _files(tmp_path: Path) -> dict[str, Path]:
    made = {"photo.jpg": encoded("JPEG", 64, 48), "shot.webp": encoded("WEBP", 50, 40),
            "anim.gif": animated_gif(), "scan.bmp": encoded("BMP", 30, 20),
            "chart.png": encoded("PNG", 80, 60)}
    for name, data in made.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "notes.txt").write_text("a text file stays a file chip\n")
    return {name: tmp_path / name for name in [*made, "notes.txt"]}


def test_the_paperclip_and_a_drop_attach_images_as_thumbnails_and_send_them(
        window: Any, loop: Any, qtbot: Any, settings: Any, scripted: Any,
        tmp_path: Path, monkeypatch: Any) -> None:
    tab = _on_remote(window, settings, scripted.url)
    files = _files(tmp_path)
    qtbot.keyClicks(tab.input, "What are these?")
    # the paperclip: its file dialog (stood in for) picks three images and a text file
    picked = [str(files[n]) for n in ("photo.jpg", "notes.txt", "shot.webp", "anim.gif")]
    monkeypatch.setattr(QFileDialog, "getOpenFileNames",
                        staticmethod(lambda *a, **k: (picked, "")))
    qtbot.mouseClick(tab.attach_button, Qt.MouseButton.LeftButton)
    # a drop of two more image files (file URLs, as a file manager drops them)
    drop = QMimeData()
    drop.setUrls([QUrl.fromLocalFile(str(files["scan.bmp"])),
                  QUrl.fromLocalFile(str(files["chart.png"]))])
    tab.input.insertFromMimeData(drop)
    run_until(loop, lambda: len(tab.image_chips.chips) == 5 and not tab.image_chips.reading
              and not tab.chips.reading)
    assert tab.input.toPlainText() == "What are these?"  # nothing was typed by either
    assert [c.path.name for c in tab.chips.chips] == ["notes.txt"]  # text stays a file
    chips = tab.image_chips.chips
    assert [c.name for c in chips] == ["photo.jpg", "shot.webp", "anim.gif", "scan.bmp",
                                       "chart.png"]
    for chip in chips:
        assert chip.property("refused") != "true", chip.label.text()
        assert chip.thumb is not None and not chip.thumb.icon().isNull()
    assert [c.label.text() for c in chips] == ["64 x 48", "50 x 40", "20 x 10", "30 x 20",
                                               "80 x 60"]
    images = tab.image_chips.images()
    assert [i.mime for i in images] == ["image/jpeg", "image/webp", "image/png", "image/png",
                                        "image/png"]  # a GIF's first frame, a BMP: PNG
    assert images[0] == read_image(files["photo.jpg"].read_bytes())  # kept as given

    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.image_chips.chips == [] and tab.chips.chips == []
    [body] = scripted.requests
    parts = body["messages"][-1]["content"]
    image_urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert image_urls == [to_data_url(i) for i in images]  # every image, in order
    user = tab.conversation.messages[0]
    assert user.images == tuple(images) and [a.name for a in user.attachments] == ["notes.txt"]
    assert len(tab.messages.widgets[0].images.thumbs) == 5  # the message's thumbnails
