"""Screenshots for docs/server.md, issue #52: *Server ▸ Server settings…* (ui/
server_controls.py's dialog: port, API key, and the "Fetch http(s) image URLs in API
requests" box) open over the window on the bundled model, light at 900×600 and dark at
1200×780. The screen is grabbed, not the window, since the dialog is a window of its own.
Run under Xvfb:

    Xvfb :29 -screen 0 1400x900x24 &
    DISPLAY=:29 python -m tools.screenshots.server_settings --out docs
"""

from __future__ import annotations

from tools.app_start import load, screen_scene

LOOKS = (("light", 900, 600), ("dark", 1200, 780))


def main() -> None:
    scene = screen_scene("server-settings", LOOKS[0][1:])
    window = scene.window

    async def play() -> None:
        await load(scene.ctx.bridge, scene.args.model)
        for theme, w, h in LOOKS:  # the dialog as its menu entry opens it
            await scene.dialog_shot(f"{theme}-{w}", theme, w, h, window.api_server.edit_settings)

    scene.play(play())


if __name__ == "__main__":
    main()
