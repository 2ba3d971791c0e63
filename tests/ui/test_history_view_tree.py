"""The history view and chat trees: a search hit in a version the chat does not show opens
the chat on that version's path; a hit elsewhere opens it on the path it showed."""

from __future__ import annotations

from app.storage import Message, Session


def saved_tree(store) -> tuple[Session, dict[str, Message]]:
    """q → {a1 (shown), a2 about zebras}; closed, so it is not open at the start."""
    chat = Session(title="Safari notes", is_open=False)
    m = {"q": Message(session_id=chat.id, seq=0, role="user", content="name an animal")}
    m["a1"] = Message(session_id=chat.id, seq=1, role="assistant", content="a giraffe",
                      parent_id=m["q"].id)
    m["a2"] = Message(session_id=chat.id, seq=2, role="assistant", content="a zebra",
                      parent_id=m["q"].id)
    chat.shown_leaf_id = m["a1"].id
    assert store.save_session(chat)
    for msg in m.values():
        assert store.save_message(msg)
    return chat, m


def test_a_hit_in_a_version_not_shown_opens_the_chat_on_it(history_app):
    window = history_app.start()
    chat, m = saved_tree(history_app.store)
    view = window.history.show_history()
    view.search.setText("zebra")
    assert [(e.id, e.message_id) for e in view.entries] == [(chat.id, m["a2"].id)]
    view.open_selected()
    conv = window.current_tab().conversation
    assert conv.session_id == chat.id
    assert [x.content for x in conv.messages] == ["name an animal", "a zebra"]
    assert conv.versions(1) == (2, 2)
    view.search.setText("giraffe")  # the chat is open: its tab goes to that version
    view.open_selected()
    assert window.current_tab().conversation is conv
    assert [x.content for x in conv.messages] == ["name an animal", "a giraffe"]


def test_a_hit_in_the_title_opens_the_path_the_chat_showed(history_app):
    window = history_app.start()
    chat, m = saved_tree(history_app.store)
    view = window.history.show_history()
    view.search.setText("safari")
    assert [(e.id, e.message_id) for e in view.entries] == [(chat.id, None)]
    view.open_selected()
    conv = window.current_tab().conversation
    assert [x.id for x in conv.messages] == [m["q"].id, m["a1"].id]
