"""Issue #49 (E, F) in the window: a reasoning model's reply in a tab. Its thinking streams
into the folded block above the answer ("Thinking…" while it thinks), the answer alone is
the message's text (what Copy, the history's content and the next prompt take), the block
says how long and how many tokens once answered; the reply is saved with its thinking and
comes back after a restart, and the export carries it.

The model is tests/reasoning_model.py's tiny llama with Qwen3's real template; the tab's
thinking budget (its settings) steers the random model into Qwen3's shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.history.export import session_to_json, session_to_markdown
from app.reasoning.reply import thinking_live
from tests.engine.conftest import skip_without_native
from tests.reasoning_model import QWEN3, thinking_tiny
from tests.ui.conftest import LONG_CONTEXT, HistoryApp, run_until
from tests.ui.history_checks import stored

BUDGET = 1200  # long enough to stream over many frames (the tiny model is fast)


@pytest.fixture(scope="module")
def qwen():
    skip_without_native()
    return thinking_tiny(seed=7, template=QWEN3, context_length=LONG_CONTEXT)


@pytest.fixture
def thinking_app(loop, settings, qtbot, tmp_path, qwen):
    from engine import Engine, EngineConfig

    def make_engine(**_options: Any) -> Engine:
        return Engine(qwen.model, qwen.tokenizer, eos_token_ids=sorted(qwen.eos_token_ids),
                      context_length=qwen.context_length, config=EngineConfig(),
                      description="tiny thinking model")

    app = HistoryApp(loop, settings, make_engine, qtbot, tmp_path / "h.db")
    yield app
    app.stop()


def test_the_thinking_streams_folds_is_saved_and_comes_back(thinking_app, loop) -> None:
    window = thinking_app.start()
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(BUDGET + 40)
    tab.panel.reasoning.budget.setValue(BUDGET)
    assert tab.conversation.params["reasoning"] == {"budget": BUDGET}
    frames: list[tuple[str, str, bool]] = []

    def seen(msg, what) -> None:
        if what == "text" and msg.role == "assistant":
            frames.append((msg.reasoning, msg.content, thinking_live(msg)))

    tab.conversation.message_changed.connect(seen)
    tab.send_text("What is 2+2?")
    # while it thinks: the block, live and folded, and no answer under it
    run_until(loop, lambda: len(tab.messages.widgets) == 2
              and tab.messages.widgets[-1].thinking.isVisible(), timeout=30)
    widget = tab.messages.widgets[-1]
    assert thinking_live(tab.conversation.messages[-1])
    assert widget.thinking.toggle.text() == "Thinking…" and widget.thinking.folded
    assert widget.body.isHidden()
    run_until(loop, lambda: not tab.conversation.is_busy, timeout=60)
    reply = tab.conversation.messages[-1]
    # it streamed: frames while thinking (no answer yet), growing, then the answer
    live = [f for f in frames if f[2]]
    assert len(live) >= 2 and all(not content for _, content, _ in live)
    assert [r for r, *_ in live] == sorted((r for r, *_ in live), key=len)
    assert frames[-1][1]  # the last frames carry the answer
    assert reply.reasoning and reply.content
    assert "<think>" not in reply.content + reply.reasoning
    assert "</think>" not in reply.content + reply.reasoning
    assert widget is tab.messages.widgets[-1]
    assert widget.thinking.isVisible() and widget.thinking.folded and widget.body.isVisible()
    assert widget.thinking.toggle.text().startswith("Thought for")
    assert widget.thinking.toggle.text().endswith("tokens")
    assert reply.reasoning_tokens == BUDGET + 2  # <think>, its tokens, </think>
    assert widget.body.source_text == reply.content  # the answer alone under it
    # the next prompt: the answer as the reply, the thinking handed to the template
    [*_, last] = tab.conversation.prompt_messages()
    assert last["content"] == reply.content and last["reasoning_content"] == reply.reasoning

    # saved, and back after a restart, folded, with its title
    session = tab.conversation.session_id
    s = stored(thinking_app.db)
    [row] = [m for m in s.list_messages(session) if m.role == "assistant"]
    assert (row.content, row.reasoning) == (reply.content, reply.reasoning)
    loaded = s.load_session(session)
    s.close()
    exported = json.loads(session_to_json(loaded))["session"]["messages"]
    assert [m["reasoning"] for m in exported if m["role"] == "assistant"] == [reply.reasoning]
    assert "<summary>Thinking</summary>" in session_to_markdown(loaded)
    title = widget.thinking.toggle.text()
    thinking_app.stop()
    window = thinking_app.start()
    tab = window.current_tab()
    back = tab.conversation.messages[-1]
    assert (back.reasoning, back.content) == (reply.reasoning, reply.content)
    widget = tab.messages.widgets[-1]
    run_until(loop, lambda: widget.thinking.isVisible())
    assert widget.thinking.folded and widget.thinking.toggle.text() == title
    widget.thinking.toggle.setChecked(True)
    assert widget.thinking.text.text() == reply.reasoning
