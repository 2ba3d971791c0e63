"""Images in the history (issue #52) on real SQLite files: kept in the attached files'
tables, content-addressed (one row per distinct image, however many chats use it),
deleted with the last chat using them, beside a message's files without mixing with them;
a row whose bytes are not those its hash names is dropped on load; export and import
carry them, and an export from before (no images) still imports."""

from __future__ import annotations

import json
from pathlib import Path

from app.attachments import Attachment, read_attachment, user_content
from app.attachments.messages import whole_messages
from app.attachments.stored import to_saved
from app.history import convert
from app.history.export import export_all, session_to_json
from app.history.import_json import import_document
from app.images import read_image
from app.images.stored import from_saved, is_saved_image
from app.images.stored import to_saved as image_saved
from app.storage import Message, Store

from .conftest import add_chat
from .image_bytes import encoded, png


def _first_user(store: Store, session_id: str) -> Message:
    return [m for m in store.list_messages(session_id) if m.role == "user"][0]


def test_images_are_shared_and_deleted_with_the_last_chat_using_them(store: Store) -> None:
    red, jpeg = read_image(png()), read_image(encoded("JPEG"))
    one, two = add_chat(store, "One", ("q1",)), add_chat(store, "Two", ("q2",))
    m1, m2 = _first_user(store, one.id), _first_user(store, two.id)
    store.save_attachments(m1.id, [image_saved(red), image_saved(jpeg)])
    store.save_attachments(m2.id, [image_saved(red)])
    assert store.attachment_text_count() == 2  # the shared image once
    saved = store.load_session(one.id).attachments[m1.id]
    assert all(map(is_saved_image, saved))
    assert [from_saved(s) for s in saved] == [red, jpeg]  # bytes, size, type as read
    store.delete_session(one.id)
    assert store.attachment_text_count() == 1  # the JPEG went; the PNG stays for Two
    assert from_saved(store.load_session(two.id).attachments[m2.id][0]) == red
    store.delete_session(two.id)
    assert store.attachment_text_count() == 0


def test_files_and_images_of_one_message_come_back_apart(store: Store, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\nShip on Friday.\n")
    att = read_attachment(notes)
    assert isinstance(att, Attachment)
    image = read_image(png())
    chat = add_chat(store, "Both", ("look",))
    m = _first_user(store, chat.id)
    store.save_attachments(m.id, [to_saved(att), image_saved(image)])
    # the chat as a tab opens it (a Conversation needs no engine until it sends)
    conv = convert.conversation(store.load_session(chat.id), bridge=None)  # type: ignore[arg-type]
    user = next(x for x in conv.tree.nodes.values() if x.id == m.id)
    assert user.attachments == (att,) and user.images == (image,)
    [prompt] = [p for p in conv.prompt_messages(user) if p["role"] == "user"]
    # the file framed into the text part (#51), the image after it
    assert prompt["content"][1]["type"] == "image_url"
    assert prompt["attachments"] == (att,)
    [sent] = whole_messages([prompt])  # what a remote server is sent
    assert sent["content"] == [{"type": "text", "text": user_content("look", [att])},
                               prompt["content"][1]]


def test_a_row_whose_bytes_do_not_match_its_hash_is_dropped() -> None:
    saved = image_saved(read_image(png()))
    saved["hash"] = "0" * 64
    assert from_saved(saved) is None


def test_export_and_import_carry_them(store: Store, tmp_path: Path) -> None:
    image = read_image(encoded("WEBP"))
    chat = add_chat(store, "Pic", ("what is it?", "a square"))
    m = _first_user(store, chat.id)
    store.save_attachments(m.id, [image_saved(image)])
    doc = json.loads(session_to_json(store.load_session(chat.id)))
    [ref] = doc["attachments"]
    assert (ref["kind"], ref["hash"]) == ("image/webp", image.digest)
    other = Store.open(tmp_path / "other.db")
    try:
        import_document(other, doc)
        [back] = other.load_session(chat.id).attachments[m.id]
        assert from_saved(back) == image
        # an export from before images (and files) imports as it did
        plain = export_all(store)
        plain.pop("attachments", None)
        plain.pop("attachment_texts", None)
        third = Store.open(tmp_path / "third.db")
        try:
            import_document(third, plain)
            assert third.load_session(chat.id).attachments == {}
        finally:
            third.close()
    finally:
        other.close()
