"""`python -m bench.tied_head_ttft [REPEATS] [gemma2|granite]`: the first token of one
512-token prompt on a random-weight Gemma 2 (tied, soft-capped) or untied Granite (logits
scaled) (hidden 1024, 6 layers, a 32,768-token vocabulary, 4-bit), with the engine's found
head (after: a prompt chunk's logits for its last position only) and without it (before:
cpu_arch_layers.add_tied_head / finish_untied_head off, so ModelRunner finds no output head
and the chunk makes every position's logits), alternated before after after before."""

import sys
import time
from dataclasses import replace

import mlx.core as mx
import mlx.nn as nn

from engine import Engine, EngineConfig, SamplingParams, cpu_arch_layers
from engine.preload import ensure_preloads
from tests.gguf_models import CASES, build_model
from tests.tiny_model import make_tokenizer


def first_token(model, tokenizer) -> tuple[float, float]:
    """Wall and process CPU seconds to the first token of a 512-token prompt."""
    engine = Engine(model, tokenizer, eos_token_ids=[], context_length=4096,
                    config=EngineConfig(max_concurrent=1))
    got: list = []
    t0, c0 = time.perf_counter(), time.process_time()
    stream = engine.submit(prompt_tokens=[(i * 7) % 250 + 3 for i in range(512)],
                           params=SamplingParams(max_tokens=1))
    stream.listen(lambda e: got.append(e) if e.token is not None else None)
    while not got:
        engine.step()
    return time.perf_counter() - t0, time.process_time() - c0


def main(repeats: int, arch: str = "gemma2") -> None:
    ensure_preloads()
    cfg = {**CASES[arch].config, "hidden_size": 1024, "num_hidden_layers": 6,
           "intermediate_size": 2816, "num_attention_heads": 8, "num_key_value_heads": 2,
           "head_dim": 128, "query_pre_attn_scalar": 128, "vocab_size": 32768,
           "max_position_embeddings": 4096}
    model = build_model(replace(CASES[arch], config=cfg), seed=1)
    nn.quantize(model, group_size=32, bits=4)
    mx.eval(model.parameters())
    tokenizer = make_tokenizer()
    switch = "add_tied_head" if arch == "gemma2" else "finish_untied_head"
    ours = getattr(cpu_arch_layers, switch)
    res: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for _ in range(repeats):
        for mode in ("before", "after", "after", "before"):
            setattr(cpu_arch_layers, switch, (lambda t: False) if mode == "before" else ours)
            res[mode].append(first_token(model, tokenizer))
    setattr(cpu_arch_layers, switch, ours)
    for mode, runs in res.items():
        w, c = sorted(x[0] for x in runs), sorted(x[1] for x in runs)
        print(f"{mode}: TTFT median {w[len(w) // 2]:.3f} s (min {w[0]:.3f}, max {w[-1]:.3f}); "
              f"CPU {c[len(c) // 2]:.3f} s (min {c[0]:.3f}, max {c[-1]:.3f}); {len(runs)} runs")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2, *sys.argv[2:3])
