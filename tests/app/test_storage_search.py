from app.storage import Message, SimResult, SimRun, Store

from .conftest import add_chat


def test_finds_a_word_inside_a_message(store: Store) -> None:
    session = add_chat(store, "Chat", ("how do lifetimes work in rust", "they annotate borrows"))
    [hit] = store.search("borrow")  # prefix + porter stemming
    assert (hit.kind, hit.id) == ("session", session.id)
    assert hit.message_id == store.load_session(session.id).messages[1].id
    assert "[borrows]" in hit.snippet


def test_finds_a_session_title_and_a_checkpointed_partial_reply(store: Store) -> None:
    session = add_chat(store, "Quantum tunnelling notes", ("q",))
    reply = Message(session_id=session.id, seq=1, role="assistant", is_complete=False)
    store.save_message(reply)
    store.checkpoint_message(reply.id, "electrons leak through barriers")
    assert [h.id for h in store.search("tunnelling")] == [session.id]
    assert [h.message_id for h in store.search("barriers")] == [reply.id]


def test_finds_a_sim_run_by_its_prompt_and_title(store: Store) -> None:
    run = SimRun(title="Burst of 32", config={"concurrency": 32})
    store.save_sim_run(run)
    store.add_sim_results([SimResult(sim_run_id=run.id, seq=0, prompt="a haiku about giraffes")])
    assert [(h.kind, h.id) for h in store.search("giraffes")] == [("sim_run", run.id)]
    assert [h.id for h in store.search("burst")] == [run.id]


def test_no_hit_after_delete_and_for_absent_words(store: Store) -> None:
    session = add_chat(store, "Chat", ("pineapple pizza",))
    assert store.search("pineapple")
    store.delete_session(session.id)
    assert store.search("pineapple") == []
    assert store.search("nothinglikethis") == []


def test_fts_syntax_in_user_input_does_not_raise(store: Store) -> None:
    add_chat(store, "Chat", ('he said "NEAR(a b)" AND OR *',))
    assert store.search('"NEAR(a') != []
    assert store.search('*()"') == []
