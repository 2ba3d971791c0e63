"""Screenshots for docs/app.md (issue #49): a reasoning model's reply with its thinking
block, folded ("Thought for … · N tokens") and opened, and the tab's Thinking settings;
light and dark, 1200×780 and 900×600. Run under Xvfb:

    Xvfb :7 -screen 0 1400x900x24 &
    DISPLAY=:7 python -m tools.screenshots.thinking --out docs

The model is the tests' tiny random-weight "thinking" llama (tests/reasoning_model.py,
Qwen3's real template and its <think> tokens); its own text is noise, so this scene puts a
grammar on its replies that spells out a readable thought and answer: the text is staged,
the app's handling of it (split, block, stats, history) is the real one."""

from __future__ import annotations

import asyncio

from tools.app_start import (
    arguments,
    open_window,
    out_dir,
    qt_app,
    run,
    scratch_settings,
    shot,
    wait,
)

SIZES = ((1200, 780), (900, 600))
THOUGHT = ("The user asks for 17 × 24. Split it: 17 × 20 = 340 and 17 × 4 = 68. "
           "Together 340 + 68 = 408. Check: 24 × 17 = 240 + 168 = 408. Good.")
ANSWER = "17 × 24 = **408**  (17 × 20 = 340, plus 17 × 4 = 68)."


def staged(engine) -> None:
    """Every reply of `engine` spelled as THOUGHT then ANSWER (the tiny model's own text is
    noise)."""
    import json
    from dataclasses import replace

    from engine.grammars import lark_grammar

    grammar = lark_grammar(f"start: <think> {json.dumps(chr(10) + THOUGHT + chr(10))} "
                           f"</think> {json.dumps(chr(10) * 2 + ANSWER)}\n")
    submit = engine.submit

    def spelled(*args, params=None, **kw):
        params = (dict(params) | {"grammar": grammar} if isinstance(params, dict)
                  else replace(params, grammar=grammar))
        return submit(*args, params=params, **kw)

    engine.submit = spelled


def main() -> None:
    args = arguments().parse_args()
    out = out_dir(args)

    from app.context import AppContext
    from engine import Engine, EngineConfig
    from tests.reasoning_model import QWEN3, thinking_tiny

    _app, loop = qt_app("thinking_shots", stylesheet=True)
    settings = scratch_settings()
    ctx = AppContext.create(settings=settings)
    window = open_window(ctx, SIZES[0])

    async def scene() -> None:
        tiny = thinking_tiny(seed=7, template=QWEN3, quantized=False)
        engine = Engine(tiny.model, tiny.tokenizer, eos_token_ids=sorted(tiny.eos_token_ids),
                        context_length=tiny.context_length, config=EngineConfig(),
                        description="tiny thinking model (Qwen3 template)")
        staged(engine)
        await ctx.bridge.use_engine(engine, "tiny-thinking")
        tab = window.current_tab()
        window.set_tab_title(tab, "Thinking")
        tab.panel.fields["max_tokens"].setValue(400)
        tab.panel.reasoning.effort.setCurrentIndex(tab.panel.reasoning.effort.findData("high"))
        tab.send_text("What is 17 × 24?")
        await wait(lambda: not tab.conversation.is_busy)
        widget = tab.messages.widgets[-1]
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                for opened in (False, True):
                    widget.thinking.toggle.setChecked(opened)
                    await asyncio.sleep(0.4)
                    name = "open" if opened else "folded"
                    shot(window, out / f"screenshot-thinking-{name}-{theme}-{w}.png")
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
