"""A reply cancelled by closing its tab keeps its stats, in the message and as a request
stats row, like any other reply."""

from __future__ import annotations

from tests.ui.conftest import run_until, start_long_reply
from tests.ui.history_checks import stored


def test_stats_of_a_reply_cancelled_by_closing_its_tab_are_saved(history_app, loop, qtbot):
    window = history_app.start()
    tab = window.current_tab()
    gen = start_long_reply(tab, loop, "a long answer please")
    session = tab.conversation.session_id
    reply_id = tab.conversation.messages[-1].id
    window.new_tab()
    window.close_tab(window.tabs.indexOf(tab))
    run_until(loop, lambda: gen.is_finished)
    s = stored(history_app.db)
    try:
        rows = s.list_request_stats(session_id=session)
        message = next(m for m in s.list_messages(session) if m.id == reply_id)
    finally:
        s.close()
    assert [r.request_id for r in rows] == [gen.request_id]
    assert rows[0].finish_reason == "cancelled" and rows[0].generated_tokens > 0
    assert message.stats["finish_reason"] == "cancelled"
    assert message.stats["generated_tokens"] == rows[0].generated_tokens
    assert message.stats["prompt_tokens"] > 0
