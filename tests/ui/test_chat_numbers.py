"""A new chat's name "Chat N" takes the lowest N no open chat uses: after closing every tab
the new one is "Chat 1" again, and a gap left by a closed tab is filled first."""

from __future__ import annotations


def _titles(window) -> list[str]:
    return [window.tabs.widget(i).conversation.title for i in range(window.tabs.count())]


def test_numbers_restart_after_closing_every_tab(window):
    for _ in range(4):
        window.new_tab()
    assert _titles(window) == ["Chat 1", "Chat 2", "Chat 3", "Chat 4", "Chat 5"]
    while window.tabs.count() > 1:
        window.close_tab(0)
    window.close_tab(0)  # the last one: replaced by a new chat
    assert _titles(window) == ["Chat 1"]


def test_a_gap_is_filled_first_and_named_chats_do_not_count(window):
    window.new_tab()
    window.new_tab()
    assert _titles(window) == ["Chat 1", "Chat 2", "Chat 3"]
    window.close_tab(1)
    window.new_tab()
    assert _titles(window) == ["Chat 1", "Chat 3", "Chat 2"]
    # a chat named by its first message frees its number
    first = window.tabs.widget(0)
    first.send_text("What is a lighthouse?")
    assert first.conversation.title == "What is a lighthouse?"
    window.new_tab()
    assert _titles(window)[-1] == "Chat 1"
