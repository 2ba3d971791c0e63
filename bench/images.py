"""`python -m bench.images`: what two image requests cost eight text chats (issue #52).

On a small random-weight SmolVLM in mlx-vlm's format (tests/vision_models.py; no real VLM
weights are available offline; `--family` another of its families, or several, comma-
separated: gemma3's image rows share the tick's ragged pass with the text rows, while an
M-RoPE family's (qwen2_5_vl, qwen3_vl) run their passes apart: engine/vision/mrope.py,
ModelRunner.may_share), three phases, alternated `--rounds` times (A B C A B C ...):

- A, text alone: 8 text chats submitted at once, `--tokens` greedy tokens each;
- B, images arriving: the same 8 chats (other words, so no prefix is shared with A), and
  once every chat has its first token, 2 image requests (a different image each),
  processed off the loop as the API server does: their vision-tower pass and prefill run
  while the chats decode (what an image's prefill costs the others);
- C, image rows decoding: the 2 image requests first, and once both decode, the 8 chats,
  while the image rows go on decoding (`--image-tokens` each, more than the chats need):
  what an image row beside them costs every decode step of the chats.

Per phase: the text chats' inter-token latency p50 / p99 (gaps between a stream's tokens
as the asyncio loop sees them), their throughput (text tokens over the span from the first
chat's first token to the last chat's last; "all joined": from the last chat's first
token on, every chat decoding, no prompt left to prefill), the median of the engine's
decode-only ticks in that span (its telemetry: the step's time and its rows), the image
requests' time to first token, and
in C the share of the chats' span during which both image rows still decoded. The engine
has no end token here (a random model meets one at random), so every row writes its
max_tokens. Printed as
the median over rounds, with B's and C's ratios to A. A loaded machine makes single
figures noisy: read the ratios, over several rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from engine import Engine, EngineConfig, SamplingParams

TOPICS = ["lighthouses", "bees", "volcanoes", "trains", "tea", "rivers", "owls", "glass"]


def _chats(salt: str) -> list[list[dict]]:
    return [[{"role": "user", "content": f"Tell me about {t} ({salt})."}] for t in TOPICS]


def _asking(i: int) -> list[dict]:
    return [{"role": "user", "content": [{"type": "image"},
                                         {"type": "text", "text": f"What is in picture {i}?"}]}]


async def _phase(engine: Engine, tokens: int, salt: str, images: list[bytes], *,
                 images_first: bool = False, image_tokens: int = 0) -> dict:
    params = SamplingParams(max_tokens=tokens, temperature=0.0)
    image_params = SamplingParams(max_tokens=image_tokens or tokens, temperature=0.0)
    gaps: list[float] = []
    times: list[float] = []
    joined: list[float] = []  # each chat's first token
    firsts = asyncio.Event()  # every chat has its first token (B's images go then)
    decoding = asyncio.Event()  # every image request has its first token (C's chats go)
    started = 0
    ttft: list[float] = []
    image_ends: list[float] = []

    async def chat(messages: list[dict]) -> None:
        nonlocal started
        if images_first and images:
            await decoding.wait()
        last = None
        async for event in engine.submit(messages=messages, params=params):
            if event.token is None:
                continue
            now = time.perf_counter()
            if last is None:
                joined.append(now)
                started += 1
                if started == len(TOPICS):
                    firsts.set()
            else:
                gaps.append(now - last)
            last = now
            times.append(now)

    async def seen(i: int, image: bytes) -> None:
        if not images_first:
            await firsts.wait()
        t = time.perf_counter()
        # as the API server submits one: the processor's work off the loop first (the
        # submit finds it done: engine/vision/prepared.py), so the chats' gaps are the
        # engine's, not the loop's
        await asyncio.to_thread(engine.prompt_tokens, _asking(i), None, [image])
        stream = engine.submit(messages=_asking(i), params=image_params, images=[image])
        last = None
        async for event in stream:
            if event.token is not None:
                if last is None:
                    ttft.append(time.perf_counter() - t)
                    if len(ttft) == len(images):
                        decoding.set()
                last = time.perf_counter()
        decoding.set()  # an image request that wrote nothing does not hold the chats
        image_ends.append(last if last is not None else t)

    await asyncio.gather(*(chat(m) for m in _chats(salt)),
                         *(seen(i, image) for i, image in enumerate(images)))
    gaps.sort()
    start, end = min(times), max(times)
    span = end - start
    out = {"itl_p50_ms": 1000 * statistics.median(gaps),
           "itl_p99_ms": 1000 * gaps[int(0.99 * (len(gaps) - 1))],
           "text_tok_s": len(times) / span if span else 0.0,
           "steady_tok_s": _rate(times, max(joined), end),
           "image_ttft_ms": 1000 * max(ttft) if ttft else None, "beside": None}
    if images_first and images and span:
        out["beside"] = max(0.0, min(1.0, (min(image_ends) - start) / span))
    # the engine's own clock: its decode-only ticks while the chats ran (no prompt in them),
    # less swayed by the asyncio loop's delivery than the gaps
    ticks = [t for t in engine.telemetry() if start <= t.t <= end
             and t.prefill_tokens == 0 and t.decode_rows > 0]
    if ticks:
        out["tick_ms"] = 1000 * statistics.median(t.step_s for t in ticks)
        out["tick_rows"] = statistics.median(t.decode_rows for t in ticks)
    return out


async def main_async(args: argparse.Namespace) -> None:
    for family in args.family.split(","):
        await _family(args, family.strip())


async def _family(args: argparse.Namespace, family: str) -> None:
    from tests.vision_models import make_tiny_vlm, png_bytes

    folder = make_tiny_vlm(Path(tempfile.mkdtemp(prefix="bench-images-")) / family,
                           family, hidden=args.hidden, layers=args.layers,
                           vision_hidden=args.vision_hidden, vision_layers=args.vision_layers,
                           image_side=args.image_side, patch=args.patch)
    engine = _no_end_token(folder)
    probe = png_bytes((200, 30, 40), (300, 200))
    tokens_an_image = engine.vision.prepare(_asking(0), [probe]).token_ids.count(
        engine.vision.image_token_id)
    runner = engine._core.runner  # read only: how its image rows decode beside text rows
    passes = ("M-RoPE: image rows run their passes apart" if runner.positions is not None
              else "image rows share the ragged pass" if runner.ragged_ok
              else "no ragged pass")
    print(f"\nmodel: {family}, text {args.layers} layers x {args.hidden}, vision "
          f"{args.vision_layers} layers x {args.vision_hidden}, an image = "
          f"{tokens_an_image} tokens; {passes}; {engine.description}")
    image_tokens = args.image_tokens or 4 * args.tokens
    await engine.start()
    try:
        await _phase(engine, 4, "warm-up", [png_bytes((1, 2, 3), (64, 48))])
        await _phase(engine, 4, "warm-up-c", [png_bytes((3, 2, 1), (64, 48))],
                     images_first=True, image_tokens=8)
        results: dict[str, list[dict]] = {"A": [], "B": [], "C": []}
        for r in range(args.rounds):
            results["A"].append(await _phase(engine, args.tokens, f"a{r}", []))
            images = [png_bytes((200, 30 + r, 40), (300, 200)),
                      png_bytes((20, 180, 90 + r), (200, 300))]
            results["B"].append(await _phase(engine, args.tokens, f"b{r}", images))
            results["C"].append(await _phase(engine, args.tokens, f"c{r}", images,
                                             images_first=True, image_tokens=image_tokens))
            print(f"round {r + 1}: A {_line(results['A'][-1])} | B {_line(results['B'][-1])}"
                  f" | C {_line(results['C'][-1])}")
    finally:
        await engine.shutdown()
    med = {k: {f: statistics.median(x[f] for x in v if x.get(f) is not None)
               for f in v[0] if v[0].get(f) is not None} for k, v in results.items()}
    print(f"median of {args.rounds} rounds, {family}, 8 text chats x {args.tokens} tokens:")
    print(f"  A text alone:                 {_line(med['A'])}")
    print(f"  B text + 2 images arriving:   {_line(med['B'])}")
    print(f"  C text beside 2 image rows:   {_line(med['C'])}")
    for k in ("B", "C"):
        print(f"  {k} / A: ITL p50 {med[k]['itl_p50_ms'] / med['A']['itl_p50_ms']:.2f}, "
              f"ITL p99 {med[k]['itl_p99_ms'] / med['A']['itl_p99_ms']:.2f}, "
              f"text throughput {med[k]['text_tok_s'] / med['A']['text_tok_s']:.2f} "
              f"(all joined {med[k]['steady_tok_s'] / med['A']['steady_tok_s']:.2f})")


def _rate(times: list[float], start: float, end: float) -> float:
    """Tokens per second between `start` (excluded) and `end`."""
    n = sum(1 for t in times if start < t <= end)
    return n / (end - start) if end > start else 0.0


def _no_end_token(folder: Path) -> Engine:
    """Engine.load's engine without end tokens: a random model's greedy text meets one
    early and at random, so every row writes its max_tokens and each phase the same
    tokens (the tests' tiny engines do the same)."""
    from engine.loader import load_model

    config = EngineConfig(prefix_cache=False)
    loaded = load_model(str(folder), cpu=config.cpu)
    return Engine(loaded.model, loaded.tokenizer, eos_token_ids=[],
                  context_length=loaded.context_length, config=config,
                  description=loaded.description, notes=loaded.notes, vision=loaded.vision)


def _line(r: dict) -> str:
    out = (f"ITL p50 {r['itl_p50_ms']:.1f} ms, p99 {r['itl_p99_ms']:.1f} ms, "
           f"text {r['text_tok_s']:.0f} tok/s (all joined: {r['steady_tok_s']:.0f})")
    if r.get("image_ttft_ms") is not None:
        out += f", image TTFT {r['image_ttft_ms']:.0f} ms"
    if r.get("tick_ms") is not None:
        out += f", decode tick {r['tick_ms']:.1f} ms ({r['tick_rows']:.0f} rows)"
    if r.get("beside") is not None:
        out += f", image rows decoding {100 * r['beside']:.0f} % of it"
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.images", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", default="smolvlm", help="tests/vision_models.py's FAMILIES, "
                   "one or several comma-separated, e.g. gemma3,qwen2_5_vl (--image-side "
                   "and --patch are SmolVLM / Idefics3's)")
    p.add_argument("--tokens", type=int, default=48, help="tokens each text chat writes")
    p.add_argument("--image-tokens", type=int, default=0,
                   help="tokens each image request writes in C (default 4 x --tokens)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256, help="the text model's width")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vision-hidden", type=int, default=192)
    p.add_argument("--vision-layers", type=int, default=4)
    p.add_argument("--image-side", type=int, default=224, help="the vision tower's input")
    p.add_argument("--patch", type=int, default=14)
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    from engine.preload import ensure_preloads

    ensure_preloads()
    main()
