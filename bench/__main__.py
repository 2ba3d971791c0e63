"""`python -m bench`: the engine against mlx-lm, measured in the same process."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from engine.preload import ensure_preloads

from .request_sampling import SAMPLING, RequestSampling, request_sampling

ALL = ("physical", "solo", "offline", "online", "hol", "chat", "chats")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--model", default="bundled")
    p.add_argument("--scenarios", default=",".join(ALL),
                   help=f"comma-separated subset of {','.join(ALL)}")
    p.add_argument("--concurrency", default="1,4,8,16,32")
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sampling", choices=sorted(SAMPLING), default="tabs",
                   help="every side's requests: tabs = the chat tabs' defaults (temperature 0.7, "
                        "top-p 0.95, min-p 0.05, repetition penalty 1.1), what users run; "
                        "greedy = temperature 0")
    p.add_argument("--offline-priority", default="background,interactive",
                   help="priority classes of the offline requests; the first is the headline")
    p.add_argument("--peer-kernels", action="store_true",
                   help="also run BatchGenerator with the engine's CPU kernels (offline)")
    p.add_argument("--online-requests", type=int, default=32)
    p.add_argument("--online-rate", type=float, default=0.5)
    p.add_argument("--burstiness", type=float, default=1.0)
    p.add_argument("--long-prompt", type=int, default=2000)
    mt = p.add_argument_group("multi-turn chats (scenarios chat and chats)")
    mt.add_argument("--chat-turns", type=int, default=10, help="turns of the one-chat scenario")
    mt.add_argument("--chats", type=int, default=8, help="chats of the many-chats scenario")
    mt.add_argument("--chats-turns", type=int, default=4, help="turns of each of those chats")
    mt.add_argument("--turn-tokens", type=int, default=64, help="max tokens of each reply")
    mt.add_argument("--chat-repeats", type=int, default=3,
                    help="one-chat scenario: chats per client (other topics), medians per turn")
    mt.add_argument("--think-s", type=float, default=1.0,
                    help="pause between a reply and the next question (many chats)")
    mt.add_argument("--no-mlx-lm-server", dest="mlx_lm_server", action="store_false",
                    help="skip mlx_lm.server (started on the same weights in a subprocess)")
    mt.add_argument("--http-url", action="append", default=[], metavar="URL",
                    help="also run the chats against this OpenAI-compatible server "
                         "(repeatable; e.g. `batchchat serve`, llama-server)")
    mt.add_argument("--http-model", default="default", help="model name sent to --http-url")
    mt.add_argument("--http-api-key", default=None)
    p.add_argument("--out", type=Path, default=Path("bench-out"))
    return p.parse_args(argv)


async def run(args: argparse.Namespace, loaded: Any | None = None) -> dict[str, Any]:
    from . import physical, scenarios

    if loaded is None:
        from engine.loader import load_model

        loaded = load_model(args.model)
    scen = set(args.scenarios.split(","))
    sampling = request_sampling(args.sampling)
    conc = [int(c) for c in args.concurrency.split(",")]
    engine = scenarios.make_engine(loaded, max(conc + [8]) + 1)
    await engine.start()
    results: dict[str, Any] = {"model": getattr(loaded, "description", args.model),
                               "args": {k: str(v) for k, v in vars(args).items()},
                               "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                               "device": physical.device_description()}
    try:
        texts = scenarios.prompt_texts(max(conc + [16]))
        prompts = [scenarios.chat_tokens(engine, t) for t in texts]
        results["prompt_tokens_mean"] = sum(map(len, prompts)) / len(prompts)
        if "physical" in scen:
            from mlx.utils import tree_flatten

            params = tree_flatten(engine.model.parameters())
            results["physical"] = physical.reference(
                sum(v.size for _, v in params), sum(v.nbytes for _, v in params))
        if "solo" in scen:
            results["solo"] = await scenarios.solo(engine, prompts[0], args.new_tokens,
                                                   args.repeats, sampling)
        if "offline" in scen:
            results["offline"] = await scenarios.offline(
                engine, prompts, args.new_tokens, conc, args.repeats,
                tuple(args.offline_priority.split(",")), args.peer_kernels, sampling)
        if "online" in scen:
            results["online"] = await scenarios.online(
                engine, texts, args.online_rate, args.online_requests, args.new_tokens,
                args.burstiness, sampling=sampling)
        if "hol" in scen:
            long_text = " ".join(texts) * 10
            long_prompt = scenarios.chat_tokens(engine, long_text)[: args.long_prompt]
            results["head_of_line"] = {
                "engine": await scenarios.head_of_line(engine, prompts, long_prompt,
                                                       args.new_tokens * 4, sampling),
                "batch_generator": scenarios.head_of_line_batch_generator(
                    engine, prompts, long_prompt, args.new_tokens * 4, sampling),
            }
        if scen & {"chat", "chats"}:
            results["multiturn"] = await multiturn_peers(args, loaded, engine, scen, sampling)
        if "physical" in results and "solo" in results and results.get("offline"):
            p = results["physical"]
            results["fractions"] = {
                "solo_of_floor": p["decode_floor_s"] * results["solo"]["engine_decode_tps"],
                "batch_of_ceiling": results["offline"][-1]["engine_decode_tps"]
                / p["ceiling_tps"],
            }
    finally:
        await engine.shutdown()
    return results


async def multiturn_peers(args: argparse.Namespace, loaded: Any, engine: Any,
                          scen: set[str], sampling: RequestSampling) -> dict[str, Any]:
    """The chat scenarios against the engine, mlx-lm's cached path (one chat), mlx_lm.server
    and any --http-url, one after the other so that each has the machine to itself."""
    from .chat_clients import EngineChat, MlxLmCachedChat, OpenAIChat
    from .mlx_lm_server import mlx_lm_server
    from .multiturn import many_chats, one_chat

    out: dict[str, Any] = {"chat": [], "chats": []}

    async def run_all(clients: list[Any], many: bool = True) -> None:
        if "chat" in scen:
            out["chat"] += await one_chat(clients, args.chat_turns, args.turn_tokens,
                                          args.chat_repeats)
        if "chats" in scen and many:
            for client in clients:
                out["chats"].append(await many_chats(client, args.chats, args.chats_turns,
                                                     args.turn_tokens, args.think_s))

    # mlx-lm's cached path serves one request at a time: the one-chat scenario only.
    await run_all([EngineChat(engine, sampling=sampling),
                   MlxLmCachedChat(engine.model, engine.tokenizer, sampling)], many=False)
    if "chats" in scen:
        out["chats"].append(await many_chats(EngineChat(engine, sampling=sampling), args.chats,
                                             args.chats_turns, args.turn_tokens, args.think_s))
    for url in args.http_url:
        async with OpenAIChat(url, args.http_model, args.http_api_key, name=url,
                              sampling=sampling) as client:
            await run_all([client])
    if args.mlx_lm_server:
        args.out.mkdir(parents=True, exist_ok=True)
        with mlx_lm_server(loaded, log=args.out / "mlx_lm_server.log") as url:
            async with OpenAIChat(url, "default_model", name="mlx_lm.server",
                                  sampling=sampling) as client:
                await run_all([client])
    return out


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    args = parse_args(argv)
    from . import report

    results = asyncio.run(run(args))
    args.out.mkdir(parents=True, exist_ok=True)
    report.print_table(results)
    path = report.write_json(results, args.out)
    plots = report.plot(results, args.out)
    print(f"\nwrote {path}" + "".join(f", {p}" for p in plots))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

