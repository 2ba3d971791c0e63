"""What batch invariance costs (issue #25): the engine with it (the default) and with
BATCHCHAT_INVARIANT=0 (the size-dependent kernel choice of before), alternated in one run.

    python -m bench.invariance [--rounds 2] [--long-tokens 8000] [--model bundled]
                                      [--before-dir CHECKOUT]

With --before-dir, "before" is another checkout (e.g. the commit before issue #25, built
with `python -m engine.native build` there) run with the same interpreter, instead of this
tree with BATCHCHAT_INVARIANT=0.

Each round runs, in separate processes, once per mode (order swapped every round):
`python -m bench --scenarios solo,offline --concurrency 16,32` (solo decode tok/s,
background output tok/s at 16 and 32 concurrent requests) and
`python -m bench.long_prompt` (time to the first token of one long prompt). Prints
each figure's median per mode and the ratio invariant / before.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MODES = {"invariant": "1", "before": "0"}
_before_dir: str | None = None


def _env(mode: str) -> dict[str, str]:
    return {**os.environ, "BATCHCHAT_INVARIANT": MODES[mode]}


def _cwd(mode: str) -> str | None:
    return _before_dir if mode == "before" else None


def _engine_bench(mode: str, model: str, new_tokens: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "bench", "--model", model,
                        "--scenarios", "solo,offline", "--concurrency", "16,32",
                        "--repeats", "1", "--new-tokens", str(new_tokens),
                        "--offline-priority", "background", "--out", out],
                       env=_env(mode), cwd=_cwd(mode), check=True, capture_output=True)
        data = json.loads((Path(out) / "bench.json").read_text())
    figures = {"solo decode tok/s": data["solo"]["engine_decode_tps"]}
    for row in data["offline"]:
        figures[f"{row['concurrency']} concurrent output tok/s"] = row["engine_output_tps"]
    return figures


def _long_prompt(mode: str, model: str, tokens: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-m", "bench.long_prompt", "--model", model,
                           "--tokens", str(tokens)],
                          env=_env(mode), cwd=_cwd(mode), check=True, capture_output=True,
                          text=True)
    seconds = re.search(r"first token after ([0-9.]+) s", done.stdout)
    if seconds is None:
        raise RuntimeError(f"no time in long_prompt's output: {done.stdout!r}")
    return {f"{tokens}-token prompt, first token s": float(seconds.group(1))}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bundled")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--long-tokens", type=int, default=8000, help="0: skip the long prompt")
    p.add_argument("--before-dir", default=None, help="another checkout as 'before'")
    args = p.parse_args(argv)
    global _before_dir
    _before_dir = args.before_dir
    seen: dict[str, dict[str, list[float]]] = {m: {} for m in MODES}
    for r in range(args.rounds):
        order = list(MODES) if r % 2 == 0 else list(reversed(MODES))
        for mode in order:
            figures = _engine_bench(mode, args.model, args.new_tokens)
            if args.long_tokens:
                figures |= _long_prompt(mode, args.model, args.long_tokens)
            for name, value in figures.items():
                seen[mode].setdefault(name, []).append(value)
            print(f"round {r + 1} {mode}: " + ", ".join(f"{k} {v:.2f}" for k, v in
                                                       figures.items()), flush=True)
    print(f"\n{'figure':40s} {'invariant':>10s} {'before':>10s} {'ratio':>7s}  (medians of "
          f"{args.rounds} runs each; before: "
          f"{args.before_dir or 'BATCHCHAT_INVARIANT=0'})")
    for name, values in seen["invariant"].items():
        a, b = statistics.median(values), statistics.median(seen["before"][name])
        print(f"{name:40s} {a:10.2f} {b:10.2f} {a / b:6.3f}x")


if __name__ == "__main__":
    main()
