"""Chat → MCP servers…: add a real stdio MCP server (the test's MCPServer), test it (its
tools listed), save it (settings and the app's manager follow), a bad entry and a server
that cannot start are refused with a message, remove it."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.settings import Settings
from tests.mcp.conftest import COMMAND
from tests.ui.conftest import run_until


def test_add_test_save_and_remove_a_server(window, loop, qtbot):
    window.actions_by_name["mcp_servers"].trigger()
    from ui.mcp.servers_dialog import McpServersDialog

    dialog = window.findChild(McpServersDialog)
    assert dialog is not None and dialog.isVisible()
    dialog.name.setText("weather")
    dialog.command.setText(COMMAND)
    task = dialog.start_test()
    # the UI runs while the server starts: the button is off, the status says so
    run_until(loop, lambda: not dialog.test_button.isEnabled(), timeout=5)
    assert dialog.status.text() == "Connecting to weather …"
    run_until(loop, task.done, timeout=30)
    names = [dialog.tools.topLevelItem(i).text(0) for i in range(dialog.tools.topLevelItemCount())]
    assert sorted(names) == ["add", "fail", "get_weather", "slow"]
    assert "weather works: 4 tools." == dialog.status.text()
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    ctx = window.ctx
    assert [s.name for s in ctx.settings.mcp_servers] == ["weather"]
    assert ctx.mcp.server("weather").command == COMMAND
    again = Settings.load(ctx.settings.path)
    assert again.mcp_servers == ctx.settings.mcp_servers

    dialog.new_server()
    dialog.name.setText("both")
    dialog.command.setText("x")
    dialog.url.setText("http://h/mcp")
    assert not dialog.save_current()
    assert "give either a command or a URL" in dialog.status.text()
    dialog.url.setText("")
    dialog.command.setText("/no/such/server")
    task = dialog.start_test()
    run_until(loop, task.done, timeout=30)
    assert task.result() is None
    assert dialog.status.text() == ("both: cannot start /no/such/server: no such program: "
                                    "/no/such/server")

    dialog.list.setCurrentRow(0)
    assert dialog.name.text() == "weather"
    dialog.delete_current()
    assert ctx.settings.mcp_servers == [] and ctx.mcp.servers == []
    dialog.close()
