"""python -m engine.loader fetch | info [source] | export DEST [--model SOURCE]

(The loader's timings: `python -m bench.loader`, from a checkout.)"""

from __future__ import annotations

import argparse
import sys

from engine.preload import ensure_preloads

TEST_PROMPT = "What is the capital of France?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.loader")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="download the bundled model (once) and print its path")
    info = sub.add_parser("info", help="load a model and describe it")
    info.add_argument("source", nargs="?", default="bundled")
    q = info.add_mutually_exclusive_group()
    q.add_argument("--quantized", dest="quantized", action="store_true", default=None)
    q.add_argument("--float32", dest="quantized", action="store_false")
    export = sub.add_parser("export", help="write the loaded model as an mlx-lm directory "
                            "(the weights the engine runs, e.g. for mlx_lm.server)")
    export.add_argument("dest")
    export.add_argument("--model", default="bundled")
    args = parser.parse_args(argv)

    from engine.loader import ModelLoadError, bundled_model_path

    try:
        if args.cmd == "fetch":
            print(bundled_model_path(fetch=True))
            return 0
        ensure_preloads()  # before mlx is imported; re-execs at most once
        import time

        from engine.blas import blas_summary
        from engine.loader import load_model

        if args.cmd == "export":
            from pathlib import Path

            from engine.loader.export_dir import save_mlx_dir

            print(save_mlx_dir(load_model(args.model), Path(args.dest).expanduser()))
            return 0

        t0 = time.perf_counter()
        lm = load_model(args.source, quantized=args.quantized)
        load_s = time.perf_counter() - t0
        ids = lm.tokenizer.apply_chat_template([{"role": "user", "content": TEST_PROMPT}],
                                               add_generation_prompt=True)
        print(f"description:    {lm.description}")
        print(f"source:         {lm.source}")
        print(f"context length: {lm.context_length}")
        eos = ", ".join(f"{i} {lm.tokenizer.convert_ids_to_tokens(i)!r}"
                        for i in sorted(lm.eos_token_ids))
        print(f"eos ids:        {eos}")
        print(f"test prompt:    {TEST_PROMPT!r} -> {len(ids)} tokens (chat template)")
        print(f"loaded in:      {load_s:.2f} s")
        print(blas_summary())
        return 0
    except ModelLoadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
