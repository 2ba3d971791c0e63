"""`python -m bench.moe_ttft ARCH [REPEATS]`: one 512-token prompt's first token on a
random-weight MoE GGUF (bench.arch_decode's: hidden 1024, 6 layers, 32 experts of which 4
a token, Q4_0), its experts on mlx-lm's gather_qmm (before: engine/native/switch_layers.py
off) and grouped by expert on the packed kernel (after), in one process, alternated before
after after before."""

import sys
import tempfile
import time
from pathlib import Path

from bench.arch_decode import write
from engine import Engine, EngineConfig, SamplingParams
from engine.loader import load_model
from engine.native import switch_layers
from engine.preload import ensure_preloads


def first_token(loaded) -> tuple[float, float]:
    """Wall and process CPU seconds to the first token of a 512-token prompt."""
    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=[], context_length=4096,
                    config=EngineConfig(max_concurrent=1))
    got: list = []
    t0, c0 = time.perf_counter(), time.process_time()
    stream = engine.submit(prompt_tokens=[(i * 7) % 250 + 3 for i in range(512)],
                           params=SamplingParams(max_tokens=1))
    stream.listen(lambda e: got.append(e) if e.token is not None else None)
    while not got:
        engine.step()
    return time.perf_counter() - t0, time.process_time() - c0


def main(arch: str, repeats: int) -> None:
    ensure_preloads()
    with tempfile.TemporaryDirectory() as folder:
        loaded = load_model(str(write(arch, 1024, 6, Path(folder), 32, 4)))
        ours = switch_layers.engine_module
        res: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        for _ in range(repeats):
            for mode in ("before", "after", "after", "before"):
                switch_layers.engine_module = (lambda m, s: None) if mode == "before" else ours
                res[mode].append(first_token(loaded))
        switch_layers.engine_module = ours
    for mode, runs in res.items():
        w, c = sorted(r[0] for r in runs), sorted(r[1] for r in runs)
        print(f"{arch} 512-token prompt, {mode}: TTFT median {w[len(w) // 2]:.3f} s "
              f"({w[0]:.3f}-{w[-1]:.3f}); CPU {c[len(c) // 2]:.3f} s ({c[0]:.3f}-{c[-1]:.3f}); "
              f"{len(runs)} runs")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2)
