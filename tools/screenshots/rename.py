"""Screenshots for docs/app.md, issue #46 item 26 (rename dialogs "tiny, with the title out
of view, 'Name:' in one place and 'Title:' in another"): the one Rename chat dialog
(ui/rename_dialog.py) open over the window on a chat with a long title, as F2 opens it,
at 1200×780 and 900×600, light and dark (a sidebar row's Rename… opens the same dialog).
The screen is grabbed, not the window, since the dialog is a window of its own. No model
is loaded: renaming needs none. Run under Xvfb:

    Xvfb :27 -screen 0 1400x900x24 &
    DISPLAY=:27 python -m tools.screenshots.rename --out docs
"""

from __future__ import annotations

from tools.app_start import screen_scene

SIZES = ((1200, 780), (900, 600))
TITLES = ("Trip to Lisbon: a three-day plan with trains, museums and where to eat",
          "Python: why does my asyncio loop block on a subprocess?", "Haiku about the sea")


def main() -> None:
    scene = screen_scene("rename", SIZES[0])
    window = scene.window

    async def play() -> None:
        tabs = [window.current_tab()] + [window.new_tab() for _ in TITLES[1:]]
        for tab, title in zip(tabs, TITLES, strict=True):
            window.set_tab_title(tab, title)
        window.workspace.set_front(tabs[0].conversation)
        for theme in ("light", "dark"):
            for w, h in SIZES:  # as F2 on the tab in front
                await scene.dialog_shot(f"tab-{theme}-{w}", theme, w, h,
                                        lambda: window.tabs.rename(0))

    scene.play(play())


if __name__ == "__main__":
    main()
