import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.storage import Message, Store

from .conftest import add_chat


def start_reply(store: Store) -> Message:
    session = add_chat(store, "stream", ("tell me a story",))
    reply = Message(session_id=session.id, seq=1, role="assistant", content="",
                    is_complete=False)
    store.save_message(reply)
    return reply


def test_checkpoint_is_visible_to_a_second_connection_without_close(
        store: Store, db_file: Path) -> None:
    reply = start_reply(store)
    store.checkpoint_message(reply.id, "Once upon")
    crashed_view = Store.open(db_file)  # the first one is never closed: like a crash
    try:
        [_, seen] = crashed_view.load_session(reply.session_id).messages
        assert (seen.content, seen.is_complete) == ("Once upon", False)
    finally:
        crashed_view.close()


def test_late_checkpoint_never_overwrites_a_finished_message(store: Store) -> None:
    reply = start_reply(store)
    reply.content, reply.is_complete = "Once upon a time. The end.", True
    store.save_message(reply)
    store.checkpoint_message(reply.id, "Once upon")
    [_, saved] = store.load_session(reply.session_id).messages
    assert (saved.content, saved.is_complete) == ("Once upon a time. The end.", True)


def test_token_ids_round_trip_and_never_outlive_the_text_they_belong_to(
        store: Store, db_file: Path) -> None:
    reply = start_reply(store)
    reply.content, reply.is_complete, reply.token_ids = "Once", True, [17, 4, 99]
    store.save_message(reply)
    other = Store.open(db_file)  # a second connection reads what the file holds
    try:
        assert other.load_session(reply.session_id).messages[1].token_ids == [17, 4, 99]
    finally:
        other.close()
    # A reply saved incomplete again (as a new stream of the same row would be) and then
    # checkpointed has new text: the ids of the old text must not stay with it.
    reply.is_complete = False
    store.save_message(reply)
    store.checkpoint_message(reply.id, "Other text")
    [_, saved] = store.load_session(reply.session_id).messages
    assert (saved.content, saved.token_ids) == ("Other text", None)


def test_checkpoint_of_unsaved_reply_raises(store: Store) -> None:
    with pytest.raises(KeyError):
        store.checkpoint_message("never-saved", "text")


def test_sigkill_mid_stream_keeps_finished_messages_and_last_checkpoint(db_file: Path) -> None:
    # A real process killed with SIGKILL right after a checkpoint, Store never closed.
    script = textwrap.dedent(f"""
        import os, signal
        from app.storage import Message, Session, Store
        s = Store.open({str(db_file)!r})
        chat = Session(id="S", title="killed")
        s.save_session(chat)
        s.save_message(Message(session_id="S", seq=0, role="user", content="question"))
        s.save_message(Message(id="R", session_id="S", seq=1, role="assistant",
                               is_complete=False))
        s.checkpoint_message("R", "partial answer")
        s.db.conn.execute("BEGIN")  # a write in flight when the kill lands
        s.db.conn.execute("UPDATE messages SET content = 'never committed' WHERE id = 'R'")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", script], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == -signal.SIGKILL
    store = Store.open(db_file)
    try:
        [question, reply] = store.load_session("S").messages
        assert (question.content, question.is_complete) == ("question", True)
        assert (reply.content, reply.is_complete) == ("partial answer", False)
    finally:
        store.close()
