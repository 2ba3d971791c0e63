"""Tabs: new, close (cancelling a running reply), rename, reorder, many at once."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QInputDialog

from tests.ui.conftest import run_until
from ui.main_window import BUSY_MARK


def test_ctrl_t_and_ctrl_w_open_and_close_tabs(window, loop, qtbot):
    assert window.tabs.count() == 1
    for _ in range(3):
        qtbot.keyClick(window, Qt.Key.Key_T, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.count() == 4
    assert window.tabs.currentIndex() == 3
    titles = [window.tabs.tabText(i) for i in range(4)]
    assert len(set(titles)) == 4
    qtbot.keyClick(window, Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.count() == 3
    assert [window.tabs.tabText(i) for i in range(3)] == titles[:3]
    for _ in range(3):
        window.close_current_tab()
    assert window.tabs.count() == 1  # the last tab is replaced by a fresh one


def test_rename_and_reorder(window, loop, qtbot):
    first = window.current_tab()
    second = window.new_tab()
    window.rename_tab(0)
    dialog = window.findChild(QInputDialog)
    assert dialog is not None and dialog.isVisible() and dialog.textValue() == "Chat 1"
    dialog.setTextValue("Recipes")
    dialog.accept()
    assert window.tabs.tabText(0) == "Recipes"
    assert first.conversation.title == "Recipes"
    window.tabs.tabBar().moveTab(0, 1)
    assert window.chat_tabs() == [second, first]
    assert window.tabs.tabText(1) == "Recipes"


def test_closing_a_generating_tab_cancels_its_request(window, loop, qtbot):
    tab = window.current_tab()
    other = window.new_tab()
    for t in (tab, other):
        t.panel.fields["max_tokens"].setValue(5000)
        t.send_text(f"long story from {t.conversation.title}")
    gen = tab.conversation.generation
    run_until(loop, lambda: len(gen.stream.tokens) > 0)
    assert window.tabs.tabText(0).startswith(BUSY_MARK)
    window.close_tab(window.tabs.indexOf(tab))
    run_until(loop, lambda: gen.stream.finished)
    assert gen.finish_reason == "cancelled"
    assert other.conversation.is_busy  # the other tab keeps generating
    other.stop()
    run_until(loop, lambda: not other.conversation.is_busy)
    assert other.conversation.generations[-1].finish_reason == "cancelled"


def test_eight_tabs_generate_at_once_each_with_its_own_text(window, loop, qtbot):
    tabs = [window.current_tab()] + [window.new_tab() for _ in range(7)]
    for i, tab in enumerate(tabs):
        tab.panel.fields["max_tokens"].setValue(24 + i)
        assert tab.send_text(f"prompt number {i}: " + "xyz"[: i % 3 + 1] * (i + 1))
    assert all(t.conversation.is_busy for t in tabs)
    peak = 0

    def all_done() -> bool:
        nonlocal peak
        stats = window.ctx.bridge.stats()
        peak = max(peak, stats.batch_size)
        return not any(t.conversation.is_busy for t in tabs)

    run_until(loop, all_done, timeout=60)
    # they really decoded in one batch: seen while polling, or in the recent ticks' mean
    # (a loaded machine may poll only after the last of them ended)
    assert peak > 1 or window.ctx.bridge.stats().mean_batch_size > 1
    texts = []
    for i, tab in enumerate(tabs):
        gen = tab.conversation.generations[-1]
        reply = tab.conversation.messages[1]
        assert gen.tag == tab.conversation.tag
        assert gen.finish_reason == "length"
        assert len(gen.stream.tokens) == 24 + i
        assert reply.content == gen.text and gen.shown_chars == len(gen.text)
        window.tabs.setCurrentWidget(tab)  # deferred rendering catches up when shown
        assert tab.messages.widgets[1].body.source_text == gen.text
        assert f"{24 + i} tokens" in tab.messages.widgets[1].stats.text()
        texts.append(gen.text)
    assert len(set(texts)) == 8
