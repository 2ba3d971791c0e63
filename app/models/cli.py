"""`batchchat models`: list the models on this disk, show one, pull one from the hub.

Like `ollama list` / `lms ls`, for the headless user. Exit codes: 0 done, 1 no such model
or the pull failed (the message says why), 2 a usage error, 130 interrupted (Ctrl+C; a
pull keeps what arrived and the next one resumes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from engine.public import format_bytes

from ..settings import Settings
from .entry import ModelEntry, format_params
from .library import find_models, list_models
from .places import hub_cache_dir
from .pull import DEFAULT_PATTERNS, PullError, PullProgress, pull

COLUMNS = (("name", "NAME"), ("arch", "ARCH"), ("params", "PARAMS"), ("quant", "QUANT"),
           ("size", "SIZE"), ("context", "CONTEXT"), ("loads", "LOADS"), ("where", "WHERE"),
           ("input", "INPUT"))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="batchchat models", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command")
    ls = sub.add_parser("list", help="the models on this disk (the default)")
    ls.add_argument("--json", action="store_true", help="one JSON object per model")
    info = sub.add_parser("info", help="everything known about one model, and its path")
    info.add_argument("name", help="its name in the list (or a part of it), or its source")
    get = sub.add_parser("pull", help="download a model repo from the Hugging Face hub "
                                      "into the hub cache (resumes a pull that stopped)")
    get.add_argument("repo", help="a repo id, like mlx-community/SmolLM2-135M-Instruct-8bit; "
                                  "for a repo of several GGUF files, add the quantization: "
                                  "org/name:Q4_0")
    get.add_argument("--revision", default="main", help="a branch, tag or commit")
    get.add_argument("--include", action="append", metavar="PATTERN",
                     help="only files matching this pattern (repeatable; e.g. '*Q4_0.gguf' "
                          "for one file of a GGUF repo); default: what mlx-lm needs, and "
                          "every .gguf")
    return p.parse_args(list(argv) or ["list"])


def main(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = parse_args(argv)
    if args.command == "pull":
        return _pull(args, out, err)
    entries = list_models(Settings.load().model_folders)
    if args.command == "info":
        return _info(args.name, entries, out, err)
    if args.json:
        for e in entries:
            out.write(json.dumps(_fields(e)) + "\n")
    else:
        out.write(table(entries))
    return 0


def table(entries: Sequence[ModelEntry]) -> str:
    """The list as aligned columns, then why each model that does not load does not."""
    if not entries:
        return "No models found.\n"
    rows = [dict(COLUMNS)] + [e.row() for e in entries]
    widths = {key: max(len(r[key]) for r in rows) for key, _ in COLUMNS}
    lines = ["  ".join(r[key].ljust(widths[key]) for key, _ in COLUMNS).rstrip() for r in rows]
    notes = [f"  {e.name}: {e.reason}" for e in entries if not e.loads]
    if notes:
        lines += ["", "Not loadable here:", *notes]
    return "\n".join(lines) + "\n"


def _fields(e: ModelEntry) -> dict[str, object]:
    return {"name": e.name, "source": e.source, "path": str(e.path) if e.path else None,
            "where": e.place, "format": e.format, "architecture": e.architecture,
            "parameters": e.parameters, "quantization": e.quantization,
            "size_bytes": e.size_bytes, "context_length": e.context_length,
            "loads": e.loads, "reason": e.reason, "note": e.note,
            "sees_images": e.sees_images and not e.images_reason,
            "images_reason": e.images_reason}


def _info(name: str, entries: Sequence[ModelEntry], out: TextIO, err: TextIO) -> int:
    found = find_models(name, entries)
    if not found:
        err.write(f"batchchat models: no model called {name!r} (see `batchchat models list`)\n")
        return 1
    if len({e.name for e in found}) > 1:
        err.write(f"batchchat models: {name!r} could be any of: "
                  + ", ".join(e.name for e in found) + "\n")
        return 1
    for i, e in enumerate(found):
        if i:
            out.write("\n")
        params = f"{format_params(e.parameters)} ({e.parameters:,})" if e.parameters else "?"
        size = f"{format_bytes(e.size_bytes)} ({e.size_bytes:,} bytes)" if e.size_bytes else "—"
        for label, value in (
                ("Name", e.name), ("Where", e.place), ("Path", str(e.path or "—")),
                ("Load with", f"batchchat --model {_quoted(e.source)}"),
                ("Format", e.format), ("Architecture", e.architecture or "?"),
                ("Parameters", params), ("Quantization", e.quantization or "?"),
                ("Size on disk", size),
                ("Context length", f"{e.context_length:,}" if e.context_length else "?"),
                ("Loads here", "yes" if e.loads else f"no: {e.reason}"),
                ("Reads", e.input + (f": {e.images_reason}" if e.images_reason else "")),
                ("Note", e.note)):
            if value:
                out.write(f"{label + ':':<16}{value}\n")
    return 0


def _quoted(source: str) -> str:
    return f"'{source}'" if any(c in source for c in " '\"$&;()") else source


class _ProgressLine:
    """One line on stderr, rewritten in place on a terminal (a line per file otherwise)."""

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.tty = err.isatty()
        self.shown = 0.0
        self.file = ""

    def __call__(self, p: PullProgress) -> None:
        now = time.monotonic()
        if self.tty and now - self.shown < 0.1 and p.file == self.file:
            return
        if not self.tty and p.file == self.file:
            return
        self.shown, self.file = now, p.file
        pct = f"{p.fraction:4.0%}"
        text = f"{pct}  {p.summary()}"
        self.err.write(f"\r{text:<78}" if self.tty else text + "\n")
        self.err.flush()


def _pull(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    line = _ProgressLine(err)
    try:
        snapshot = pull(args.repo, revision=args.revision,
                        include=args.include or DEFAULT_PATTERNS, progress=line)
    except PullError as e:
        err.write(("\n" if line.tty else "") + f"batchchat models: {e}\n")
        return 1
    except KeyboardInterrupt:
        err.write("\nbatchchat models: interrupted; pull it again to resume\n")
        return 130
    if line.tty:
        err.write("\n")
    out.write(f"Pulled {args.repo} into {hub_cache_dir()}\n"
              f"Load it with: batchchat --model {_quoted(str(snapshot))}\n")
    return 0
