"""`python -m bench.tick_gate SCENARIO`: one engine scenario on the bundled model, one figure.

A gate for changes to how a tick runs (issue #47): run it on the tree before and after,
alternated, and compare the figures (docs/performance.md has the commands). Each run is
short (~10-30 s with the model's load) and prints one line, `SCENARIO FIGURE UNIT`, where
higher is better for tok/s and lower for s:

- solo: one interactive stream, 96 tokens, greedy: output tok/s (median of 5);
- offline16: 16 background prompts at once, 64 tokens each: output tok/s (median of 2);
- chats: 8 chats x 3 turns, 32-token replies, 0.2 s think time: output tok/s;
- burst: 16 interactive prompts at once, 32 tokens each: output tok/s (median of 2);
- hol: 8 streams decode, a 1,000-token prompt arrives: its time to first token (s,
  median of 2);
- spec_code: n-gram speculation on code-copying prompts, 3 streams one after another then
  4 at once, 128 tokens, greedy: output tok/s;
- constrained: 16 rows of which 8 carry a JSON schema, step mode, 32 tokens: decode tok/s
  (median of 2).

`--kv-bits 8` (or 4) runs the scenario with quantized KV (EngineConfig.kv_bits, issue #54).

The scenarios are bench/scenarios.py's, bench/multiturn.py's, bench/speculative.py's
prompts and bench/constrained.py's `run`, cut short.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from typing import Any

from engine.preload import ensure_preloads

SCENARIOS = ("solo", "offline16", "chats", "burst", "hol", "spec_code", "constrained")
_CONFIG: dict[str, Any] = {}  # every engine's extra settings (--kv-bits)


def _engine(loaded: Any, eos: list[int] | None = None, **config: Any) -> Any:
    from engine.config import EngineConfig
    from engine.engine import Engine

    return Engine(loaded.model, loaded.tokenizer,
                  eos_token_ids=loaded.eos_token_ids if eos is None else eos,
                  context_length=loaded.context_length,
                  config=EngineConfig(max_queue=4096, **(_CONFIG | config)),
                  description=getattr(loaded, "description", ""))


async def _served(loaded: Any, name: str) -> tuple[float, str]:
    from . import scenarios
    from .chat_clients import EngineChat
    from .multiturn import many_chats
    from .speculative import code_prompts

    engine = _engine(loaded, max_concurrent=17,
                     speculative="ngram" if name == "spec_code" else "off")
    await engine.start()
    try:
        prompts = [scenarios.chat_tokens(engine, t) for t in scenarios.prompt_texts(16)]
        # warm-up: the first passes of a batch and a lone row
        await scenarios._engine_batch(engine, prompts[:2], 4)
        if name == "solo":
            runs = [await scenarios._engine_batch(engine, prompts[:1], 96, "interactive")
                    for _ in range(5)]
            return statistics.median(r["output_tps"] for r in runs), "tok/s"
        if name in ("offline16", "burst"):
            priority, tokens = (("background", 64) if name == "offline16"
                                else ("interactive", 32))
            runs = [await scenarios._engine_batch(engine, prompts, tokens, priority)
                    for _ in range(2)]
            return statistics.median(r["output_tps"] for r in runs), "tok/s"
        if name == "chats":
            out = await many_chats(EngineChat(engine), 8, 3, 32, 0.2)
            return out["output_tps"], "tok/s"
        if name == "hol":
            long_text = " ".join(scenarios.prompt_texts(16)) * 10
            long_prompt = scenarios.chat_tokens(engine, long_text)[:1000]
            ttfts = [(await scenarios.head_of_line(engine, prompts, long_prompt[i:], 160))
                     ["long_ttft_s"] for i in range(2)]  # (no prefix reused the second time)
            return statistics.median(ttfts), "s"
        if name == "spec_code":
            code = [scenarios.chat_tokens(engine, t) for t in code_prompts()]
            runs = [await scenarios._engine_batch(engine, [c], 128, "interactive")
                    for c in code[:3]]
            runs.append(await scenarios._engine_batch(engine, code[3:7], 128, "interactive"))
            return (sum(r["tokens"] for r in runs) / sum(r["wall_s"] for r in runs)), "tok/s"
    finally:
        await engine.shutdown()
    raise ValueError(name)


def _constrained(loaded: Any) -> tuple[float, str]:
    from .constrained import run

    # no end token: every row runs to max_tokens (bench/constrained.py)
    engine = _engine(loaded, max_concurrent=16, eos=[])
    run(engine, 16, 8, 4, "greedy")  # warm-up
    return statistics.median(run(engine, 16, 8, 32, "greedy")[0] for _ in range(2)), "tok/s"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--kv-bits"] and len(args) > 1 and args[1] in ("8", "4"):
        _CONFIG["kv_bits"] = int(args[1])
        args = args[2:]
    if len(args) != 1 or args[0] not in SCENARIOS:
        print(f"usage: python -m bench.tick_gate [--kv-bits 8|4] {{{','.join(SCENARIOS)}}}",
              file=sys.stderr)
        return 2
    name = args[0]
    ensure_preloads()
    from engine.loader import load_model

    loaded = load_model("bundled")
    figure, unit = (_constrained(loaded) if name == "constrained"
                    else asyncio.run(_served(loaded, name)))
    print(f"{name} {figure:.4f} {unit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
