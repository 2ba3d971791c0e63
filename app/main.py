"""Entry point: `python -m app` (or `batchchat`)."""

from __future__ import annotations

import argparse
import asyncio

from engine.blas import ensure_fast_blas


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="batchchat", description=__doc__)
    p.add_argument("--model", default="bundled",
                   help='"bundled", a .gguf file, an mlx-lm model directory or a repo id')
    p.add_argument("--cli", action="store_true", help="terminal chat instead of the window")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-tokens", type=int, default=512)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ensure_fast_blas()  # before MLX loads: re-executes with OpenBLAS preloaded on Linux CPU
    args = parse_args(argv)
    from app.cli_chat import chat
    from engine import SamplingParams

    params = SamplingParams(temperature=args.temperature, top_p=0.95,
                            max_tokens=args.max_tokens)
    asyncio.run(chat(args.model, params))
    return 0
