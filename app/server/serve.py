"""`batchchat serve`: the API server alone, no window. Prints the URL when ready; SIGINT or
SIGTERM ends in-flight streams (finish reason "cancelled", then [DONE]) and exits 0. A bad
option or a model that cannot be loaded is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.public import ModelLoadError, format_bytes

from .. import speculative
from ..storage.stored_responses import RETENTION_DAYS, StoredResponses
from .app import ApiServer, ServerConfig, check_address
from .bind_check import check_bindable
from .model_names import aliases_of

if TYPE_CHECKING:
    from ..backend import LocalTarget
    from ..models.entry import ModelEntry

KEY_ENV = "BATCHCHAT_API_KEY"  # a key here stays out of `ps` listings
# After SIGTERM the port answers 503 for at least this long before it closes: a client that
# comes just after the signal is told the server is stopping, not refused
LINGER_S = 1.0


def _whole(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low or (high is not None and value > high):
            where = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {where}, got {value}")
        return value

    return parse


def _mib(text: str) -> float:
    """An argparse type: a positive, finite number of MiB."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def _speculative(text: str) -> str:
    """An argparse type: off, ngram or draft:PATH (app/speculative.py)."""
    try:
        return speculative.check(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The options; a bad one is argparse's usage error (exit 2), in the option's name."""
    p = argparse.ArgumentParser(prog="batchchat serve",
                                description="An OpenAI-compatible API on the engine.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; any other needs a key)")
    p.add_argument("--port", type=_whole(0, 65535), default=8000,
                   help="default 8000; 0 = any free port")
    p.add_argument("--model", default=None,
                   help='"bundled", a .gguf file, an mlx-lm model directory or a repo id '
                        "(default: the app's last model, else bundled)")
    p.add_argument("--mmproj", default=None, metavar="PATH",
                   help="a GGUF model's vision projector (llama.cpp's mmproj file), loaded "
                        "with it as one model that sees images (default: the mmproj*.gguf "
                        "beside the GGUF, if any; docs/server.md)")
    p.add_argument("--served-model-name", default=None,
                   help="the model id clients send (default: the model's name)")
    p.add_argument("--strict-model-name", action="store_true",
                   help="take only the served id, the model's file name or repo id as "
                        "`model` (default: any name, as one model is served)")
    p.add_argument("--api-key", default=os.environ.get(KEY_ENV),
                   help=f"require 'Authorization: Bearer KEY' (default: ${KEY_ENV})")
    p.add_argument("--max-concurrent", type=_whole(1), default=16,
                   help="requests the engine runs at once (default 16)")
    p.add_argument("--max-queue", type=_whole(0), default=256,
                   help="waiting requests beyond which the server answers 429 (default 256)")
    p.add_argument("--max-body-mb", type=_mib, default=4.0,
                   help="largest request body in MiB (default 4; larger ones get 413)")
    p.add_argument("--kv-budget-mb", type=_mib, default=None,
                   help="KV cache memory for running requests and cached prefixes, in MiB "
                        "(default: sized from the machine's memory)")
    p.add_argument("--kv-bits", type=int, choices=(16, 8, 4), default=16,
                   help="bits a KV value is kept in: 16 = the model's float (default), 8 "
                        "or 4 = quantized, about 3x or 6x the tokens a MiB on the CPU "
                        "(docs/memory.md)")
    p.add_argument("--speculative", type=_speculative, default=speculative.DEFAULT,
                   metavar="off|ngram|draft:PATH",
                   help="speculative decoding: drafts checked inside the batch; ngram looks "
                        "them up in each request's own prompt and output, draft:PATH asks "
                        f"a smaller model with the same tokenizer (default "
                        f"{speculative.DEFAULT})")
    p.add_argument("--max-connections", type=_whole(1), default=None,
                   help="connections open at once; more get 503 (default: half the "
                        "file-descriptor limit, at most 4096)")
    several = p.add_argument_group(
        "several models (issue #50)", "with --models-dir, each request's `model` names one of "
        "the folder's models, loaded on demand; idle ones are unloaded to make room")
    several.add_argument("--models-dir", default=None, metavar="DIR",
                         help="serve the .gguf files and mlx-lm folders under DIR by name "
                              "(--model, if given, is loaded at start)")
    several.add_argument("--max-models", type=_whole(1), default=None, metavar="N",
                         help="at most N models loaded at once (default: as many as fit)")
    several.add_argument("--memory-budget-mb", type=_mib, default=None, metavar="MB",
                         help="what the loaded models' estimates may add up to (default: 3/4 "
                              "of the memory free at start)")
    several.add_argument("--ttl", type=float, default=None, metavar="SECONDS",
                         help="unload a model idle this long (default: only to make room; "
                              "a load or a request's ttl / keep_alive sets its own)")
    p.add_argument("--context-overflow", choices=("stop", "truncate_middle", "rolling_window"),
                   default="stop",
                   help="when a chat outgrows the context and the request names no "
                        "`context_overflow`: refuse it (stop, the default), drop whole turns "
                        "after the first (truncate_middle) or the oldest (rolling_window)")
    p.add_argument("--responses-db", default=None, metavar="PATH",
                   help="where /v1/responses stores responses for previous_response_id "
                        "(default: the history database; 'memory': this process only)")
    p.add_argument("--responses-retention-days", type=float, default=RETENTION_DAYS,
                   metavar="DAYS", help="delete stored responses older than this "
                                        f"(default {RETENTION_DAYS:g}, as OpenAI)")
    p.add_argument("--embedding-model", default=None, metavar="SOURCE",
                   help="the model /v1/embeddings pools (\"bundled\", a .gguf file or an "
                        "mlx-lm directory; loaded at the first request); default: the chat "
                        "model, when its weights allow (docs/server.md)")
    p.add_argument("--cors-origin", default=None,
                   help='allow browser pages from this origin ("*" for any); default none')
    p.add_argument("--access-log", action="store_true", help="log every HTTP request")
    p.add_argument("--allow-image-urls", action="store_true",
                   help="fetch http(s) image URLs in image_url parts (10 s, 20 MiB, 3 "
                        "redirects at most); default: refused, the server runs offline")
    args = p.parse_args(argv)
    from app.backend.local_target import max_concurrent_limit

    from .embeddings.source import check_source

    if args.embedding_model is not None:
        try:
            check_source(args.embedding_model)
        except ValueError as exc:
            p.error(f"argument --embedding-model: {exc}")

    limit = max_concurrent_limit()  # every running request takes a token of each tick
    if args.max_concurrent > limit:
        p.error(f"argument --max-concurrent: must be from 1 to {limit}, "
                f"got {args.max_concurrent}")
    return args


def model_id(target: LocalTarget, source: str) -> str:
    """The id clients send: the model's own name (the loader's description starts with it)."""
    words = (target.description or "").split()
    return words[0] if words else source


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from app.images.fetch import allow_image_urls

    allow_image_urls(args.allow_image_urls)  # process-wide: images are read off the loop
    config = ServerConfig(host=args.host, port=args.port, api_key=args.api_key or None,
                          max_body_bytes=int(args.max_body_mb * (1 << 20)),
                          cors_origin=args.cors_origin, access_log=args.access_log,
                          max_connections=args.max_connections,
                          strict_model_name=args.strict_model_name,
                          context_overflow=args.context_overflow,
                          embedding_model=args.embedding_model)
    if args.embedding_model:  # files in chat requests are retrieved with it too (#51)
        from .embeddings.retrieval import use_for_retrieval

        use_for_retrieval(args.embedding_model)
    try:
        code = asyncio.run(serve(args, config))
    except ModelLoadError as exc:  # as `batchchat --cli` says it
        print(f"batchchat serve: error: cannot load the model: {exc}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:  # a refused address, a port in use, a bad setting
        print(f"batchchat serve: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl+C while the model loads (the handlers come after)
        print("batchchat serve: interrupted", file=sys.stderr)
        return 130
    return code


def stored_responses(args: argparse.Namespace) -> StoredResponses:
    """/v1/responses' store: the history database (opened on the first response) unless
    --responses-db names another file or 'memory'."""
    from app.paths import db_path

    where = args.responses_db
    path = None if where == "memory" else db_path(where)
    return StoredResponses(path, retention_days=args.responses_retention_days)


async def serve(args: argparse.Namespace, config: ServerConfig) -> int:
    from app.backend.local_target import load_target
    from app.settings import Settings

    check_address(config)  # refuse before spending time on loading a model
    check_bindable(config.host, config.port)
    if args.models_dir is not None:
        if args.mmproj is not None:
            raise ValueError("--mmproj: with --models-dir each GGUF's images come from the "
                             "mmproj*.gguf beside it")
        return await serve_several(args, config)
    source = args.model or Settings.load().model
    print(f"Loading {source} …", file=sys.stderr, flush=True)
    # the engine's CPU switches are read from BATCHCHAT_* here, once (EngineConfig.cpu); a
    # bad value is a ValueError: one line and exit 2
    settings: dict[str, int | str] = {"max_concurrent": args.max_concurrent,
                                      "max_queue": args.max_queue,
                                      "speculative": args.speculative}
    if args.kv_bits != 16:
        settings["kv_bits"] = args.kv_bits
    if args.kv_budget_mb is not None:  # else BATCHCHAT_KV_BUDGET_MB, else the default
        settings["kv_budget_bytes"] = max(1, int(args.kv_budget_mb * (1 << 20)))
    target = await asyncio.to_thread(load_target, source, mmproj=args.mmproj, **settings)
    for note in target.notes:  # how it runs here (an mmproj beside it that does not pair)
        print(f"Note: {note}", file=sys.stderr, flush=True)
    await target.start()
    own = model_id(target, source)
    name = args.served_model_name or own
    aliases = (own, *aliases_of(source))  # the file name, the repo id
    server = ApiServer(lambda: target, lambda: name, config, model_aliases=lambda: aliases,
                       stored_responses=stored_responses(args))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        url = await server.start()
        print(f"BatchChat API ready at {url}/v1 (model '{name}'); Ctrl+C stops", flush=True)
        await stop.wait()
        print("Stopping: ending in-flight requests …", file=sys.stderr, flush=True)
    finally:
        await server.stop(linger_s=LINGER_S)
        await target.shutdown(timeout=5.0)
    return 0


async def serve_several(args: argparse.Namespace, config: ServerConfig) -> int:
    """`--models-dir`: the folder's models by name, on a ModelManager (app/fleet)."""
    from app.fleet import Catalog, ModelManager
    from app.models.library import folder_models

    from ..request import Refusal
    from .fleet_api import FleetApi

    folder = Path(args.models_dir).expanduser()
    if not folder.is_dir():
        raise ValueError(f"--models-dir: no such folder: {folder}")
    extra = _entries_for(args.model) if args.model else []  # --model, served beside them
    catalog = Catalog(lambda: [*extra, *folder_models(folder)])
    settings: dict[str, int | str] = {"max_concurrent": args.max_concurrent,
                                      "max_queue": args.max_queue,
                                      "speculative": args.speculative}
    if args.kv_bits != 16:
        settings["kv_bits"] = args.kv_bits
    kv = max(1, int(args.kv_budget_mb * (1 << 20))) if args.kv_budget_mb else None
    budget = int(args.memory_budget_mb * (1 << 20)) if args.memory_budget_mb else None
    fleet = ModelManager(catalog, budget_bytes=budget, max_models=args.max_models,
                         kv_budget_bytes=kv, default_ttl_s=args.ttl, **settings)
    fleet.start()
    api = FleetApi(fleet, config.max_body_bytes)
    server = ApiServer(api.target, api.model_id, config, fleet=api,
                       stored_responses=stored_responses(args))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        if args.model:
            print(f"Loading {args.model} …", file=sys.stderr, flush=True)
            try:
                (await api.acquire(args.model)).release()
            except Refusal as refusal:
                raise ValueError(f"--model: {refusal.message}") from None
        names = [m.name for m in fleet.models()]
        url = await server.start()
        print(f"BatchChat API ready at {url}/v1 ({len(names)} models in {folder}, loaded on "
              f"demand; budget {format_bytes(fleet.budget_bytes)}); Ctrl+C stops", flush=True)
        await stop.wait()
        print("Stopping: ending in-flight requests …", file=sys.stderr, flush=True)
    finally:
        await server.stop(linger_s=LINGER_S)
        await fleet.close()
    return 0


def _entries_for(source: str) -> list[ModelEntry]:
    """The library's entry for `source` ("bundled", a library name, a path), if it has one."""
    from app.models.library import find_models, list_models

    found = find_models(source, list_models())
    return found[:1] if len(found) == 1 or (found and found[0].source == source) else []
