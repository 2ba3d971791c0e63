"""`batchchat ps`, `batchchat load NAME`, `batchchat unload NAME`: the models of a running
`batchchat serve --models-dir` server, over its HTTP API (GET /models/running, POST
/models/load, POST /models/unload), as `lms ps / load / unload` and `ollama ps` do."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

from engine.public import format_bytes

URL_ENV = "BATCHCHAT_URL"
KEY_ENV = "BATCHCHAT_API_KEY"  # as `batchchat serve` reads it
DEFAULT_URL = "http://127.0.0.1:8000"


class ServerError(Exception):
    """The server is not there, or said no (its message)."""


def call(url: str, path: str, body: dict[str, Any] | None = None,
         api_key: str | None = None, timeout: float = 600.0) -> dict[str, Any]:
    """GET `path` (or POST `body` to it) on the server at `url`; its JSON answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url.rstrip("/") + path, data=data,
                                     method="POST" if body is not None else "GET")
    request.add_header("Content-Type", "application/json")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {exc.code}"
        if exc.code == 404 and "/models" in path and "model" not in message:
            message = "the server serves one model (start it with --models-dir)"
        raise ServerError(message) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerError(f"no BatchChat server at {url} ({reason})") from None


def table(models: list[dict[str, Any]]) -> str:
    """`ps`'s columns."""
    rows = [["NAME", "STATE", "ESTIMATE", "RUNNING", "IDLE", "TTL", "PINNED"]]
    for m in models:
        idle = "-" if m.get("idle_s") is None else f"{m['idle_s']:.0f} s"
        ttl = "-" if m.get("ttl") is None else f"{m['ttl']:g} s"
        rows.append([m["id"], m["state"], format_bytes(m["estimate_bytes"]),
                     str(m["running"]), idle, ttl, "yes" if m.get("pinned") else "no"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def parse_args(command: str, argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"batchchat {command}", description=__doc__.splitlines()[0])
    p.add_argument("--url", default=os.environ.get(URL_ENV, DEFAULT_URL),
                   help=f"the server (default ${URL_ENV}, else {DEFAULT_URL})")
    p.add_argument("--api-key", default=os.environ.get(KEY_ENV),
                   help=f"its key (default ${KEY_ENV})")
    if command in ("load", "unload"):
        p.add_argument("name", help="a model's name (GET /models), file name or path")
    if command == "load":
        p.add_argument("--ttl", type=float, default=None,
                       help="unload it after this many idle seconds (negative: never)")
        p.add_argument("--pin", action="store_true", help="never unload it to make room")
        p.add_argument("--estimate-only", action="store_true",
                       help="say what it would take, load nothing")
    if command == "unload":
        p.add_argument("--cancel", action="store_true",
                       help="cancel its running replies (default: wait for them)")
        p.add_argument("--timeout", type=float, default=None,
                       help="wait at most this many seconds, then cancel the rest")
    return p.parse_args(argv)


def main(command: str, argv: list[str]) -> int:
    args = parse_args(command, argv)
    try:
        if command == "ps":
            listing = call(args.url, "/models/running", api_key=args.api_key)
            print(table(listing["data"]))
            print(f"memory: {format_bytes(listing['used_bytes'])} of "
                  f"{format_bytes(listing['budget_bytes'])} budget")
        elif command == "load":
            body: dict[str, Any] = {"model": args.name}
            if args.ttl is not None:
                body["ttl"] = args.ttl
            if args.pin:
                body["pin"] = True
            if args.estimate_only:
                body["estimate_only"] = True
                answer = call(args.url, "/models/load", body, args.api_key)
                print(f"{answer['model']}: {answer['estimate']}; "
                      f"{format_bytes(answer['used_bytes'])} of "
                      f"{format_bytes(answer['budget_bytes'])} budget in use")
                return 0
            model = call(args.url, "/models/load", body, args.api_key)["model"]
            print(f"{model['id']} loaded ({model['estimate']})")
        else:
            body = {"model": args.name, "cancel": args.cancel}
            if args.timeout is not None:
                body["timeout"] = args.timeout
            answer = call(args.url, "/models/unload", body, args.api_key)
            print(f"{answer['model']} unloaded" if answer["unloaded"]
                  else f"{answer['model']} was not loaded")
    except ServerError as exc:
        print(f"batchchat {command}: error: {exc}", file=sys.stderr)
        return 1
    return 0
