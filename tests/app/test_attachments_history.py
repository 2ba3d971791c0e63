"""Attachments in the history (issue #51, slice 3) on real SQLite files: a migration that
leaves an old database's rows as they were, texts content-addressed and shared, the size
cap, deleting a chat deletes only the texts no other chat uses, export and import carry
them; and through a tab's Conversation on the tiny model: the file is in the prompt, a
restart brings it back, and a follow-up on it reads the document from the prefix cache."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from sqlite_utils import Database

from app.attachments import Attachment, Refused, read_attachment, user_content
from app.attachments.stored import from_saved, to_saved
from app.bridge import EngineBridge
from app.conversation import ChatMessage, Conversation
from app.history.export import export_all, session_to_json
from app.history.import_json import import_document
from app.history.writer import HistoryWriter
from app.storage import Message, Store
from app.storage import attachments as stored_texts
from app.storage.migrations import migrations
from tests.app.attachment_files import make_pdf

from .conftest import add_chat
from .history_sync_helpers import FAST, start_bridge, tiny, wait_until


def _pdf(tmp_path: Path, name: str = "report.pdf") -> Attachment:
    att = read_attachment(make_pdf(tmp_path / name, ["Revenue grew 12 percent.", "Page two."]))
    assert isinstance(att, Attachment)
    return att


def _first_user(store: Store, session_id: str) -> Message:
    return [m for m in store.list_messages(session_id) if m.role == "user"][0]


def test_a_database_from_before_gains_the_tables_unchanged(tmp_path: Path) -> None:
    db_file = tmp_path / "history.db"
    old = Database(db_file)
    migrations.apply(old, stop_before="m009_message_attachments")
    old["sessions"].insert({"id": "s", "title": "before", "system_prompt": "",
                            "params": "{}", "position": 0, "is_open": 1,
                            "created_at": "2026-01-01", "updated_at": "2026-01-01"})
    old["messages"].insert({"id": "m", "session_id": "s", "seq": 0, "role": "user",
                            "content": "hi", "is_complete": 1, "parent_id": None,
                            "created_at": "2026-01-01", "updated_at": "2026-01-01"})
    before = sqlite3.connect(db_file).execute("SELECT * FROM messages").fetchall()
    old.close()
    store = Store.open(db_file)
    try:
        assert sqlite3.connect(db_file).execute("SELECT * FROM messages").fetchall() == before
        loaded = store.load_session("s")
        assert loaded.attachments == {}
        assert store.attachment_text_count() == 0
    finally:
        store.close()


def test_texts_are_shared_and_deleted_with_the_last_chat_using_them(store: Store,
                                                                    tmp_path: Path) -> None:
    att = _pdf(tmp_path)
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n")
    other = read_attachment(notes)
    assert isinstance(other, Attachment)
    one, two = add_chat(store, "One", ("q1",)), add_chat(store, "Two", ("q2",))
    m1, m2 = _first_user(store, one.id), _first_user(store, two.id)
    store.save_attachments(m1.id, [to_saved(att), to_saved(other)])
    store.save_attachments(m2.id, [to_saved(att)])
    assert store.attachment_text_count() == 2  # the PDF's text once
    loaded = store.load_session(one.id)
    back = [from_saved(f) for f in loaded.attachments[m1.id]]
    assert back == [att, other]  # name, kind, size, pages and text as read
    store.delete_session(one.id)
    assert store.attachment_text_count() == 1  # the notes went; the PDF stays for Two
    assert from_saved(store.load_session(two.id).attachments[m2.id][0]) == att
    store.delete_session(two.id)
    assert store.attachment_text_count() == 0
    assert store.db.execute("SELECT COUNT(*) FROM message_attachments").fetchone()[0] == 0


def test_a_text_over_the_cap_is_not_kept(store: Store, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stored_texts, "MAX_KEPT_BYTES", 10)
    att = _pdf(tmp_path)
    chat = add_chat(store, "Big", ("q",))
    m = _first_user(store, chat.id)
    store.save_attachments(m.id, [to_saved(att)])
    assert store.attachment_text_count() == 0
    [saved] = store.load_session(chat.id).attachments[m.id]
    assert (saved["name"], saved["size"], saved["parts"]) == ("report.pdf", att.size, None)
    got = from_saved(saved)
    assert isinstance(got, Refused) and "not kept" in got.message


def test_export_and_import_carry_them(store: Store, tmp_path: Path) -> None:
    att = _pdf(tmp_path)
    one, two = add_chat(store, "One", ("q1",)), add_chat(store, "Two", ("q2",))
    m1, m2 = _first_user(store, one.id), _first_user(store, two.id)
    store.save_attachments(m1.id, [to_saved(att)])
    store.save_attachments(m2.id, [to_saved(att)])
    doc = json.loads(json.dumps(export_all(store)))
    assert [a["message_id"] for a in doc["attachments"]] == [m1.id, m2.id]
    assert len(doc["attachment_texts"]) == 1  # the same text once in the file
    assert doc["format_version"] == 3  # top-level keys an older BatchChat ignores

    other = Store.open(tmp_path / "other.db")
    try:
        report = import_document(other, doc)
        assert report.added["message_attachments"] == 2
        assert from_saved(other.load_session(one.id).attachments[m1.id][0]) == att
        assert other.attachment_text_count() == 1
        again = import_document(other, doc)  # nothing new: nothing doubled
        assert "message_attachments" not in again.added
    finally:
        other.close()

    single = json.loads(session_to_json(store.load_session(two.id)))
    third = Store.open(tmp_path / "third.db")
    try:
        import_document(third, single)
        assert from_saved(third.load_session(two.id).attachments[m2.id][0]) == att
    finally:
        third.close()


def test_an_import_with_a_bad_file_adds_nothing(store: Store) -> None:
    doc = {"format": "batchchat-export", "format_version": 3, "sessions": [],
           "attachments": [{"message_id": "m", "name": 3}]}
    with pytest.raises(ValueError, match=r"attachments\[0\]: field name"):
        import_document(store, doc)


@pytest.fixture
async def bridge():
    b = await start_bridge(context_length=2048)
    yield b
    await b.shutdown(timeout=2.0)


async def test_a_tab_sends_the_file_keeps_it_and_a_follow_up_is_cached(
        bridge: EngineBridge, tmp_path: Path) -> None:
    att = _pdf(tmp_path)
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db)
    conv = Conversation(bridge, system_prompt="", params=FAST)
    sync.attach(conv, 0)
    assert conv.send("What grew?", attachments=[att])
    await wait_until(lambda: not conv.is_busy)
    tok = tiny(2048).tokenizer
    expected = tok.apply_chat_template(
        [{"role": "user", "content": user_content("What grew?", [att])}],
        add_generation_prompt=True)
    first = conv.messages[-1].stats
    assert first.prompt_tokens == len(expected)  # the PDF's text went in, counted
    sync.detach(conv)
    assert sync.close()

    again = HistoryWriter.open(db)  # as after a restart
    restored = again.load_conversation(conv.session_id, bridge)
    again.attach(restored, 0)
    assert restored.messages[0].attachments == (att,)
    assert restored.messages[0].content == "What grew?"
    assert restored.send("And page two?")
    await wait_until(lambda: not restored.is_busy)
    follow = restored.messages[-1].stats
    # the document and the first turn come from the prefix cache (the tab's stats line)
    assert follow.cached_tokens >= first.prompt_tokens
    assert follow.cached_tokens < follow.prompt_tokens
    again.detach(restored)
    assert again.close()


def test_an_edit_keeps_the_files_and_the_next_prompt_carries_them(tmp_path: Path) -> None:
    att = _pdf(tmp_path)
    conv = Conversation(None, messages=[ChatMessage("user", "q", attachments=(att,)),  # type: ignore[arg-type]
                                        ChatMessage("assistant", "a")])
    prompt = conv.next_prompt("next")
    assert prompt[0]["attachments"] == (att,) and "attachments" not in prompt[-1]
    edited = conv.next_prompt("q, edited", editing=0)
    assert edited == [{"role": "user", "content": "q, edited", "attachments": (att,)}]


def test_set_aside_files_are_written_back_once(store: Store, tmp_path: Path) -> None:
    """A quit with the files' write still queued keeps it in the set-aside file; the next
    start writes it back, once, and only for a message that is there."""
    from app.storage import set_aside
    from app.storage.replay import replay

    att = _pdf(tmp_path)
    chat = add_chat(store, "Kept", ("q",))
    m = _first_user(store, chat.id)
    aside = tmp_path / "h.set-aside.jsonl"
    set_aside.keep_all(aside, [("save_attachments", (m.id, [to_saved(att)])),
                               ("save_attachments", (m.id, [to_saved(att)])),
                               ("save_attachments", ("gone", [to_saved(att)]))], "test")
    report = replay(store, aside)
    assert report.changes == 1
    assert [from_saved(f) for f in store.load_session(chat.id).attachments[m.id]] == [att]
