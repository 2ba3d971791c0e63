"""Issue #46 item 26 (MCP): saving a tested MCP server keeps its tool list on screen (it
emptied until the server was tested again), also when the server is picked again."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.mcp.conftest import COMMAND
from tests.ui.conftest import run_until
from ui.mcp.servers_dialog import McpServersDialog

TOOLS = ["add", "fail", "get_weather", "slow"]


def tool_names(dialog) -> list[str]:
    return sorted(dialog.tools.topLevelItem(i).text(0)
                  for i in range(dialog.tools.topLevelItemCount()))


def test_save_keeps_the_tools_a_test_listed(window, loop, qtbot):
    window.actions_by_name["mcp_servers"].trigger()
    dialog = window.findChild(McpServersDialog)
    qtbot.keyClicks(dialog.name, "weather")
    qtbot.keyClicks(dialog.command, COMMAND)
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: dialog.test_task is not None and dialog.test_task.done(),
              timeout=30)
    assert tool_names(dialog) == TOOLS
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert [s.name for s in window.ctx.settings.mcp_servers] == ["weather"]
    assert tool_names(dialog) == TOOLS  # still there after Save
    assert dialog.status.text() == "Saved weather."
    dialog.new_server()
    assert tool_names(dialog) == []  # a new one has none yet
    qtbot.mouseClick(dialog.list.viewport(), Qt.MouseButton.LeftButton,
                     pos=dialog.list.visualItemRect(dialog.list.item(0)).center())
    assert dialog.name.text() == "weather" and tool_names(dialog) == TOOLS
    dialog.close()
