"""Screenshots for docs/app.md, issue #46 item 26 (tabs whose titles start alike cannot be
told apart): six chats whose titles share their first words, elided alike in the tab bar,
and the tooltip of one of them, the fourth, as hovering it shows it (a ToolTip help event
sent to the tab bar over the tab, as Qt sends one on hover): the whole title and the
tab's number with its key (ui/chat_tabs.py's tab_tip). At 1200x780 and 900x600, light and
dark. The screen is grabbed, not the window, since a tooltip is a window of its own. No
model is loaded. Run under Xvfb:

    Xvfb :28 -screen 0 1400x900x24 &
    DISPLAY=:28 python -m tools.screenshots.tab_tooltips --out docs
"""

from __future__ import annotations

import asyncio

from tools.app_start import screen_scene

SIZES = ((1200, 780), (900, 600))
# the same first words: the tab bar elides them alike
TITLES = tuple(f"Trip to Lisbon: a three-day plan, {part}" for part in (
    "trains from the airport", "museums on Monday", "where to eat near Alfama",
    "day trip to Sintra", "budget in euros", "packing list for rain"))
HOVERED = 3  # the fourth tab


def main() -> None:
    scene = screen_scene("tab-tooltip", SIZES[0])
    window = scene.window

    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QApplication, QToolTip

    def hover(index: int) -> str:
        bar = window.tabs.tabBar()
        rect = bar.tabRect(index)  # near its left end: the tooltip then fits in 900 px
        pos = rect.topLeft() + type(rect.topLeft())(12, rect.height() // 2)
        QApplication.sendEvent(bar, QHelpEvent(QEvent.Type.ToolTip, pos, bar.mapToGlobal(pos)))
        return QToolTip.text()

    async def play() -> None:
        tabs = [window.current_tab()] + [window.new_tab() for _ in TITLES[1:]]
        for tab, title in zip(tabs, TITLES, strict=True):
            window.set_tab_title(tab, title)
        window.workspace.set_front(tabs[0].conversation)
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.6)
                shown = hover(HOVERED)
                if TITLES[HOVERED] not in shown or f"Tab {HOVERED + 1}" not in shown:
                    raise RuntimeError(f"the tooltip shows {shown!r}")
                await asyncio.sleep(0.8)  # the tooltip fades in
                scene.shot(f"{theme}-{w}", w, h)
                QToolTip.hideText()
                await asyncio.sleep(0.3)

    scene.play(play())


if __name__ == "__main__":
    main()
