"""Memory of 16 chats x 4,000 tokens of history at float, 8-bit and 4-bit KV (issue #54).

    python -m bench.kv_bits_memory [--chats 16] [--history 4000] [--reply 32]

Each setting in a fresh process: the bundled model, an engine with EngineConfig.kv_bits,
`--chats` slots and a KV budget of 4 GiB (room for every chat's float KV, so nothing is
evicted and the settings hold the same chats); `--chats` prompts of `--history` tokens (the
repo's docs, each chat from its own offset: no shared prefix) submitted at once, `--reply`
tokens each, greedy. Prints, per setting: the KV bytes a token, the KV held at the end (the
chats' cached prefixes, engine counters), the process's peak and final RSS (sampled after
every tick), the wall time and the output tokens a second.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

BUDGET = 4 << 30


def one(bits: int | None, chats: int, history: int, reply: int) -> dict:
    from app.process_memory import resident_bytes
    from engine import Engine, EngineConfig, SamplingParams
    from engine.loader import load_model
    from engine.preload import ensure_preloads

    from .gguf_parity import default_text

    ensure_preloads()
    loaded = load_model("bundled")
    text = loaded.tokenizer.encode(default_text())
    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=[],
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=chats, kv_bits=bits,
                                        kv_budget_bytes=BUDGET))
    step = max(1, (len(text) - history) // chats)
    prompts = [text[i * step:i * step + history] for i in range(chats)]
    rss_start = resident_bytes(os.getpid()) or 0
    t = time.perf_counter()
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=reply))
               for p in prompts]
    peak = rss_start
    while engine.has_work():
        engine.step()
        peak = max(peak, resident_bytes(os.getpid()) or 0)
    wall = time.perf_counter() - t
    stats = engine.stats()
    assert all(s.finish_reason == "length" for s in streams)
    mib = 1 << 20
    return {"kv": "float" if bits is None else f"{bits}-bit",
            "kv_bytes_a_token": stats.kv_bytes_per_token,
            "tokens_a_mib": round(stats.kv_tokens_per_mib, 1),
            "kv_held_mib": round(stats.prefix_cached_bytes / mib, 1),
            "cached_tokens": stats.prefix_cached_tokens,
            "rss_start_mib": round(rss_start / mib), "rss_peak_mib": round(peak / mib),
            "rss_end_mib": round((resident_bytes(os.getpid()) or 0) / mib),
            "wall_s": round(wall, 1), "output_tok_s": round(chats * reply / wall, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kv_bits_memory",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=16)
    parser.add_argument("--history", type=int, default=4000)
    parser.add_argument("--reply", type=int, default=32)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a child's setting
    args = parser.parse_args(argv)
    if args.one is not None:
        bits = None if args.one == "float" else int(args.one)
        print(json.dumps(one(bits, args.chats, args.history, args.reply)), flush=True)
        return 0
    for setting in ("float", "8", "4"):
        subprocess.run([sys.executable, "-m", "bench.kv_bits_memory", "--one", setting,
                        "--chats", str(args.chats), "--history", str(args.history),
                        "--reply", str(args.reply)], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
