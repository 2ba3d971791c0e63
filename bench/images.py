"""`python -m bench.images`: what two image requests cost eight text chats (issue #52).

On a small random-weight SmolVLM in mlx-vlm's format (tests/vision_models.py; no real VLM
weights are available offline; `--family` another of its families: Qwen2.5-VL's image
requests, M-RoPE, decode beside the chats in passes apart with no compiled step), two
phases, alternated `--rounds` times (A B A B ...):

- A, text alone: 8 text chats submitted at once, `--tokens` greedy tokens each;
- B, text and images: the same 8 chats (other words, so no prefix is shared with A), and
  once every chat has its first token, 2 image requests (a different image each),
  processed off the loop as the API server does: their vision-tower pass and prefill run
  while the chats decode.

Per phase: the text chats' inter-token latency p50 / p99 (gaps between a stream's tokens
as the asyncio loop sees them), their throughput (text tokens over the span from the first
chat's first token to the last chat's last), and the image requests' time to first token.
Printed as the median over rounds, with B's ratios to A. A loaded machine makes single
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


async def _phase(engine: Engine, tokens: int, salt: str, images: list[bytes]) -> dict:
    params = SamplingParams(max_tokens=tokens, temperature=0.0)
    gaps: list[float] = []
    times: list[float] = []
    firsts = asyncio.Event()
    started = 0
    ttft: list[float] = []

    async def chat(messages: list[dict]) -> None:
        nonlocal started
        last = None
        async for event in engine.submit(messages=messages, params=params):
            if event.token is None:
                continue
            now = time.perf_counter()
            if last is None:
                started += 1
                if started == len(TOPICS):
                    firsts.set()
            else:
                gaps.append(now - last)
            last = now
            times.append(now)

    async def seen(i: int, image: bytes) -> None:
        await firsts.wait()
        t = time.perf_counter()
        # as the API server submits one: the processor's work off the loop first (the
        # submit finds it done: engine/vision/prepared.py), so the chats' gaps are the
        # engine's, not the loop's
        await asyncio.to_thread(engine.prompt_tokens, _asking(i), None, [image])
        stream = engine.submit(messages=_asking(i), params=params, images=[image])
        async for event in stream:
            if event.token is not None:
                ttft.append(time.perf_counter() - t)
                break
        await stream.result()

    await asyncio.gather(*(chat(m) for m in _chats(salt)),
                         *(seen(i, image) for i, image in enumerate(images)))
    gaps.sort()
    span = max(times) - min(times)
    return {"itl_p50_ms": 1000 * statistics.median(gaps),
            "itl_p99_ms": 1000 * gaps[int(0.99 * (len(gaps) - 1))],
            "text_tok_s": len(times) / span if span else 0.0,
            "image_ttft_ms": 1000 * max(ttft) if ttft else None}


async def main_async(args: argparse.Namespace) -> None:
    from tests.vision_models import make_tiny_vlm, png_bytes

    folder = make_tiny_vlm(Path(tempfile.mkdtemp(prefix="bench-images-")) / args.family,
                           args.family, hidden=args.hidden, layers=args.layers,
                           vision_hidden=args.vision_hidden, vision_layers=args.vision_layers,
                           image_side=args.image_side, patch=args.patch)
    engine = Engine.load(str(folder), config=EngineConfig(prefix_cache=False))
    probe = png_bytes((200, 30, 40), (300, 200))
    tokens_an_image = engine.vision.prepare(_asking(0), [probe]).token_ids.count(
        engine.vision.image_token_id)
    print(f"model: {args.family}, text {args.layers} layers x {args.hidden}, vision "
          f"{args.vision_layers} layers x {args.vision_hidden}, an image = "
          f"{tokens_an_image} tokens; {engine.description}")
    await engine.start()
    try:
        await _phase(engine, 4, "warm-up", [png_bytes((1, 2, 3), (64, 48))])
        results: dict[str, list[dict]] = {"A": [], "B": []}
        for r in range(args.rounds):
            results["A"].append(await _phase(engine, args.tokens, f"a{r}", []))
            images = [png_bytes((200, 30 + r, 40), (300, 200)),
                      png_bytes((20, 180, 90 + r), (200, 300))]
            results["B"].append(await _phase(engine, args.tokens, f"b{r}", images))
            print(f"round {r + 1}: A {_line(results['A'][-1])} | B {_line(results['B'][-1])}")
    finally:
        await engine.shutdown()
    med = {k: {f: statistics.median(x[f] for x in v) for f in v[0] if v[0][f] is not None}
           for k, v in results.items()}
    print(f"\nmedian of {args.rounds} rounds, 8 text chats x {args.tokens} tokens:")
    print(f"  A text alone:        {_line(med['A'])}")
    print(f"  B text + 2 images:   {_line(med['B'])}")
    print(f"  B / A: ITL p50 {med['B']['itl_p50_ms'] / med['A']['itl_p50_ms']:.2f}, "
          f"ITL p99 {med['B']['itl_p99_ms'] / med['A']['itl_p99_ms']:.2f}, "
          f"text throughput {med['B']['text_tok_s'] / med['A']['text_tok_s']:.2f}")


def _line(r: dict) -> str:
    out = (f"ITL p50 {r['itl_p50_ms']:.1f} ms, p99 {r['itl_p99_ms']:.1f} ms, "
           f"text {r['text_tok_s']:.1f} tok/s")
    if r.get("image_ttft_ms") is not None:
        out += f", image TTFT {r['image_ttft_ms']:.0f} ms"
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.images", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", default="smolvlm", help="tests/vision_models.py's FAMILIES "
                   "(--image-side and --patch are SmolVLM / Idefics3's)")
    p.add_argument("--tokens", type=int, default=48, help="tokens each text chat writes")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256, help="the text model's width")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vision-hidden", type=int, default=192)
    p.add_argument("--vision-layers", type=int, default=4)
    p.add_argument("--image-side", type=int, default=224, help="the vision tower's input")
    p.add_argument("--patch", type=int, default=14)
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    from engine.blas import ensure_fast_blas

    ensure_fast_blas()
    main()
