"""Screenshots for docs/app.md: a tab using an MCP server's tool (the call's block asking
Allow / Deny, then its result and the reply), the MCP servers dialog, and a tab whose output
format is a JSON schema; light and dark, 1200×780 and 900×600. The bundled model answers;
the MCP server is the tests' own (tests/mcp/weather_server.py, over stdio). Run under Xvfb:

    Xvfb :7 -screen 0 1400x900x24 &
    DISPLAY=:7 python -m tools.screenshots.mcp_tools --out docs
"""

from __future__ import annotations

import asyncio
import json

from tools.app_start import (
    GREEDY,
    arguments,
    load,
    open_window,
    out_dir,
    qt_app,
    run,
    scratch_settings,
    shot,
    wait,
)

PERSON = {"type": "object", "additionalProperties": False,
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "city": {"type": "string", "maxLength": 24}},
          "required": ["name", "age", "city"]}
SIZES = ((1200, 780), (900, 600))


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from app.context import AppContext
    from app.defaults import Defaults
    from tests.mcp.conftest import weather
    from ui.mcp.servers_dialog import McpServersDialog

    _app, loop = qt_app("mcp_shots")
    settings = scratch_settings()
    settings.user_presets["Greedy"] = dict(GREEDY)
    settings.defaults = Defaults(params=dict(GREEDY))
    settings.show_settings_panel = True
    settings.set_mcp_servers([weather()])
    schema_file = settings.path.parent / "person.json"
    schema_file.write_text(json.dumps(PERSON, indent=2))
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx, SIZES[0])

    async def sized(name: str) -> None:
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                await asyncio.sleep(0.4)
                shot(window, out / f"screenshot-{name}-{theme}-{w}.png")

    async def scene() -> None:
        await load(ctx.bridge, args.model)
        tab = window.current_tab()
        window.set_tab_title(tab, "Weather")
        tab.panel.tools.set_params({"mcp_servers": ["weather"], "tool_choice": "get_weather"})
        tab.panel.tools.changed.emit()
        tab.send_text("What is the weather in Oslo today?")
        await wait(lambda: tab.tool_prep is not None and tab.tool_prep.done())
        await wait(lambda: bool(tab.conversation.tool_wait))
        await sized("mcp")
        block = next(iter(tab.messages.widgets[1].tool_blocks.values()))
        block.allow_button.click()
        await wait(lambda: not tab.conversation.is_busy)
        block.toggle.setChecked(True)
        window.set_theme("light")
        window.resize(*SIZES[0])
        await asyncio.sleep(0.4)
        shot(window, out / "screenshot-mcp-result-light-1200.png")

        dialog = McpServersDialog(ctx, window)
        dialog.show()
        dialog.list.setCurrentRow(0)
        await dialog.start_test()
        await asyncio.sleep(0.3)
        shot(dialog, out / "screenshot-mcp-dialog-light.png")
        dialog.close()

        second = window.new_tab()
        window.set_tab_title(second, "JSON")
        second.panel.output_format.load_file(str(schema_file))
        second.send_text("Invent a person who lives by the sea.")
        await wait(lambda: not second.conversation.is_busy)
        await sized("json")
        await ctx.mcp.close()
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
