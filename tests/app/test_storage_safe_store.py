from pathlib import Path

from app.storage import Message, SafeStore, Session


def test_writes_go_straight_through_when_healthy(db_file: Path) -> None:
    safe = SafeStore.open(db_file)
    session = Session(title="t")
    assert safe.save_session(session) is True
    assert safe.pending_count == 0 and safe.last_error is None
    saved = safe.reader.get_session(session.id)
    assert (saved.id, saved.title, saved.params) == (session.id, "t", {})
    safe.close()


def test_queued_record_is_a_copy_taken_at_submit_time(db_file: Path) -> None:
    safe = SafeStore.open(db_file)
    session = Session(title="before")
    safe.save_session(session)
    session.title = "mutated later, never saved"
    assert safe.reader.get_session(session.id).title == "before"
    safe.close()


def test_invalid_write_is_set_aside_not_retried_and_not_blocking(db_file: Path) -> None:
    safe = SafeStore.open(db_file)
    orphan = Message(session_id="no-such-session", seq=0, role="user", content="x")
    assert safe.save_message(orphan) is True  # nothing left pending...
    assert safe.last_error is not None and safe.last_error.kind == "invalid"
    assert [w.args[0].id for w, _ in safe.rejected] == [orphan.id]  # ...but kept, not dropped
    assert safe.checkpoint_message("never-saved", "x") is True
    assert len(safe.rejected) == 2 and "never-saved" in str(safe.last_error)
    assert safe.save_session(Session()) is True  # later writes still go through
    assert safe.last_error is None
    safe.close()
