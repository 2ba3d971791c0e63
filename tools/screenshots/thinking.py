"""Screenshots for docs/app.md (issue #49): a reasoning model's reply with its thinking
block, folded ("Thought for … · N tokens") and opened, and the tab's Thinking settings;
with `--live`, the reply while it still thinks ("Thinking…", folded and opened to read
along); light and dark, 1200×780 and 900×600. Run under Xvfb:

    Xvfb :7 -screen 0 1400x900x24 &
    DISPLAY=:7 python -m tools.screenshots.thinking --out docs
    DISPLAY=:7 python -m tools.screenshots.thinking --out docs --live

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
# the live scene's thought: long enough to still be thinking after all its shots
LONG_THOUGHT = (
    "The user wants the train's average speed over the whole trip. It goes 120 km in 1.5 h, "
    "then 80 km in 0.5 h, then waits 15 minutes, then 60 km in 1 h. Averages of the legs "
    "would be wrong: 80, 160 and 60 km/h do not weigh the time spent in each. Total "
    "distance: 120 + 80 + 60 = 260 km. Total time: 1.5 + 0.5 + 0.25 + 1 = 3.25 h. Does "
    "the wait count? The question says the whole trip, so yes: 260 / 3.25 = 80 km/h. "
    "Without the wait it would be 260 / 3 = 86.7 km/h; worth mentioning both. Check the "
    "division: 3.25 × 80 = 260. Good. Units are fine. Now how to explain it briefly...")
STEP_S = 0.03  # the live scene's pause before each model step, so the thought streams


def staged(engine, thought: str = THOUGHT) -> None:
    """Every reply of `engine` spelled as `thought` then ANSWER (the tiny model's own text
    is noise)."""
    import json
    from dataclasses import replace

    from engine.grammars import lark_grammar

    grammar = lark_grammar(f"start: <think> {json.dumps(chr(10) + thought + chr(10))} "
                           f"</think> {json.dumps(chr(10) * 2 + ANSWER)}\n")
    submit = engine.submit

    def spelled(*args, params=None, **kw):
        params = (dict(params) | {"grammar": grammar} if isinstance(params, dict)
                  else replace(params, grammar=grammar))
        return submit(*args, params=params, **kw)

    engine.submit = spelled


def slowed() -> None:
    """The tiny model paused STEP_S before each step (it otherwise thinks the whole staged
    thought in well under a second): the live scene's reply is still thinking while it is
    shot. Decoding is not compiled in that scene, so each step calls the model."""
    import time

    from mlx_lm.models import llama

    step = llama.Model.__call__

    def paused(self, *args, **kw):
        time.sleep(STEP_S)
        return step(self, *args, **kw)

    llama.Model.__call__ = paused


def main() -> None:
    parser = arguments()
    parser.add_argument("--live", action="store_true",
                        help="shoot the reply while it thinks (screenshot-thinking-live-*)")
    args = parser.parse_args()
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
        if args.live:
            slowed()
        engine = Engine(tiny.model, tiny.tokenizer, eos_token_ids=sorted(tiny.eos_token_ids),
                        context_length=tiny.context_length,
                        config=EngineConfig(compiled_decode=not args.live),
                        description="tiny thinking model (Qwen3 template)")
        staged(engine, LONG_THOUGHT if args.live else THOUGHT)
        await ctx.bridge.use_engine(engine, "tiny-thinking")
        tab = window.current_tab()
        window.set_tab_title(tab, "Thinking")
        tab.panel.fields["max_tokens"].setValue(900 if args.live else 400)
        tab.panel.reasoning.effort.setCurrentIndex(tab.panel.reasoning.effort.findData("high"))
        if args.live:
            tab.send_text("A train goes 120 km in 1.5 h, 80 km in 0.5 h, waits 15 min, then "
                          "60 km in 1 h. Its average speed?")
            await live_shots(tab)
            return
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

    async def live_shots(tab) -> None:
        """The reply while it thinks: "Thinking…" folded, then opened to read along."""
        from app.reasoning.reply import thinking_live

        reply = tab.conversation.messages
        await wait(lambda: len(reply) == 2 and len(reply[-1].reasoning) > 160)
        widget = tab.messages.widgets[-1]
        for theme in ("light", "dark"):
            window.set_theme(theme)
            for w, h in SIZES:
                window.resize(w, h)
                for opened in (False, True):
                    widget.thinking.toggle.setChecked(opened)
                    await asyncio.sleep(0.4)
                    if not thinking_live(reply[-1]):
                        raise SystemExit("the reply stopped thinking before its shots")
                    name = "open" if opened else "folded"
                    shot(window, out / f"screenshot-thinking-live-{name}-{theme}-{w}.png")
        tab.conversation.stop()
        await wait(lambda: not tab.conversation.is_busy)
        await ctx.bridge.shutdown(3.0)

    run(loop, scene())


if __name__ == "__main__":
    main()
