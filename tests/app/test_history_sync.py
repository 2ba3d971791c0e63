"""HistoryWriter on a real SQLite file: what a chat writes, and that the stored chat is
always the one shown (send, finish, regenerate, edit-and-resend, close)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.conversation import Conversation
from app.history.writer import HistoryWriter
from app.storage import Store

from .history_sync_helpers import FAST, read_back, start_bridge, wait_until


@pytest.fixture
async def bridge():
    b = await start_bridge()
    yield b
    await b.shutdown(timeout=2.0)


def assert_stored_equals_shown(db: Path, conv: Conversation) -> None:
    """The store holds the whole tree (every version) and the path the tab shows."""
    session, rows = read_back(db, conv.session_id)
    assert session is not None
    assert [(m.id, m.seq, m.parent_id, m.role, m.content, m.is_complete) for m in rows] == [
        (m.id, m.seq, m.parent_id, m.role, m.content, not m.streaming)
        for m in conv.tree.nodes.values()]
    assert session.shown_leaf_id == conv.messages[-1].id


async def test_send_and_finish_write_messages_params_and_stats(bridge, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db, meta_delay_s=0.0)
    conv = Conversation(bridge, title="Greeting", system_prompt="Be brief.", params=FAST)
    sync.attach(conv, 0)
    for text in ("hello", "and again"):
        assert conv.send(text)
        await wait_until(lambda: not conv.is_busy)
    assert_stored_equals_shown(db, conv)
    session, rows = read_back(db, conv.session_id)
    assert (session.title, session.system_prompt, session.params) == ("Greeting", "Be brief.",
                                                                        FAST)
    assert session.is_open and session.position == 0
    reply = rows[1]
    assert reply.params == FAST
    assert reply.stats["generated_tokens"] == 12 and reply.stats["finish_reason"] == "length"
    assert reply.stats["tokens_per_s"] > 0 and "queue_s" in reply.stats
    other = Store.open(db, read_only=True)
    stats = other.list_request_stats(session_id=conv.session_id)
    other.close()
    assert [s.message_id for s in stats] == [rows[1].id, rows[3].id]
    assert [s.request_id for s in stats] == [m.request_id for m in conv.messages[1::2]]
    assert stats[1].request_id == conv.generations[-1].request_id
    conv.rename("Renamed")
    conv.update_settings("New prompt", FAST | {"max_tokens": 7}, "Fast")
    await wait_until(lambda: read_back(db, conv.session_id)[0].title == "Renamed", 5)
    session, _ = read_back(db, conv.session_id)
    assert (session.system_prompt, session.params["max_tokens"], session.preset) == (
        "New prompt", 7, "Fast")
    assert sync.close()


async def test_regenerate_and_edit_keep_the_store_equal_to_the_chat(bridge, tmp_path) -> None:
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db)
    conv = Conversation(bridge, params=FAST | {"temperature": 1.0})
    sync.attach(conv, 0)
    for text in ("one", "two"):
        conv.send(text)
        await wait_until(lambda: not conv.is_busy)
    first = conv.messages[-1].id
    assert conv.regenerate()
    await wait_until(lambda: not conv.is_busy)
    assert conv.messages[-1].id != first and conv.versions(3) == (2, 2)
    sync.flush()
    assert_stored_equals_shown(db, conv)
    assert conv.edit_and_resend(0, "one, edited")
    await wait_until(lambda: not conv.is_busy)
    assert [m.content for m in conv.messages][0] == "one, edited" and len(conv.messages) == 2
    assert conv.versions(0) == (2, 2) and len(conv.tree.nodes) == 7
    sync.flush()
    assert_stored_equals_shown(db, conv)
    # back to the first version of the first message: its whole branch, as it was shown
    assert conv.switch_version(0, -1)
    assert [m.id for m in conv.messages][-1] == conv.messages[3].id
    assert conv.messages[3].id != first  # the branch shows its newest reply version
    sync.flush()
    assert_stored_equals_shown(db, conv)
    # deleting a version deletes its rows; the undo writes them back
    assert conv.delete(3)
    sync.flush()
    assert_stored_equals_shown(db, conv)
    assert conv.messages[-1].id == first
    assert conv.undo_delete()
    sync.flush()
    assert_stored_equals_shown(db, conv)
    sync.close()
    # a restart shows the same path, with every version
    again = HistoryWriter.open(db)
    [restored] = again.restore(bridge)
    assert [m.id for m in restored.messages] == [m.id for m in conv.messages]
    assert set(restored.tree.nodes) == set(conv.tree.nodes)
    assert [restored.versions(i) for i in range(4)] == [(1, 2), (1, 1), (1, 1), (2, 2)]
    again.close()


async def test_closing_a_tab_mid_reply_keeps_what_it_showed(bridge, tmp_path) -> None:
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db)
    conv = Conversation(bridge, params=FAST | {"max_tokens": 400})
    sync.attach(conv, 0)
    conv.send("long one")
    await wait_until(lambda: len(conv.messages[1].content) > 5)
    sync.detach(conv)
    conv.close()
    session, rows = read_back(db, conv.session_id)
    assert not session.is_open
    assert rows[1].content == conv.messages[1].content and rows[1].is_complete
    assert rows[1].stats["finish_reason"] == "cancelled"
    empty = Conversation(bridge, params=FAST)
    sync.attach(empty, 0)
    assert read_back(db, empty.session_id)[0] is not None
    sync.detach(empty)  # a chat with nothing in it is not kept in the history
    assert read_back(db, empty.session_id)[0] is None
    sync.close()
