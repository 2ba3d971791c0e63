"""Never a silent wait: a reply that waits for a slot says how many go first, one that
reads a long prompt says how far it got, then the text streams in its place."""

from __future__ import annotations

from app.waiting import wait_note
from engine import RequestProgress
from tests.ui.conftest import run_until


def test_wait_note_wording():
    assert wait_note(RequestProgress("r", "queued", 3, 100, 0)) == "queued — 3 ahead"
    assert wait_note(RequestProgress("r", "queued", 0, 100, 0)) == "queued — next in line"
    assert wait_note(RequestProgress("r", "prefilling", None, 200, 90)) == "reading prompt 45 %"
    assert wait_note(None) == ""


def test_queued_replies_say_how_many_are_ahead_then_stream(window, loop, qtbot):
    window.ctx.bridge.set_max_concurrent(1)
    tabs = [window.current_tab()] + [window.new_tab() for _ in range(3)]
    for tab in tabs:
        tab.panel.fields["max_tokens"].setValue(400)
        assert tab.send_text(f"question from {tab.conversation.title}")
    last = tabs[-1]
    reply = last.conversation.messages[-1]
    window.tabs.setCurrentWidget(last)
    body = last.messages.widgets[-1].body
    for ahead, stopping in (("2 ahead", tabs[0]), ("1 ahead", tabs[1]),
                            ("next in line", tabs[2])):
        run_until(loop, lambda a=ahead: reply.wait_note == f"queued — {a}")
        run_until(loop, lambda a=ahead: f"queued — {a}" in body.toPlainText())
        assert not reply.content
        stopping.stop()  # frees the slot for the next in line
    run_until(loop, lambda: bool(reply.content), timeout=30)
    assert reply.wait_note == ""
    run_until(loop, lambda: body.source_text == reply.content)
    assert "queued" not in body.toPlainText()
    last.stop()
    run_until(loop, lambda: not last.conversation.is_busy)


def test_a_long_prompt_shows_its_reading_progress(window, loop, qtbot, make_engine):
    slow = make_engine(context_length=8192, max_concurrent=2, prefill_burst=4,
                       min_prefill_tokens=4, max_token_budget=8)
    loop.run_until_complete(window.ctx.bridge.use_engine(slow, "tiny"))
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(4)
    tab.panel.system.setPlainText("")
    assert tab.send_text("w" * 3000)
    reply = tab.conversation.messages[-1]
    notes: list[str] = []
    tab.conversation.message_changed.connect(
        lambda msg, what: what == "waiting" and tab.conversation.tree.index(msg) is not None
        and notes.append(reply.wait_note))
    body = tab.messages.widgets[-1].body
    shown: list[str] = []

    def record() -> bool:
        if reply.wait_note and reply.wait_note in body.toPlainText():
            shown.append(reply.wait_note)
        return not tab.conversation.is_busy

    run_until(loop, record, timeout=60)
    reading = [n for n in notes if n.startswith("reading prompt")]
    assert len(reading) >= 2, notes
    percents = [int(n.split()[-2]) for n in reading]
    assert percents == sorted(percents) and percents[-1] > percents[0]
    assert any(n.startswith("reading prompt") for n in shown)  # the bubble said so
    assert reply.content and reply.wait_note == ""
