"""Export and import keep a chat's tree (format version 2): versions at several levels, the
path shown and the pin survive a round trip; an export from before trees (a real file
written by that version) imports as one path; parents that make no tree are dropped with
a note, never a crash nor half a chat; Markdown shows the path shown and notes versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.history.export import (
    FORMAT_VERSION,
    export_all,
    export_all_json,
    session_to_json,
    session_to_markdown,
)
from app.history.import_json import import_document
from app.history.paths import shown_messages
from app.storage import Message, Session, Store

from .conftest import add_chat

DATA = Path(__file__).parent / "data"
V1_EXPORT = DATA / "export-v1-before-trees.json"  # written by the code at c68b04b


@pytest.fixture
def other(tmp_path: Path):
    s = Store.open(tmp_path / "other.db")
    yield s
    s.close()


def tree_chat(store: Store) -> tuple[Session, dict[str, Message]]:
    """q1 → {a1, a1b}; a1b → {q2, q2b (edited)}; q2 → a2; q2b → {a3, a3b}. Shown: the
    older q2's path (not the newest message's), and pinned."""
    session = Session(title="tree", system_prompt="Be brief.")
    store.save_session(session)
    m: dict[str, Message] = {}

    def add(name: str, role: str, parent: str | None) -> None:
        m[name] = Message(session_id=session.id, seq=len(m), role=role,  # type: ignore[arg-type]
                          content=f"{name} text", parent_id=m[parent].id if parent else None)
        store.save_message(m[name])

    add("q1", "user", None)
    add("a1", "assistant", "q1")
    add("a1b", "assistant", "q1")
    add("q2", "user", "a1b")
    add("q2b", "user", "a1b")
    add("a2", "assistant", "q2")
    add("a3", "assistant", "q2b")
    add("a3b", "assistant", "q2b")
    session.shown_leaf_id = m["a2"].id
    store.save_session(session)
    store.set_pinned(session.id, True)
    return session, m


def tree_rows(store: Store, session_id: str) -> tuple:
    loaded = store.load_session(session_id)
    s = loaded.session
    return (s.id, s.shown_leaf_id, s.pinned,
            [(x.id, x.parent_id, x.seq, x.role, x.content) for x in loaded.messages])


def test_a_tree_round_trips_into_a_fresh_database_identically(store: Store,
                                                              other: Store) -> None:
    session, m = tree_chat(store)
    add_chat(store, "plain", ("hi", "hello"))
    text = export_all_json(store)
    doc = json.loads(text)
    assert doc["format_version"] == FORMAT_VERSION
    exported = next(s for s in doc["sessions"] if s["id"] == session.id)
    assert exported["shown_leaf_id"] == m["a2"].id and exported["pinned"] is True
    assert {x["id"]: x["parent_id"] for x in exported["messages"]}[m["a3b"].id] == m["q2b"].id

    report = import_document(other, doc)
    assert report.notes == [] and report.added["messages"] == 10
    assert tree_rows(other, session.id) == tree_rows(store, session.id)
    assert export_all_json(other) == text
    # the chat opens on the path that was shown: q1, a1b (newest of its versions), q2, a2
    assert [x.id for x in shown_messages(other.load_session(session.id))] == [
        m["q1"].id, m["a1b"].id, m["q2"].id, m["a2"].id]


def test_a_single_chat_export_round_trips_its_tree(store: Store, other: Store) -> None:
    session, _ = tree_chat(store)
    import_document(other, json.loads(session_to_json(store.load_session(session.id))))
    assert tree_rows(other, session.id) == tree_rows(store, session.id)


def test_an_export_from_before_trees_imports_each_chat_as_one_path(other: Store) -> None:
    doc = json.loads(V1_EXPORT.read_text(encoding="utf-8"))
    assert doc["format_version"] == 1  # the real file, as that version wrote it
    assert "parent_id" not in doc["sessions"][0]["messages"][0]
    report = import_document(other, doc)
    assert report.added == {"sessions": 2, "messages": 6, "request_stats": 1}
    assert report.notes == []
    loaded = other.load_session("11111111-1111-4111-8111-111111111111")
    ids = [x.id for x in loaded.messages]
    assert [x.parent_id for x in loaded.messages] == [None, *ids[:-1]]
    assert [x.seq for x in loaded.messages] == [0, 1, 2, 3]
    assert loaded.session.shown_leaf_id is None and loaded.session.pinned is False
    assert [x.content for x in shown_messages(loaded)] == [
        "What is 2+2?", "4.", "And 3+3?", "6."]
    assert loaded.messages[3].token_ids == [19, 30]
    # exported again, it is a version 2 file with the parents
    again = export_all(other)
    assert again["format_version"] == FORMAT_VERSION
    assert [x["parent_id"] for x in again["sessions"][0]["messages"]] == [None, *ids[:-1]]


def test_an_old_chat_whose_seqs_repeat_links_as_the_migration_does(other: Store) -> None:
    """Two messages of one seq (another program) are siblings below the one before."""
    doc = json.loads(V1_EXPORT.read_text(encoding="utf-8"))
    msgs = doc["sessions"][0]["messages"]
    msgs[2]["seq"] = 1
    import_document(other, doc)
    loaded = other.load_session(doc["sessions"][0]["id"])
    parents = {x.id: x.parent_id for x in loaded.messages}
    assert parents[msgs[1]["id"]] == parents[msgs[2]["id"]] == msgs[0]["id"]
    assert parents[msgs[3]["id"]] == msgs[2]["id"]


def _bad_parent(doc: dict, m: dict[str, Message], case: str) -> str:
    """Make one message's parent inconsistent; the id of the message that loses it."""
    msgs = {x["id"]: x for x in doc["sessions"][0]["messages"]}
    q1, a1 = msgs[m["q1"].id], msgs[m["a1"].id]
    if case == "missing":
        a1["parent_id"] = "no-such-message"
    elif case == "itself":
        a1["parent_id"] = a1["id"]
    elif case == "loop":  # q1 ↔ a1: q1 is the older, its parent goes
        q1["parent_id"] = a1["id"]
        return q1["id"]
    elif case == "later":  # a parent made after it
        a1["parent_id"] = m["a3b"].id
    elif case == "other chat":
        a1["parent_id"] = doc["sessions"][1]["messages"][0]["id"]
    return a1["id"]


@pytest.mark.parametrize("case", ["missing", "itself", "loop", "later", "other chat"])
def test_a_parent_that_makes_no_tree_is_dropped_with_a_note(store: Store, other: Store,
                                                            case: str) -> None:
    session, m = tree_chat(store)
    add_chat(store, "plain", ("hi", "hello"))
    doc = export_all(store)
    doc["sessions"].sort(key=lambda s: s["id"] != session.id)
    lost = _bad_parent(doc, m, case)
    report = import_document(other, doc)
    assert report.added["messages"] == 10  # the whole chat, and the other one
    assert report.notes == ["In “tree”, 1 message named a parent that is not an earlier "
                            "message of that chat; it starts the chat instead."]
    assert report.notes[0] in report.summary()
    loaded = other.load_session(session.id)
    parents = {x.id: x.parent_id for x in loaded.messages}
    assert parents[lost] is None
    assert all(parents[x.id] == x.parent_id for x in m.values() if x.id != lost)
    assert shown_messages(loaded)  # it opens


def test_a_shown_message_not_in_the_chat_shows_the_newest_with_a_note(store: Store,
                                                                     other: Store) -> None:
    session, m = tree_chat(store)
    doc = export_all(store)
    doc["sessions"][0]["shown_leaf_id"] = "gone"
    report = import_document(other, doc)
    assert report.notes == ["In “tree”, the message to show is not in the chat; its newest "
                            "messages are shown."]
    loaded = other.load_session(session.id)
    assert loaded.session.shown_leaf_id is None
    assert shown_messages(loaded)[-1].id == m["a3b"].id


def test_a_message_whose_parent_was_skipped_starts_the_chat(store: Store,
                                                            other: Store) -> None:
    """A message id already in the history (another chat) is skipped; the message that
    followed it in the file does not link into the other chat."""
    session, m = tree_chat(store)
    doc = export_all(store)
    clash = Message(session_id=add_chat(other, "there", ()).id, seq=0, role="user",
                    content="mine", id=m["q2"].id)
    other.save_message(clash)
    report = import_document(other, doc)
    assert report.skipped == {"messages": 1} and len(report.notes) == 1
    parents = {x.id: x.parent_id for x in other.load_session(session.id).messages}
    assert parents[m["a2"].id] is None and parents[m["q2b"].id] == m["a1b"].id


def test_markdown_exports_the_shown_path_and_notes_versions(store: Store) -> None:
    session, _ = tree_chat(store)
    md = session_to_markdown(store.load_session(session.id))
    assert "q1 text" in md and "a1b text" in md and "q2 text" in md and "a2 text" in md
    for hidden in ("a1 text", "q2b text", "a3 text"):
        assert f"\n{hidden}\n" not in md
    # a1b is version 2 of 2; q2 version 1 of 2; q1 and a2 have none
    notes = [line for line in md.splitlines() if line.startswith("*Version")]
    assert notes == ["*Version 2 of 2 — the other versions are in the JSON export*",
                     "*Version 1 of 2 — the other versions are in the JSON export*"]
    assert md.index("a1b text") < md.index(notes[0]) < md.index("q2 text") \
        < md.rindex("Version 1 of 2") < md.index("a2 text")


def test_markdown_of_a_chat_from_before_trees_is_every_message(other: Store) -> None:
    import_document(other, json.loads(V1_EXPORT.read_text(encoding="utf-8")))
    md = session_to_markdown(other.load_session("11111111-1111-4111-8111-111111111111"))
    assert [line for line in md.splitlines() if line.startswith("## ")] == [
        "## System prompt", "## User", "## Assistant", "## User", "## Assistant"]
    assert "Version" not in md
