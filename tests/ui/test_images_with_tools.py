"""A tab with tools (the test's MCP server) that sends a pasted image to a vision model on
the local engine (#52): the engine cannot place an image in a prompt the tool template
renders, so the send is refused at the input with why, nothing is added, and the draft's
image stays; without the tools the same image is answered."""

from __future__ import annotations

from typing import Any

from app.bridge import EngineBridge
from engine import Engine
from tests.ui.conftest import run_until
from tests.ui.test_images_ui import _paste_image, _read
from tests.ui.test_mcp_tab import tool_tab
from tests.vision_models import make_tiny_vlm, png_bytes


def test_an_image_with_tools_is_refused_with_why(loop: Any, make_window: Any, qtbot: Any,
                                                 tmp_path: Any) -> None:
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "vlm", "smolvlm")))
    bridge = EngineBridge(loader=lambda source: engine)
    loop.run_until_complete(bridge.use_engine(engine, "tiny-vlm"))
    try:
        window = make_window(bridge)
        tab = tool_tab(window, loop, choice="auto")
        tab.panel.fields["max_tokens"].setValue(4)
        _paste_image(qtbot, tab, png_bytes((200, 10, 10)))
        _read(loop, tab)
        tab.send_text("What colour is it?")
        run_until(loop, lambda: "with tools" in tab.notice.text()
                  and not tab.conversation.is_busy, timeout=60)
        assert "image processor" in tab.notice.text()  # why
        assert [m.role for m in tab.conversation.messages if m.role == "assistant"
                and m.content] == []
        assert len(tab.image_chips.images()) == 1  # the draft's image stays
        tab.panel.tools.set_params({"mcp_servers": [], "tool_choice": "auto"})
        tab.panel.tools.changed.emit()
        assert tab.send_text("What colour is it?")
        run_until(loop, lambda: not tab.conversation.is_busy
                  and tab.conversation.messages
                  and tab.conversation.messages[-1].role == "assistant"
                  and tab.conversation.messages[-1].finish_reason is not None, timeout=60)
        assert tab.conversation.messages[-1].stats.generated_tokens == 4
    finally:
        loop.run_until_complete(bridge.shutdown(timeout=2.0))
