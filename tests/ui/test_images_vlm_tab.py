"""A chat tab on a tiny vision-language model (issue #52; tests/vision_models.py: random
weights through mlx-vlm's classes): a pasted image is counted under the box and sent with
the message (the local engine sees images, so nothing is refused), the reply streams, and
Regenerate gives the same greedy answer with the image's prompt read from the prefix
cache."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from app.bridge import EngineBridge
from engine import Engine
from tests.ui.conftest import run_until
from tests.ui.test_images_ui import _paste_image, _read
from tests.vision_models import make_tiny_vlm, png_bytes


def test_a_tab_on_a_vision_model_sends_a_pasted_image(loop: Any, make_window: Any, qtbot: Any,
                                                      tmp_path: Any) -> None:
    engine = Engine.load(str(make_tiny_vlm(tmp_path / "vlm", "smolvlm")))
    bridge = EngineBridge(loader=lambda source: engine)
    loop.run_until_complete(bridge.use_engine(engine, "tiny-vlm"))
    try:
        window = make_window(bridge)
        tab = window.current_tab()
        tab.panel.fields["max_tokens"].setValue(6)
        tab.panel.fields["temperature"].setValue(0.0)
        qtbot.keyClicks(tab.input, "What colour is it?")
        run_until(loop, lambda: tab.token_count.current and tab.token_count.size is not None)
        text_only = tab.token_count.size.tokens
        _paste_image(qtbot, tab, png_bytes((200, 10, 10)))
        _read(loop, tab)
        # the count under the box takes the image's tokens in (the model's processor)
        run_until(loop, lambda: tab.token_count.current and tab.token_count.size is not None
                  and tab.token_count.size.tokens != text_only)
        [image] = tab.image_chips.images()
        system = [{"role": "system", "content": tab.conversation.system_prompt}] \
            if tab.conversation.system_prompt.strip() else []
        asked = [*system, {"role": "user", "content": [
            {"type": "text", "text": "What colour is it?"}, {"type": "image"}]}]
        assert tab.token_count.size.tokens == len(engine.prompt_tokens(asked,
                                                                       images=[image.data]))
        qtbot.keyClick(tab.input, Qt.Key.Key_Return)
        assert not tab.notice.isVisible(), tab.notice.text()
        run_until(loop, lambda: not tab.conversation.is_busy, timeout=60)
        user, reply = tab.conversation.messages
        assert len(user.images) == 1 and len(tab.messages.widgets[0].images.thumbs) == 1
        assert reply.finish_reason == "length" and reply.stats.generated_tokens == 6
        assert tab.regenerate()
        run_until(loop, lambda: not tab.conversation.is_busy, timeout=60)
        again = tab.conversation.messages[-1]
        assert again is not reply and again.content == reply.content  # greedy: the same
        assert again.stats.cached_tokens > 0  # the image's prompt from the prefix cache
    finally:
        loop.run_until_complete(bridge.shutdown(timeout=2.0))
