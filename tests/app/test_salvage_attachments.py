"""The damaged-database recovery and "Save to another file" carry a message's attached files
(#51: attachment_texts, message_attachments) and the API server's stored responses (#53:
api_responses) as they carry chats: they used to be left behind (salvage.TABLES named the
older tables only). Real SQLite files, one page of the messages table overwritten."""

from __future__ import annotations

from pathlib import Path

from app.storage import SafeStore, Store

from .damaged_page import damage_page_holding, fill_history

FILE = {"name": "notes.md", "kind": "text", "size": 25, "skipped": 0, "hash": "h-notes",
        "parts": [{"text": "The harbour opens at six.", "page": None, "source": None}]}
ITEMS = [{"type": "message", "role": "user", "content": "Remember 42."}]
RESPONSE = {"id": "resp_1", "object": "response", "output": []}


def with_files_and_a_response(path: Path) -> str:
    """A filled history, its message MSG-0001- carrying a file, and a stored response;
    the message's id."""
    fill_history(path)
    store = Store.open(path)
    try:
        [message] = [m for s in store.list_sessions() for m in store.list_messages(s.id)
                     if m.content.startswith("MSG-0001-")]
        store.save_attachments(message.id, [FILE])
        store.put_api_response("resp_1", ITEMS, RESPONSE)
    finally:
        store.close()
    return message.id


def test_a_damaged_file_keeps_its_attachments_and_stored_responses(db_file: Path) -> None:
    db_file.parent.mkdir(parents=True)
    message_id = with_files_and_a_response(db_file)
    lost = damage_page_holding(db_file, b"MSG-0057-")
    assert "MSG-0001-" not in lost
    store = Store.open(db_file)
    try:
        assert "damaged" in (store.notice or "")
        assert "1 attached file texts, 1 attached files" in store.notice
        assert "1 stored API responses" in store.notice
        assert store.message_attachments([message_id]) == {message_id: [FILE]}
        assert store.get_api_response("resp_1") == (ITEMS, RESPONSE)
    finally:
        store.close()


def test_save_to_another_file_takes_them_along(db_file: Path, tmp_path: Path) -> None:
    db_file.parent.mkdir(parents=True)
    message_id = with_files_and_a_response(db_file)
    safe = SafeStore.open(db_file)
    elsewhere = tmp_path / "elsewhere" / "history.db"
    elsewhere.parent.mkdir()
    assert safe.move_to(elsewhere) is True
    safe.close()
    moved = Store.open(elsewhere)
    try:
        assert moved.message_attachments([message_id]) == {message_id: [FILE]}
        assert moved.get_api_response("resp_1") == (ITEMS, RESPONSE)
    finally:
        moved.close()
