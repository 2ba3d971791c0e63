"""Issue #49 (E, storage): a reasoning model's reply keeps its thinking beside the answer
in the history. A database from before (schema m007) gains the column (m008), its rows
read back with none and every old column unchanged; a reply saved now keeps it; the JSON
export carries it and imports it back; Markdown shows it as a folded details block above
the answer; an import with thinking that is not text is refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from sqlite_utils import Database

from app.history.export import FORMAT_VERSION, session_to_json, session_to_markdown
from app.history.import_json import import_document
from app.storage import Message, Store
from app.storage.migrations import migrations

from .conftest import add_chat

THOUGHT = "The user greets me.\n\n```text\nhi -> hello\n```\nSo: a greeting back."


def test_a_database_from_before_reasoning_gains_its_column(tmp_path: Path) -> None:
    db_file = tmp_path / "history.db"
    old = Database(db_file)
    migrations.apply(old, stop_before="m008_message_reasoning")
    assert "reasoning" not in old["messages"].columns_dict
    old["sessions"].insert({"id": "s", "title": "before", "system_prompt": "",
                            "params": "{}", "position": 0, "is_open": 1,
                            "created_at": "2026-01-01", "updated_at": "2026-01-01"})
    old["messages"].insert({"id": "m", "session_id": "s", "seq": 0, "role": "assistant",
                            "content": "a reply", "is_complete": 1, "parent_id": None,
                            "created_at": "2026-01-01", "updated_at": "2026-01-01"})
    before = sqlite3.connect(db_file).execute("SELECT * FROM messages").fetchall()
    old.close()

    store = Store.open(db_file)
    try:
        assert store.db["messages"].columns_dict["reasoning"] is str
        [message] = store.list_messages("s")
        assert (message.content, message.reasoning) == ("a reply", None)
        columns = len(before[0])
        after = sqlite3.connect(db_file).execute("SELECT * FROM messages").fetchall()
        assert [row[:columns] for row in after] == before  # old columns unchanged
        message.reasoning = THOUGHT
        store.save_message(message)
        [back] = store.list_messages("s")
        assert (back.content, back.reasoning) == ("a reply", THOUGHT)
    finally:
        store.close()


def chat_with_thinking(store: Store):
    session = add_chat(store, "Greeting", ("hi",))
    store.save_message(Message(session_id=session.id, seq=1, role="assistant",
                               content="Hello!", reasoning=THOUGHT,
                               stats={"generated_tokens": 30, "finish_reason": "stop"}))
    return store.load_session(session.id)


def test_markdown_shows_the_thinking_folded_above_the_answer(store: Store) -> None:
    md = session_to_markdown(chat_with_thinking(store))
    block = md.index("<details>")
    assert md.index("## Assistant") < block < md.index(THOUGHT) < md.index("</details>") \
        < md.index("Hello!")
    assert "<summary>Thinking</summary>" in md
    assert md.count("<details>") == 1  # the user's message has none
    assert md.count("```") % 2 == 0


def test_the_json_export_carries_it_and_imports_it_back(store: Store, tmp_path: Path) -> None:
    doc = json.loads(session_to_json(chat_with_thinking(store)))
    assert doc["format_version"] == FORMAT_VERSION == 3
    reply = [m for m in doc["session"]["messages"] if m["role"] == "assistant"][0]
    assert (reply["content"], reply["reasoning"]) == ("Hello!", THOUGHT)
    other = Store.open(tmp_path / "other.db")
    try:
        import_document(other, doc)
        [session] = other.list_sessions()
        replies = [m for m in other.list_messages(session.id) if m.role == "assistant"]
        assert [(m.content, m.reasoning) for m in replies] == [("Hello!", THOUGHT)]
    finally:
        other.close()


def test_an_import_whose_thinking_is_not_text_is_refused(store: Store, tmp_path: Path) -> None:
    doc = json.loads(session_to_json(chat_with_thinking(store)))
    reply = [m for m in doc["session"]["messages"] if m["role"] == "assistant"][0]
    reply["reasoning"] = {"not": "text"}
    other = Store.open(tmp_path / "other.db")
    try:
        with pytest.raises(ValueError, match="reasoning"):
            import_document(other, doc)
    finally:
        other.close()
