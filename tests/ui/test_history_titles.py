"""The History dialog with a long first message: the export heading and the suggested file
name carry the whole title (no "…", no "_"), and the Match column shows the match in bold
instead of raw "[lighthouse]" brackets."""

from __future__ import annotations

from tests.ui.conftest import run_until

STORY = ("Write a long story about a lighthouse keeper who finds a message in a bottle "
         "and sails across the ocean to answer it")
TITLE = "Write a long story about a lighthouse keeper who finds a message in a bottle and"


def test_export_heading_and_file_name_carry_the_whole_title(history_app, loop, tmp_path):
    window = history_app.start()
    tab = window.current_tab()
    assert tab.send_text(STORY)
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.conversation.title == TITLE
    view = window.history.show_history()
    assert view.select(tab.conversation.session_id)
    asked = []

    def ask(name: str, _filter: str) -> str:
        asked.append(name)
        return str(tmp_path / name)

    view.ask_save_path = ask
    view.export_actions[("session", "markdown")].trigger()
    assert asked == ["Write a long story about a lighthouse keeper who finds a.md"]
    md = (tmp_path / asked[0]).read_text(encoding="utf-8")
    assert md.startswith(f"# {TITLE}\n")


def test_match_column_shows_the_match_in_bold(history_app, loop):
    window = history_app.start()
    tab = window.current_tab()
    assert tab.send_text(STORY)
    run_until(loop, lambda: not tab.conversation.is_busy)
    view = window.history.show_history()
    view.search.setText("lighthouse")
    item = view.list.topLevelItem(0)
    assert item is not None
    shown = item.text(4)
    assert "lighthouse" in shown and "[" not in shown and "]" not in shown
    assert "\x02" not in shown and "\x03" not in shown  # no marks left for a plain view
    delegate = view.list.itemDelegateForColumn(4)
    assert "<b>lighthouse</b>" in delegate.html(view.list.model().index(0, 4))


def test_a_narrow_match_column_still_shows_the_match():
    from app.history.sidebar import MATCH_MARKS
    from ui.history.match_delegate import match_in_view

    o, c = MATCH_MARKS
    snippet = f"Write a long story about a {o}lighthouse{c} keeper who finds"
    assert match_in_view(snippet, lambda text: True) == snippet
    shown = match_in_view(snippet, lambda text: len(text) <= 22)
    assert shown == f"…about a {o}lighthouse{c} keeper who finds"
    assert match_in_view("no match here", lambda text: False) == "no match here"
