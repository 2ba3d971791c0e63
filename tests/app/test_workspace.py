"""The Workspace without Qt: open chats in order, the front one, closing and reopening, the
history kept in step (a real SQLite file), and drafts across a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bridge import EngineBridge
from app.history.writer import HistoryWriter
from app.settings import Settings
from app.storage import Store
from app.workspace import CLOSED_KEPT, Workspace

from .history_sync_helpers import FAST, read_back, start_bridge, wait_until


class Recorder:
    """Every event a workspace emits, in order, as (name, args)."""

    def __init__(self, ws: Workspace) -> None:
        self.seen: list[tuple[str, tuple[object, ...]]] = []
        for name in ("opened", "closed", "moved", "front_changed", "reopenable_changed"):
            getattr(ws, name).connect(lambda *a, n=name: self.seen.append((n, a)))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(tmp_path / "settings.json")


def test_open_move_front_and_close_as_events(settings):
    ws = Workspace(EngineBridge(), settings)
    rec = Recorder(ws)
    a, b, c = (ws.open() for _ in range(3))
    assert ws.conversations == [a, b, c] and ws.front is c
    assert rec.seen[:2] == [("opened", (a, 0)), ("front_changed", (a,))]
    assert a.params == settings.new_tab_params() and a.preset == "Balanced"
    rec.seen.clear()
    ws.move(c, 0)
    ws.move(c, 0)  # already there: nothing happens
    ws.set_front(a)
    assert ws.conversations == [c, a, b]
    assert rec.seen == [("moved", (c, 0)), ("front_changed", (a,))]
    ws.rename(b, "  Named  ")
    ws.rename(c, "   ")  # blank: keeps its title
    assert ws.titles() == {a.tag: a.title, b.tag: "Named", c.tag: c.title}
    rec.seen.clear()
    ws.close(a)  # empty: not worth reopening
    assert ws.conversations == [c, b] and ws.front is None and not ws.closed_stack
    assert rec.seen == [("closed", (a, 1))]
    ws.close(b)
    ws.close(c)  # the last one is replaced by a new chat
    assert len(ws.conversations) == 1 and ws.front is ws.conversations[0]
    ws.closing = True  # quitting: the last one is not replaced
    ws.close(ws.conversations[0])
    assert ws.conversations == []


async def test_reopen_without_a_history_brings_the_chat_back_stopped():
    bridge = await start_bridge()
    try:
        ws = Workspace(bridge, Settings())
        conv = ws.open()
        conv.update_settings("", {**FAST, "max_tokens": 4000})
        assert conv.send("a reply cut off by closing")
        await wait_until(lambda: len(conv.messages[1].content) > 0)
        other = ws.open()
        seen: list[bool] = []
        ws.reopenable_changed.connect(seen.append)
        ws.close(conv)
        assert seen == [True] and ws.closed_stack == [conv]
        reply = conv.messages[1]
        assert not reply.streaming and reply.finish_reason == "cancelled"
        back = ws.reopen()
        assert back is not conv and back.session_id == conv.session_id  # a fresh object
        assert back.messages == conv.messages and ws.front is back
        # where its tab was (the first), not after the one opened meanwhile
        assert ws.conversations == [back, other] and seen == [True, False]
        assert ws.reopen() is None
    finally:
        await bridge.shutdown(timeout=2.0)


def test_only_the_most_recent_closed_chats_are_kept(settings):
    ws = Workspace(EngineBridge(), settings)
    convs = [ws.open() for _ in range(CLOSED_KEPT + 3)]
    for conv in convs:
        conv.messages.append(_user_message())
        ws.close(conv)
    assert ws.closed_stack == convs[-CLOSED_KEPT:]


def _user_message():
    from app.conversation import ChatMessage

    return ChatMessage("user", "hi")


async def test_the_history_follows_the_workspace(tmp_path, settings):
    """Order, reopening from the store, deleting, and the next start's tabs in order."""
    db = tmp_path / "history.db"
    bridge = await start_bridge()
    try:
        history = HistoryWriter.open(db)
        ws = Workspace(bridge, settings, history)
        chats = [ws.open() for _ in range(3)]
        for i, conv in enumerate(chats):
            conv.update_settings("", FAST)
            assert conv.send(f"chat {i}")
        await wait_until(lambda: not any(c.is_busy for c in chats))
        ws.move(chats[2], 0)
        history.flush()
        assert _open_titles(db) == ["chat 2", "chat 0", "chat 1"]
        ws.close(chats[0])
        history.flush()
        assert _open_titles(db) == ["chat 2", "chat 1"]
        back = ws.reopen()  # loaded from the store, as saved at closing
        assert back is not chats[0] and back.session_id == chats[0].session_id
        assert [m.content for m in back.messages] == [m.content for m in chats[0].messages]
        ws.delete_session(chats[1].session_id)
        assert chats[1] not in ws.conversations
        assert ws.open_session(chats[2].session_id) is chats[2] and ws.front is chats[2]
        with pytest.raises(KeyError):
            ws.open_session("no such chat")
        history.close()

        again = Workspace(bridge, settings, HistoryWriter.open(db))
        assert again.restore() == 2
        assert [c.title for c in again.conversations] == ["chat 2", "chat 0"]
        assert again.front is again.conversations[0]
        again.close_history()
    finally:
        await bridge.shutdown(timeout=2.0)


async def test_branch_opens_next_to_its_chat_and_is_saved(tmp_path, settings):
    """Workspace.branch: a new chat with the path up to a message, right after its chat,
    in front, saved in the history in that tab order."""
    db = tmp_path / "history.db"
    bridge = await start_bridge()
    try:
        history = HistoryWriter.open(db)
        ws = Workspace(bridge, settings, history)
        chat, last = ws.open(), ws.open()
        chat.update_settings("", FAST)
        for text in ("first", "second"):
            assert chat.send(text)
            await wait_until(lambda: not chat.is_busy)
        rec = Recorder(ws)
        branch = ws.branch(chat, 1)
        assert ws.conversations == [chat, branch, last] and ws.front is branch
        assert rec.seen == [("opened", (branch, 1)), ("front_changed", (branch,))]
        assert [(m.role, m.content) for m in branch.messages] == [
            (m.role, m.content) for m in chat.messages[:2]]
        assert {m.id for m in branch.messages}.isdisjoint(chat.tree.nodes)
        assert branch.params == chat.params and len(chat.messages) == 4
        history.flush()
        assert _open_titles(db) == ["first", "Branch · first", last.title]
        _, saved = read_back(db, branch.session_id)  # the copied path is in the history
        assert [(m.id, m.parent_id, m.role, m.content, m.token_ids) for m in saved] == [
            (m.id, m.parent_id, m.role, m.content, m.token_ids) for m in branch.messages]
        assert saved[1].token_ids  # the reply's ids: the cached prefix after a restart too
        history.close()
    finally:
        await bridge.shutdown(timeout=2.0)


def _open_titles(db: Path) -> list[str]:
    store = Store.open(db, read_only=True)
    try:
        return [s.title for s in store.list_sessions(open_only=True)]
    finally:
        store.close()


def test_drafts_and_the_front_chat_come_back_after_a_restart(tmp_path, settings):
    db = tmp_path / "history.db"
    ws = Workspace(EngineBridge(), settings, HistoryWriter.open(db))
    kept, fresh, blank = ws.open(), ws.open(), ws.open()
    ws.set_draft(kept, "half a thought")
    ws.set_draft(fresh, "a new chat's draft")
    ws.set_draft(blank, "   ")  # blank: no draft
    ws.set_front(fresh)
    ws.remember()
    assert settings.drafts == {kept.session_id: "half a thought",
                               fresh.session_id: "a new chat's draft"}
    assert settings.front_chat == fresh.session_id
    ws.close(kept)  # an empty chat leaves the history, its draft the workspace
    assert kept.id not in ws.drafts
    ws.remember()
    settings.drafts[kept.session_id] = "half a thought"  # as if it was killed before
    settings.drafts["never-saved"] = "one more"
    settings.save()
    ws.close_history()

    loaded = Settings.load(settings.path)
    again = Workspace(EngineBridge(), loaded, HistoryWriter.open(db))
    restored: list[tuple[str, str]] = []
    again.draft_restored.connect(lambda conv, text: restored.append((conv.session_id, text)))
    assert again.restore() == 2
    assert [c.session_id for c in again.conversations] == [fresh.session_id, blank.session_id]
    again.restore_drafts()
    # its own chat's draft back in it; the others in the empty chat, then in a new one
    assert len(again.conversations) == 3
    back, empty, new = again.conversations
    assert restored == [(fresh.session_id, "a new chat's draft"),
                        (empty.session_id, "half a thought"), (new.session_id, "one more")]
    assert again.draft(empty) == "half a thought"
    assert again.front is back and loaded.front_chat == fresh.session_id
    again.close_history()


def test_closed_chats_keep_their_name_for_the_stats_and_reopen_in_place(settings):
    ws = Workspace(EngineBridge(), settings)
    a, b, c = ws.open(), ws.open(), ws.open()
    b.messages.append(_user_message())
    b.rename("Lighthouses")
    ws.close(b)
    assert ws.titles() == {a.tag: a.title, c.tag: c.title, b.tag: "Lighthouses (closed)"}
    back = ws.reopen()
    assert back is not b and ws.conversations == [a, back, c]  # where it was
    assert ws.titles()[b.tag] == "Lighthouses"  # its old requests: its chat is open again
    ws.move(back, 2)
    back.set_answers(3)  # the tab's ×N comes back too (the history keeps it with its settings)
    ws.close(back)  # at index 2 of [a, c, back]
    ws.close(a)
    again = ws.reopen()  # its place is past the end of [c] now: at the end
    assert again.session_id == b.session_id and ws.conversations == [c, again]
    assert again.answers == 3
