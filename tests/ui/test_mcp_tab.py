"""An MCP round trip in a tab (pytest-qt, the tiny random-weight model): the test's real MCP
server (stdio) is enabled in the tab's settings; a named tool_choice makes the model call
get_weather (the call grammar keeps it valid); the call shows as a block asking Allow /
Deny; Allow runs it, the result goes back as a `tool` message and the reply continues.
Deny feeds a refusal back; "Always allow" runs the next call without asking; Stop while a
call waits ends the turn; a server that cannot start is named in the tab, nothing sent."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.mcp import McpServerConfig
from tests.mcp.conftest import weather
from tests.ui.conftest import run_until, spin


def tool_tab(window, loop, servers=("weather",), choice="get_weather", timeout_s=20.0):
    window.ctx.settings.set_mcp_servers([weather(timeout_s=timeout_s)])
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(120)  # the tiny model spells a call in ~70 tokens
    tab.panel.tools.set_params({"mcp_servers": list(servers), "tool_choice": choice})
    tab.panel.tools.changed.emit()
    assert tab.conversation.params["mcp_servers"] == list(servers)
    return tab


def ask(tab, loop, text="What is the weather?"):
    assert tab.send_text(text)
    run_until(loop, lambda: tab.tool_prep.done(), timeout=30)
    assert tab.tool_prep.result() is True, tab.notice.text()
    conv = tab.conversation
    run_until(loop, lambda: bool(conv.tool_wait) or not conv.is_busy, timeout=60)
    return conv


def block_of(tab, index):
    widget = tab.messages.widgets[index]
    assert len(widget.tool_blocks) == 1
    return next(iter(widget.tool_blocks.values()))


def test_allow_runs_the_call_and_the_reply_continues(window, loop, qtbot):
    tab = tool_tab(window, loop)
    conv = ask(tab, loop)
    assert conv.is_busy and tab.send_button.text() == "Stop"
    reply = conv.messages[1]
    call = reply.tool_calls[0]
    assert call["function"]["name"] == "get_weather"
    city = __import__("json").loads(call["function"]["arguments"])["city"]
    assert city in ("Oslo", "Lima", "Perth")
    block = block_of(tab, 1)
    assert not block.ask.isHidden() and "waiting for you" in block.toggle.text()
    assert city in block.arguments.text()
    qtbot.mouseClick(block.allow_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: not conv.is_busy, timeout=60)
    assert reply.tool_results[call["id"]] == {"status": "done",
                                              "text": f"Sunny in {city}, 21 °C"}
    assert block.ask.isHidden() and "done" in block.toggle.text()
    assert block.result.text() == f"Sunny in {city}, 21 °C"
    final = conv.messages[2]
    assert final.role == "assistant" and final.content and final.finish_reason
    assert len(conv.messages) == 3
    prompt = conv.prompt_messages()
    tool_msg = next(m for m in prompt if m["role"] == "tool")
    assert tool_msg == {"role": "tool", "tool_call_id": call["id"], "name": "get_weather",
                        "content": f"Sunny in {city}, 21 °C"}
    # the continuation was asked with the result in its prompt (not forced to call again)
    assert final.params["tool_choice"] == "auto"


def test_deny_feeds_back_a_refusal(window, loop, qtbot):
    tab = tool_tab(window, loop)
    conv = ask(tab, loop)
    block = block_of(tab, 1)
    qtbot.mouseClick(block.deny_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: not conv.is_busy, timeout=60)
    call_id = conv.messages[1].tool_calls[0]["id"]
    assert conv.messages[1].tool_results[call_id]["status"] == "denied"
    assert "denied" in block.toggle.text()
    tool_msg = next(m for m in conv.prompt_messages() if m["role"] == "tool")
    assert tool_msg["content"] == "The user denied this tool call."
    assert conv.messages[2].role == "assistant" and conv.messages[2].finish_reason


def test_always_allow_then_stop(window, loop, qtbot):
    tab = tool_tab(window, loop)
    conv = ask(tab, loop)
    block = block_of(tab, 1)
    block.always.setChecked(True)
    qtbot.mouseClick(block.allow_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: not conv.is_busy, timeout=60)
    assert tab.tools.always == {"get_weather"}
    conv = ask(tab, loop, "And tomorrow?")  # runs without asking
    run_until(loop, lambda: not conv.is_busy, timeout=60)
    second = conv.messages[4]
    assert [o["status"] for o in second.tool_results.values()] == ["done"]
    assert block_of(tab, 4).ask.isHidden()
    # Stop while a call waits for the user: the call is refused, nothing follows
    tab.tools.always.clear()
    conv = ask(tab, loop, "And in a week?")
    assert conv.tool_wait
    tab.stop()
    assert not conv.is_busy and tab.send_button.text() == "Send"
    last = conv.messages[-1]
    assert [o["status"] for o in last.tool_results.values()] == ["denied"]
    assert last.role == "assistant" and last.tool_calls


def test_a_timeout_and_a_tool_error_are_shown_in_the_block(window, loop, qtbot):
    tab = tool_tab(window, loop, choice="slow", timeout_s=1.0)
    conv = ask(tab, loop, "Wait for it")
    block = block_of(tab, 1)
    qtbot.mouseClick(block.allow_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: "running" in block.toggle.text(), timeout=5)
    assert conv.is_busy  # the tab stays responsive while the call runs
    run_until(loop, lambda: not conv.is_busy, timeout=60)
    assert "failed" in block.toggle.text() and not block.details.isHidden()
    assert block.result.text() == "weather: slow timed out after 1 s"
    tool_msg = next(m for m in conv.prompt_messages() if m["role"] == "tool")
    assert tool_msg["content"] == "Error: weather: slow timed out after 1 s"
    tab.panel.tools.set_params({"mcp_servers": ["weather"], "tool_choice": "fail"})
    tab.panel.tools.changed.emit()
    conv = ask(tab, loop, "Try failing")
    block = block_of(tab, 4)
    qtbot.mouseClick(block.allow_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: not conv.is_busy, timeout=60)
    assert "failed" in block.toggle.text() and "no sun today" in block.result.text()


def test_a_server_that_cannot_start_is_named_and_nothing_is_sent(window, loop):
    window.ctx.settings.set_mcp_servers([McpServerConfig("ghost", command="/no/such/x")])
    tab = window.current_tab()
    tab.panel.tools.set_params({"mcp_servers": ["ghost"], "tool_choice": "auto"})
    tab.panel.tools.changed.emit()
    assert tab.send_text("hi")
    run_until(loop, lambda: tab.tool_prep.done(), timeout=30)
    assert tab.tool_prep.result() is False
    assert tab.notice.text() == ("Not sent: ghost: cannot start /no/such/x: no such program: "
                                 "/no/such/x")
    assert tab.conversation.messages == []


def test_a_tab_on_a_remote_server_gets_its_tool_calls(window, loop, qtbot, settings):
    """BatchChat's own API server (in-process, loopback, the tiny model) as the tab's
    backend: the tools and tool_choice go in the request, the call comes back as streamed
    tool_calls deltas, the result goes back as a tool message in the next request."""
    from app.remote import Connection
    from app.server import ApiServer, ServerConfig

    server = ApiServer(lambda: window.ctx.bridge.local, lambda: "tiny",
                       ServerConfig(port=0, api_key="k"))
    url = loop.run_until_complete(server.start())
    try:
        settings.set_connections([Connection(url, model="tiny", api_key="k", name="own")])
        tab = tool_tab(window, loop)
        tab.set_backend("own")
        conv = ask(tab, loop)
        reply = conv.messages[1]
        assert reply.backend == "own" and reply.finish_reason == "tool_calls"
        call = reply.tool_calls[0]
        assert call["function"]["name"] == "get_weather" and call["id"]
        city = __import__("json").loads(call["function"]["arguments"])["city"]
        qtbot.mouseClick(block_of(tab, 1).allow_button, Qt.MouseButton.LeftButton)
        run_until(loop, lambda: not conv.is_busy, timeout=60)
        assert reply.tool_results[call["id"]]["text"] == f"Sunny in {city}, 21 °C"
        final = conv.messages[2]
        assert final.backend == "own" and final.finish_reason and not final.error
    finally:
        loop.run_until_complete(server.stop())


def test_presets_leave_the_tabs_tools_alone(window, loop):
    tab = tool_tab(window, loop, choice="auto")
    panel = tab.panel
    panel.save_preset("Mine")
    assert "mcp_servers" not in window.ctx.settings.preset("Mine")
    assert panel.preset.currentText() == "Mine"  # matched, the tools aside
    index = panel.preset.findText("Fast")
    panel.preset.setCurrentIndex(index)
    panel.preset.activated.emit(index)
    assert tab.conversation.params["mcp_servers"] == ["weather"]
    assert tab.conversation.params["max_tokens"] == 12


def test_stop_cancels_a_running_call(window, loop, qtbot):
    tab = tool_tab(window, loop, choice="slow")  # the call takes 10 s
    conv = ask(tab, loop, "Wait for it")
    block = block_of(tab, 1)
    qtbot.mouseClick(block.allow_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: "running" in block.toggle.text(), timeout=5)
    task = next(iter(tab.tools.tasks))
    tab.stop()
    assert not conv.is_busy and tab.send_button.text() == "Send"
    assert task.cancelling()  # asked to stop; a late answer is ignored (ToolTurns.set_result)
    spin(loop, 1.0)
    outcome = next(iter(conv.messages[1].tool_results.values()))
    assert outcome == {"status": "denied", "text": "Stopped by the user."}
    assert "denied" in block.toggle.text() and len(conv.messages) == 2


def test_a_tool_round_trip_is_saved_and_reopens(history_app, loop, qtbot):
    """The history keeps the turn: the question, the reply that called (its text, empty
    here, its call and the call's result), the reply after the result; a restart reopens
    the chat with them, the call shown as its block again."""
    window = history_app.start()
    tab = tool_tab(window, loop)
    conv = ask(tab, loop)
    qtbot.mouseClick(block_of(tab, 1).allow_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: not conv.is_busy, timeout=60)
    final = conv.messages[2].content
    session = conv.session_id
    calls, results = conv.messages[1].tool_calls, dict(conv.messages[1].tool_results)
    prompt = conv.prompt_messages()
    history_app.stop()
    window = history_app.start()
    again = window.current_tab().conversation  # the chat in front comes back in front
    assert again.session_id == session
    assert [m.role for m in again.messages] == ["user", "assistant", "assistant"]
    assert again.messages[2].content == final
    # the call and its result come back too: the same block, folded, nothing to answer
    reply = again.messages[1]
    assert (reply.tool_calls, reply.tool_results) == (calls, results)
    block = block_of(window.current_tab(), 1)
    assert block.call_id == calls[0]["id"]
    assert "done" in block.toggle.text() and block.ask.isHidden()
    assert block.result.text() == results[calls[0]["id"]]["text"]
    assert block.details.isHidden()  # a result folds, as when it arrived
    assert again.prompt_messages() == prompt  # the next turn reads the same chat
