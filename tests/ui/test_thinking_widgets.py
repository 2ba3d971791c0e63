"""Issue #49 (F): the thinking block above a reply (folded by default, "Thinking…" while it
thinks, "Thought for 12 s · 830 tokens" once answered, opened and closed by its toggle) and
a tab's reasoning setting in its settings panel (kept in the tab's params, named as an
override of the defaults)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from ui.chat.thinking_block import ThinkingBlock, thinking_title


def test_the_title_says_what_the_thinking_did() -> None:
    assert thinking_title(True, None, None) == "Thinking…"
    assert thinking_title(False, 12.4, 830) == "Thought for 12 s · 830 tokens"
    assert thinking_title(False, 0.3, 1) == "Thought for under a second · 1 token"
    assert thinking_title(False, None, None) == "Thought"


def test_the_block_streams_folded_and_opens(qtbot) -> None:
    block = ThinkingBlock()
    qtbot.addWidget(block)
    block.show()
    block.show_thinking("", live=False)
    assert block.isHidden()  # a reply without thinking shows no block
    block.show_thinking("Let me", live=True)
    assert block.isVisible() and block.folded and block.text.isHidden()
    assert block.toggle.text() == "Thinking…"
    block.show_thinking("Let me see: 2 + 2.", live=True)
    qtbot.mouseClick(block.toggle, Qt.MouseButton.LeftButton)
    assert not block.folded and block.text.isVisible()
    assert block.text.text() == "Let me see: 2 + 2."
    block.show_thinking("Let me see: 2 + 2.", live=False, seconds=12.0, tokens=830)
    assert block.toggle.text() == "Thought for 12 s · 830 tokens"
    assert not block.folded  # opened stays opened as the reply goes on
    qtbot.mouseClick(block.toggle, Qt.MouseButton.LeftButton)
    assert block.folded and block.text.isHidden()


def test_a_tabs_reasoning_setting_is_kept_in_its_params(window) -> None:
    tab = window.current_tab()
    box = tab.panel.reasoning
    assert box.value() is None and "reasoning" not in tab.conversation.params
    box.thinking.setCurrentIndex(box.thinking.findData("on"))
    box.effort.setCurrentIndex(box.effort.findData("high"))
    box.budget.setValue(256)
    assert tab.conversation.params["reasoning"] == {"thinking": "on", "effort": "high",
                                                    "budget": 256}
    assert tab.panel.overrides()["reasoning"] == "model default"
    tab.panel.reset("reasoning")
    assert box.value() is None and "reasoning" not in tab.conversation.params
    assert box.budget.text() == "no limit"
