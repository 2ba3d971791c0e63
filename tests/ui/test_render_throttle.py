"""Issue #18 item 10: a streaming reply is rendered at most once per interval however many
deltas arrive (renders are coalesced), costly renders are spaced further apart, and the
last text always renders: by the throttle's timer while streaming, at once when it ends."""

from __future__ import annotations

from app.conversation import ChatMessage
from ui.chat.message_view import MessageWidget
from ui.chat.render_throttle import RenderThrottle


def test_a_burst_of_deltas_is_one_render_and_the_last_text_shows(qtbot):
    msg = ChatMessage("assistant", "", streaming=True)
    widget = MessageWidget(1, msg)
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    before = widget.body.num_renders
    for i in range(100):  # one loop turn: a frame's worth of deltas for this reply
        msg.content += f"word{i} "
        widget.refresh()
    # the first may render at once; the rest wait for the throttle's timer, which cannot
    # fire within this loop turn
    assert widget.body.num_renders - before <= 1
    # nothing more arrives: the pending render still shows everything that came
    qtbot.waitUntil(lambda: widget.body.source_text == msg.content, timeout=5000)
    assert widget.body.num_renders - before <= 2
    assert "word99" in widget.body.toPlainText()

    # the end renders at once, not an interval later
    msg.content += "**the end**"
    msg.streaming, msg.finish_reason = False, "stop"
    widget.refresh()
    assert widget.body.source_text == msg.content
    assert widget.body.toPlainText().endswith("the end")


def test_a_costly_render_waits_longer_before_the_next():
    now = [100.0]
    calls = []

    def render() -> None:
        calls.append(now[0])
        now[0] += 0.05  # this render takes 50 ms

    throttle = RenderThrottle(render, min_interval_s=0.02, cost_factor=4.0,
                              clock=lambda: now[0])
    throttle.request()
    assert calls == [100.0] and abs(throttle.last_cost_s - 0.05) < 1e-9
    assert abs(throttle.interval_s - 0.2) < 1e-9  # 4 x its cost, not the 20 ms minimum
    now[0] += 0.1  # 100 ms after it ended: not due yet
    throttle.request()
    throttle.request()
    assert len(calls) == 1 and throttle.pending
    now[0] += 0.2
    throttle.render_now()  # what the timer does when it fires
    assert len(calls) == 2 and not throttle.pending
    now[0] += 0.25  # due again: a request renders at once
    throttle.request()
    assert len(calls) == 3
