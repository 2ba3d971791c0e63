import json
from pathlib import Path

import pytest

from app.history.export import export_all, export_all_json, session_to_json
from app.history.import_json import import_document
from app.storage import (
    Message,
    RequestStatsRecord,
    SimResult,
    SimRun,
    StatsSnapshot,
    StorageError,
    Store,
)

from .conftest import add_chat


def fill(store: Store) -> None:
    a = add_chat(store, "alpha", ("q1", "a1 ```x```"))
    b = add_chat(store, "beta ünïcode", ("q2",))
    store.close_session(b.id)
    reply = store.load_session(a.id).messages[1]
    reply.token_ids = [3, 1, 4, 1, 5]
    store.save_message(reply)
    partial = Message(session_id=a.id, seq=2, role="assistant", is_complete=False)
    store.save_message(partial)
    store.checkpoint_message(partial.id, "half")
    run = SimRun(title="sim", config={"users": 2}, summary={"tps": 1.5})
    store.save_sim_run(run)
    store.add_sim_results([SimResult(sim_run_id=run.id, seq=i, prompt=f"p{i}") for i in range(2)])
    store.record_request_stats(RequestStatsRecord(request_id="r", session_id=a.id,
                                                  message_id=partial.id, cached_tokens=7,
                                                  tokens_per_s=float("1e-3")))
    store.add_stats_snapshot(StatsSnapshot({"active": 1, "nested": {"k": [1, 2]}}))


@pytest.fixture
def other(tmp_path: Path):
    s = Store.open(tmp_path / "other.db")
    yield s
    s.close()


def test_round_trip_into_an_empty_database_is_identical(store: Store, other: Store) -> None:
    fill(store)
    text = export_all_json(store)
    report = import_document(other, json.loads(text))
    assert export_all_json(other) == text
    assert report.added == {"sessions": 2, "messages": 4, "sim_runs": 1, "sim_results": 2,
                            "request_stats": 1, "stats_snapshots": 1}
    assert report.skipped == {}
    assert [h.id for h in other.search("half")]  # the search index was filled too


def test_round_trip_keeps_token_ids_and_cached_tokens(store: Store, other: Store) -> None:
    fill(store)
    import_document(other, json.loads(export_all_json(store)))
    alpha = next(s for s in other.list_sessions() if s.title == "alpha")
    assert [m.token_ids for m in other.load_session(alpha.id).messages] == [
        None, [3, 1, 4, 1, 5], None]
    assert [r.cached_tokens for r in other.list_request_stats()] == [7]


def test_an_export_from_before_conversation_memory_imports(store: Store, other: Store) -> None:
    fill(store)
    doc = export_all(store)
    for session in doc["sessions"]:  # what the previous version wrote: neither field
        for message in session["messages"]:
            del message["token_ids"]
    for row in doc["request_stats"]:
        del row["cached_tokens"]
    report = import_document(other, doc)
    assert report.added["messages"] == 4 and report.added["request_stats"] == 1
    assert all(m.token_ids is None for s in other.list_sessions()
               for m in other.load_session(s.id).messages)
    assert [r.cached_tokens for r in other.list_request_stats()] == [0]


@pytest.mark.parametrize("bad", ["[1, 2]", [1, "2"], [1.5], [True], {"0": 1}, 7])
def test_malformed_token_ids_are_refused_naming_the_record(store: Store, other: Store,
                                                            bad: object) -> None:
    fill(store)
    doc = export_all(store)
    message = doc["sessions"][0]["messages"][1]
    message["token_ids"] = bad
    with pytest.raises(ValueError) as info:
        import_document(other, doc)
    assert f"messages record {message['id']}: field token_ids must be a list of integers" \
        in str(info.value)
    assert other.list_sessions() == []


def test_malformed_cached_tokens_are_refused(store: Store, other: Store) -> None:
    fill(store)
    doc = export_all(store)
    doc["request_stats"][0]["cached_tokens"] = None
    with pytest.raises(ValueError, match="request_stats record .*: field cached_tokens must "
                                         "be an integer"):
        import_document(other, doc)
    assert other.list_request_stats() == []


def test_import_into_non_empty_database_never_overwrites(store: Store, other: Store) -> None:
    fill(store)
    doc = export_all(store)
    import_document(other, doc)
    alpha = next(s for s in other.list_sessions() if s.title == "alpha")
    other.rename_session(alpha.id, "renamed here")
    own = add_chat(other, "only in other")
    fresh = add_chat(store, "new in source")

    report = import_document(other, export_all(store))
    assert other.get_session(alpha.id).title == "renamed here"
    assert other.get_session(own.id) is not None
    assert other.load_session(fresh.id).session.title == "new in source"
    assert report.added == {"sessions": 1, "messages": 2}
    assert report.skipped == {"sessions": 2, "messages": 4, "sim_runs": 1, "sim_results": 2,
                              "request_stats": 1, "stats_snapshots": 1}
    assert "Skipped 2 chats" in report.summary()


def test_single_session_export_imports(store: Store, other: Store) -> None:
    session = add_chat(store, "solo")
    import_document(other, json.loads(session_to_json(store.load_session(session.id))))
    assert other.load_session(session.id) == store.load_session(session.id)


def test_bad_documents_are_refused_and_add_nothing(store: Store, other: Store) -> None:
    fill(store)
    doc = export_all(store)
    with pytest.raises(ValueError, match="not a BatchChat export"):
        import_document(other, {"format": "something else"})
    with pytest.raises(ValueError, match="format version 99"):
        import_document(other, {**doc, "format_version": 99})
    broken = json.loads(json.dumps(doc))
    broken["stats_snapshots"][0]["surprise"] = 1
    with pytest.raises(ValueError, match="unknown stats_snapshots fields: surprise"):
        import_document(other, broken)
    assert other.list_sessions() == [] and other.list_request_stats() == []


def test_import_failing_in_the_database_adds_nothing(store: Store, other: Store) -> None:
    fill(store)
    doc = export_all(store)
    # the last insert fails (the sessions, messages and runs are in by then)
    other.db.execute("CREATE TRIGGER refuse BEFORE INSERT ON stats_snapshots "
                     "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    with pytest.raises(StorageError) as info:
        import_document(other, doc)
    assert info.value.kind == "invalid"
    assert other.list_sessions() == [] and other.list_sim_runs() == []
