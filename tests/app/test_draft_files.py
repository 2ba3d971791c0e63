"""An unsent draft's files and images in the history (issue #52), without Qt, on a real
SQLite file: the store keeps them by session id in the content-addressed texts a sent
message uses (one copy however many hold it, kept while a draft holds it); the Workspace
puts them back after a restart, into another chat when theirs did not come back; a set-
aside write of them replays."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.attachments import Attachment, Part
from app.attachments.stored import to_saved as file_saved
from app.bridge import EngineBridge
from app.history.writer import HistoryWriter
from app.images import read_image
from app.images.stored import to_saved as image_saved
from app.settings import Settings
from app.storage import Store
from app.workspace import Workspace
from tests.ui.test_images_ui import _png

from .conftest import add_chat


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(tmp_path / "settings.json")


def _image(width: int = 40) -> dict:
    return image_saved(read_image(_png(width, 30))) | {"name": f"shot{width}.png"}


def _file(text: str = "some notes") -> dict:
    return file_saved(Attachment("notes.md", "markdown", len(text), (Part(text),)))


def test_the_store_keeps_a_drafts_files_beside_the_messages_texts(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "h.db")
    image, notes = _image(), _file()
    store.save_draft_files("s1", [notes, image])
    assert store.draft_files() == {"s1": [notes | {"skipped": 0}, image]}
    # a sent message with the same image: one text row for both
    chat = add_chat(store, "Sent", ("look",))
    message = next(m for m in store.list_messages(chat.id) if m.role == "user")
    store.save_attachments(message.id, [image])
    assert store.attachment_text_count() == 2
    store.delete_message(message.id)  # the draft still holds the image: it stays
    assert store.draft_files()["s1"][1] == image
    store.save_draft_files("s1", [image])  # the notes' chip removed: their text goes
    assert store.attachment_text_count() == 1
    store.save_draft_files("s1", [])  # sent or closed: nothing left
    assert store.draft_files() == {} and store.attachment_text_count() == 0
    store.close()


def test_a_draft_whose_chat_did_not_come_back_lands_in_another_with_its_files(
        settings: Settings, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    ws = Workspace(EngineBridge(), settings, HistoryWriter.open(db))
    chat = ws.open()
    image = _image()
    ws.set_draft_files(chat, [image])
    ws.set_draft_files(chat, [image])  # the same chips: not written again
    ws.remember()
    settings.save()
    lost = chat.session_id
    ws.close_history()
    store = Store.open(db)  # its chat is gone (as a crash before its row was kept)
    store.delete_session(lost)
    assert list(store.draft_files()) == [lost]
    store.close()

    again = Workspace(EngineBridge(), Settings.load(settings.path), HistoryWriter.open(db))
    restored: list[tuple[str, list[dict]]] = []
    again.draft_files_restored.connect(lambda conv, files: restored.append(
        (conv.session_id, files)))
    assert again.restore() == 0
    again.restore_drafts()
    [conv] = again.conversations  # a new chat holds it, under its own id now
    assert restored == [(conv.session_id, [image])]
    assert again.draft_files[conv.id] == [image]
    again.close_history()
    store = Store.open(db)
    assert store.draft_files() == {conv.session_id: [image]}
    store.close()


def test_a_set_aside_draft_write_replays_at_the_next_start(tmp_path: Path) -> None:
    """A quit with the draft's write still queued keeps it in the set-aside file; the next
    start writes it back (the last one kept is what the draft held)."""
    from app.storage import set_aside
    from app.storage.replay import replay

    store = Store.open(tmp_path / "h.db")
    image, notes = _image(), _file()
    aside = tmp_path / "h.set-aside.jsonl"
    set_aside.keep_all(aside, [("save_draft_files", ("s1", [notes, image])),
                               ("save_draft_files", ("s1", [image]))], "test")
    report = replay(store, aside)
    assert report.changes == 2 and not report.failed
    assert store.draft_files() == {"s1": [image]}
    store.close()
