"""The input box's token count: the whole prompt the next Send makes (system prompt, the
chat shown, the draft) counted by the model's tokenizer, against its context; over the
context a warning, and Send says why it does not send."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.conftest import LONG_CONTEXT, run_until


def _reference(window, messages) -> int:
    """The prompt's size by the model's own chat template and tokenizer."""
    tok = window.ctx.bridge.local.engine.tokenizer
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return len(tok.encode(text, add_special_tokens=False))


def _counted(loop, count) -> int:
    run_until(loop, lambda: count.current and count.size is not None)
    return count.size.tokens


def test_typing_updates_the_count_to_the_prompts_real_size(window, loop, qtbot):
    tab = window.current_tab()
    count = tab.token_count
    tab.conversation.update_settings("You are terse.")
    first = "How far can a lighthouse be seen at night?"
    qtbot.keyClicks(tab.input, first)
    n = _counted(loop, count)
    assert n == _reference(window, [{"role": "system", "content": "You are terse."},
                                    {"role": "user", "content": first}])
    assert count.text() == f"{n} / {LONG_CONTEXT} tokens" and count.isVisible()
    assert count.counts <= 2  # throttled: not one count per keystroke
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.conversation.messages[1].stats.prompt_tokens == n  # the engine agrees
    # the next turn: the history, the system prompt and the new draft
    qtbot.keyClicks(tab.input, "And in fog?")
    n2 = _counted(loop, count)
    assert n2 > n + 3 and count.text() == f"{n2} / {LONG_CONTEXT} tokens"
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.conversation.messages[3].stats.prompt_tokens == n2
    # an empty draft counts what is there already
    _counted(loop, count)
    assert 0 < count.size.tokens


def test_over_the_context_warns_and_send_explains(window, loop, qtbot):
    tab = window.current_tab()
    count = tab.token_count
    tab.input.setPlainText("lighthouse " * (LONG_CONTEXT + 100))
    n = _counted(loop, count)
    assert n >= LONG_CONTEXT
    assert count.property("over") == "true" and "too long" in count.text()
    qtbot.mouseClick(tab.send_button, Qt.MouseButton.LeftButton)
    assert not tab.conversation.messages  # nothing sent
    assert tab.notice.isVisible()
    assert f"{n} tokens" in tab.notice.text() and str(LONG_CONTEXT) in tab.notice.text()
    assert "context" in tab.send_button.toolTip()
    tab.input.setPlainText("short again")
    run_until(loop, lambda: count.current and count.size.tokens < 100)
    assert count.property("over") == "false" and "too long" not in count.text()


def test_no_count_for_a_remote_backend(window, loop, settings):
    from app.remote import Connection

    settings.set_connections([Connection("http://127.0.0.1:9/v1", model="m", name="lab")])
    tab = window.current_tab()
    count = tab.token_count
    tab.input.setPlainText("hello")
    _counted(loop, count)
    assert count.isVisible()
    tab.set_backend("lab")  # its server has its own tokenizer and context
    run_until(loop, lambda: count.current)
    assert count.size is None and not count.isVisible()
    tab.set_backend(None)
    assert _counted(loop, count) > 0 and count.isVisible()
