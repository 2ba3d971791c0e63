"""Issue #46 item 17: switching a reply's version keeps its header (where the ‹ › arrows
are) in place on screen; it scrolled to the bottom of the new version, so switching back
meant scrolling up to find the arrows again. The replies are tall Markdown from a scripted
server (the tiny model's are short)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.remote import Connection
from tests.ui.conftest import run_until, spin
from tests.ui.scripted_server import ScriptedServer
from tests.ui.test_remote_tabs import remote_tab


def header_y(tab, index: int) -> int:
    """Where message `index`'s top is in the visible part of the chat."""
    widget = tab.messages.widgets[index]
    return widget.mapTo(tab.messages.viewport(), widget.rect().topLeft()).y()


def tall(word: str, lines: int) -> str:
    return "\n\n".join(f"{word} paragraph {i}: " + "some words " * 12 for i in range(lines))


def test_the_arrows_stay_under_the_pointer(window, loop, qtbot, settings):
    server = ScriptedServer([tall("intro", 60), tall("long", 120), tall("short", 3)])
    loop.run_until_complete(server.start())
    try:
        window.resize(1200, 780)
        tab = remote_tab(window, settings, Connection(server.url, model="scripted",
                                                      name="scripted"))
        conv = tab.conversation
        bar = tab.messages.verticalScrollBar()
        for text in ("start", "write a lot"):
            assert tab.send_text(text)
            run_until(loop, lambda: not conv.is_busy)
        qtbot.mouseClick(tab.regenerate_button, Qt.MouseButton.LeftButton)
        run_until(loop, lambda: not conv.is_busy)
        spin(loop, 0.2)
        # a short second version at the bottom of the chat: its arrows are in view
        assert tab.messages.widgets[3].versions.label.text() == "2/2"
        assert bar.value() == bar.maximum()
        y = header_y(tab, 3)
        assert 0 <= y < tab.messages.viewport().height() - 50
        qtbot.mouseClick(tab.messages.widgets[3].versions.prev_button, Qt.MouseButton.LeftButton)
        spin(loop, 0.2)
        assert header_y(tab, 3) == y
        # scrolled so the long version's header is 40 px from the top, then to the short one
        bar.setValue(tab.messages.widgets[3].y() - 40)
        spin(loop, 0.1)
        y = header_y(tab, 3)
        assert y == 40
        for step in ("next_button", "prev_button", "next_button"):
            qtbot.mouseClick(getattr(tab.messages.widgets[3].versions, step),
                             Qt.MouseButton.LeftButton)
            spin(loop, 0.2)  # laid out, rendered
            assert header_y(tab, 3) == y, step
    finally:
        loop.run_until_complete(server.stop())
