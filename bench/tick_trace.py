"""`python -m bench.tick_trace`: each tick's structure, to compare two trees.

For a refactor of how a tick runs (issue #47), which must not change what runs when: on the
bundled model, in step mode, a dozen small scenarios (a lone stream, a burst, staggered
arrivals, n-gram drafts alone and batched, grammar rows with and without drafts, a batch
running ahead, and the same without the ragged pass, as on a GPU) print one line a tick:
the model calls and decode-batch calls in order, where the early hand-overs came and how
many events each carried, the events left at the tick's end, whether the next step was
started ahead, and the decode rows; then a hash of every stream's tokens. The budget does
not follow measured times here and the speculation costs are fixed, so the trace is the
same run after run on one tree; diff two trees' output:

    cd BEFORE && PYTHONPATH=. python -m bench.tick_trace > /tmp/before.txt
    cd AFTER && PYTHONPATH=. python -m bench.tick_trace > /tmp/after.txt
    diff /tmp/before.txt /tmp/after.txt
"""

from __future__ import annotations

from typing import Any

from engine.preload import ensure_preloads

SPIED = {"runner": ("decode", "prefill", "prefill_many", "ragged", "verify", "verify_rows"),
         "batch": ("roll_back_ahead", "join")}


def _spy(obj: Any, name: str, log: list[str]) -> None:
    real = getattr(obj, name)

    def called(*args: Any, **kwargs: Any) -> Any:
        log.append(name)
        return real(*args, **kwargs)

    setattr(obj, name, called)


def fixed_costs() -> None:
    """Speculation's step costs from a formula, not the clock (the same drafts each run)."""
    from engine.speculation import StepCosts

    plain, checked = StepCosts.observe_plain, StepCosts.observe_checked
    StepCosts.observe_plain = (  # type: ignore[method-assign]
        lambda self, rows, s, most: plain(self, rows, 0.02 + 0.01 * rows, most))
    StepCosts.observe_checked = (  # type: ignore[method-assign]
        lambda self, rows, d, s: checked(self, rows, d, 0.02 + 0.01 * rows + 0.002 * d))


def trace(loaded: Any, label: str, speculative: str, prompts: list[list[int]], tokens: int,
          every: int = 0, grammar: Any = None, **config: Any) -> None:
    """Run `prompts` (all at once, or one every `every` ticks; every other one with
    `grammar`) and print the trace."""
    from engine.config import EngineConfig
    from engine.engine import Engine
    from engine.sampling import SamplingParams
    from engine.worker import apply

    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=17, speculative=speculative, **config))
    core = engine._core  # (a bench may not import engine.testing: its internals directly)
    core.scheduler.budget.observe = lambda *a, **k: None  # the plan must not follow times
    log: list[str] = []
    for name in SPIED["runner"]:
        _spy(core.runner, name, log)
    for name in SPIED["batch"]:
        _spy(core.batch, name, log)
    pending, streams, lines, tick = list(prompts), [], [], 0

    def hand_over(events: list[Any]) -> None:
        log.append(f"hand{len(events)}")
        engine._deliver(events)

    while pending or engine.has_work():
        while pending and (not every or tick % every == 0):
            streams.append(engine.submit(prompt_tokens=pending.pop(0), params=SamplingParams(
                max_tokens=tokens, temperature=0,
                grammar=grammar if len(streams) % 2 == 0 else None)))
            if every:
                break
        log.clear()
        apply(core, engine._inbox.drain())  # one tick as the engine thread runs it
        left = core.step(hand_over=hand_over)
        engine._deliver(left)
        batch = core.batch
        lines.append(f"  {tick}: {' '.join(log)} | end {len(left)} "
                     f"ahead={batch.ahead is not None} rows={len(batch.seqs)} "
                     f"batched={batch.is_batched}")
        tick += 1
    print(label, "ticks", tick, "tokens", hash(tuple(tuple(s.tokens) for s in streams)))
    print("\n".join(lines))


def main() -> None:
    ensure_preloads()
    from engine.grammars import json_schema_grammar
    from engine.loader import load_model
    from engine.model_runner import ModelRunner

    from . import scenarios
    from .constrained import SCHEMA
    from .speculative import code_prompts

    loaded = load_model("bundled")
    fixed_costs()
    from engine.engine import Engine

    templating = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                        context_length=loaded.context_length)
    stories = [scenarios.chat_tokens(templating, t) for t in scenarios.prompt_texts(8)]
    code = [scenarios.chat_tokens(templating, t) for t in code_prompts()[:4]]
    schema = json_schema_grammar(SCHEMA)
    trace(loaded, "solo", "off", stories[:1], 24)
    trace(loaded, "burst4", "off", stories[:4], 16)
    trace(loaded, "staggered", "off", stories[:5], 24, every=3)
    trace(loaded, "spec_solo", "ngram", code[:1], 48)
    trace(loaded, "spec_batch", "ngram", code, 48, every=2)
    trace(loaded, "grammar", "off", stories[:4], 24, every=2, grammar=schema)
    trace(loaded, "grammar_spec", "ngram", code[:3], 24, every=2, grammar=schema)
    trace(loaded, "batch_ahead", "off", stories[:4], 24, every=3, batch_run_ahead=True)
    ModelRunner.ragged_ok = property(lambda self: False)  # type: ignore[method-assign]
    trace(loaded, "apart_staggered", "off", stories[:5], 24, every=3)
    trace(loaded, "apart_spec", "ngram", code, 48, every=2)
    trace(loaded, "apart_ahead_spec", "ngram", code, 48, every=2, batch_run_ahead=True)


if __name__ == "__main__":
    main()
