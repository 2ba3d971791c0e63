"""Export history: a session as Markdown or JSON, stats and simulation runs as CSV or
JSON, everything as one JSON document (read back by app.history.import_json).

The formatters take records, not a Store, so an unsaved in-memory session exports too.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.bridge import ReplyStats
from app.storage import (
    LoadedSession,
    LoadedSimRun,
    Message,
    RequestStatsRecord,
    Session,
    SimResult,
    SimRun,
    StatsSnapshot,
    Store,
)

from ..plural import counted
from ..titles import whole_title
from .paths import shown_path

# 2 (issue #29): a chat is a tree. Messages carry parent_id and seq, sessions shown_leaf_id
# and pinned; (issue #30) a reply that called tools its tool_calls and tool_results. 3 (issue
# #49): a reasoning model's reply its reasoning. Version 1 files (no parents: each chat one
# path; no tool calls) and 2 still import.
FORMAT_VERSION = 3
EXPORT_FORMAT = "batchchat-export"
SESSION_FORMAT = "batchchat-session"
STATS_FORMAT = "batchchat-stats"
SIM_RUNS_FORMAT = "batchchat-sim-runs"

_ROLE_HEADINGS = {"system": "System", "user": "User", "assistant": "Assistant"}


# --- Markdown -----------------------------------------------------------------------

def session_to_markdown(loaded: LoadedSession) -> str:
    """The path the chat's tab shows; a message with versions says which one it is (the
    others are in the JSON export)."""
    session = loaded.session
    first = next((m.content for m in loaded.messages if m.role == "user"), "")
    parts = [f"# {whole_title(session.title, first)}", "", _settings_line(session)]
    if session.system_prompt:
        parts += ["", "## System prompt", "", _closed_fences(session.system_prompt)]
    for shown in shown_path(loaded):
        message = shown.message
        parts += ["", f"## {_ROLE_HEADINGS.get(message.role, message.role.title())}", ""]
        if message.reasoning:
            parts += _thinking_block(message.reasoning)
        parts.append(_closed_fences(message.content))
        calls = _tool_lines(message)
        if calls:
            parts += ["", *calls]
        note = _stats_line(message)
        if note:
            parts += ["", note]
        if shown.versions > 1:
            parts += ["", f"*Version {shown.version} of {shown.versions} — the other "
                          "versions are in the JSON export*"]
    return "\n".join(parts).rstrip() + "\n"


def _thinking_block(reasoning: str) -> list[str]:
    """A reply's thinking as a folded block above its answer (GitHub and most Markdown
    viewers fold <details>; the blank lines let Markdown inside it render)."""
    return ["<details>", "<summary>Thinking</summary>", "", _closed_fences(reasoning), "",
            "</details>", ""]


def _tool_lines(message: Message) -> list[str]:
    """One line per call: the tool, its arguments and how it ended (the result's text is
    in the JSON export)."""
    results = message.tool_results or {}
    lines = []
    for call in message.tool_calls or []:
        fn = call["function"]
        status = (results.get(call["id"]) or {}).get("status", "pending")
        lines.append(f"- Tool call {_code(fn['name'] + ' ' + fn['arguments'])} — {status}")
    return lines


def _code(text: str) -> str:
    """`text` on one line as inline code, whatever backticks it holds (a longer run of
    them around it)."""
    text = " ".join(text.split())
    run = 1
    while "`" * run in text:
        run += 1
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{'`' * run}{pad}{text}{pad}{'`' * run}"


def _settings_line(session: Session) -> str:
    bits = [f"created {session.created_at}"]
    if session.preset:
        bits.append(f"preset {session.preset}")
    bits += [f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in session.params.items()]
    return "*" + " · ".join(bits) + "*"


def _stats_line(message: Message) -> str:
    stats = message.stats or {}
    bits = []
    if stats.get("prompt_tokens") is not None:
        cached = stats.get("cached_tokens")
        bits.append(counted(stats["prompt_tokens"], "prompt token")
                    + (f" ({cached} from cache)" if cached else ""))
    if stats.get("generated_tokens") is not None:
        bits.append(counted(stats["generated_tokens"], "generated token"))
    if stats.get("tokens_per_s") is not None:
        bits.append(f"{stats['tokens_per_s']:.1f} tok/s")
    if stats.get("ttft_s") is not None:
        bits.append(f"first token {stats['ttft_s']:.2f} s")
    drafts = _drafts(stats)
    if drafts:
        bits.append(drafts)
    if stats.get("finish_reason"):
        bits.append(f"finish: {stats['finish_reason']}")
    if stats.get("answered_by"):
        bits.append(f"answered by {stats['answered_by']}")
    if not message.is_complete:
        bits.append("incomplete (interrupted)")
    return "*" + " · ".join(bits) + "*" if bits else ""


def _drafts(stats: dict[str, Any]) -> str:
    """"drafts 74% accepted · 2.3 tokens per step", as the reply's stats line said it ("" for
    a reply that drafted nothing, or numbers of the wrong kind from an edited import)."""
    figures = [stats.get(k) for k in ("generated_tokens", "drafted_tokens", "accepted_tokens",
                                      "decode_steps")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in figures):
        return ""
    generated, drafted, accepted, steps = figures
    return ReplyStats(generated, 0, None, 0.0, 0.0, "", drafted_tokens=drafted,
                      accepted_tokens=accepted, decode_steps=steps).drafts


def _closed_fences(text: str) -> str:
    """Keep code blocks intact; close one a cut-off reply left open, so it cannot
    swallow the rest of the document."""
    fence = None
    for line in text.splitlines():
        stripped = line.lstrip()
        marker = stripped[:3]
        if marker in ("```", "~~~"):
            run = len(stripped) - len(stripped.lstrip(marker[0]))
            if fence is None:
                fence = marker[0] * run
            elif stripped.startswith(fence) and not stripped[len(fence):].strip(fence[0]).strip():
                fence = None
    return text if fence is None else text.rstrip("\n") + "\n" + fence


# --- JSON ---------------------------------------------------------------------------

def session_to_dict(loaded: LoadedSession) -> dict[str, Any]:
    return {**loaded.session.to_dict(), "messages": [m.to_dict() for m in loaded.messages]}


def sim_run_to_dict(loaded: LoadedSimRun) -> dict[str, Any]:
    return {**loaded.run.to_dict(), "results": [r.to_dict() for r in loaded.results]}


def session_to_json(loaded: LoadedSession) -> str:
    return _dumps({"format": SESSION_FORMAT, "format_version": FORMAT_VERSION,
                   "session": session_to_dict(loaded)} | attachments_doc([loaded]))


def attachments_doc(sessions: Iterable[LoadedSession]) -> dict[str, Any]:
    """The chats' attached files (#51), beside the chats (top-level keys, so a BatchChat
    from before reads the file and imports the chats without them): "attachments", each
    message's files in order ({"message_id", "name", "kind", "size", "skipped",
    "hash"}), and "attachment_texts", each distinct text once ({"hash", "kind", "size",
    "parts"}). Nothing when no chat has files (the document is as before)."""
    refs: list[dict[str, Any]] = []
    texts: dict[str, dict[str, Any]] = {}
    for loaded in sessions:
        for message_id, files in loaded.attachments.items():
            for f in files:
                refs.append({"message_id": message_id} | {k: f[k] for k in (
                    "name", "kind", "size", "skipped", "hash")})
                if f["parts"] is not None:
                    texts.setdefault(f["hash"], {"hash": f["hash"], "kind": f["kind"],
                                                 "size": f["size"], "parts": f["parts"]})
    return {"attachments": refs, "attachment_texts": list(texts.values())} if refs else {}


def stats_to_json(requests: Iterable[RequestStatsRecord],
                  snapshots: Iterable[StatsSnapshot]) -> str:
    return _dumps({"format": STATS_FORMAT, "format_version": FORMAT_VERSION,
                   "request_stats": [r.to_dict() for r in requests],
                   "stats_snapshots": [s.to_dict() for s in snapshots]})


def sim_runs_to_json(runs: Iterable[LoadedSimRun]) -> str:
    return _dumps({"format": SIM_RUNS_FORMAT, "format_version": FORMAT_VERSION,
                   "sim_runs": [sim_run_to_dict(r) for r in runs]})


def export_all(store: Store) -> dict[str, Any]:
    """Everything in the store as one JSON-ready document (import_json reads it back)."""
    loaded = [store.load_session(s.id) for s in store.list_sessions()]
    return {
        "format": EXPORT_FORMAT,
        "format_version": FORMAT_VERSION,
        "sessions": [session_to_dict(one) for one in loaded],
        "sim_runs": [sim_run_to_dict(store.load_sim_run(r.id)) for r in store.list_sim_runs()],
        "request_stats": [r.to_dict() for r in store.list_request_stats()],
        "stats_snapshots": [s.to_dict() for s in store.list_stats_snapshots()],
    } | attachments_doc(loaded)


def export_all_json(store: Store) -> str:
    return _dumps(export_all(store))


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


# --- CSV ----------------------------------------------------------------------------

def request_stats_to_csv(rows: Iterable[RequestStatsRecord]) -> str:
    return _csv(list(RequestStatsRecord.__dataclass_fields__), [r.to_dict() for r in rows])


def stats_snapshots_to_csv(rows: Iterable[StatsSnapshot]) -> str:
    """One column per stat; a snapshot without a stat leaves it empty."""
    dicts = [{"id": s.id, "taken_at": s.taken_at, **s.data} for s in rows]
    return _csv(_union_keys(["id", "taken_at"], dicts), dicts)


def sim_runs_to_csv(runs: Iterable[SimRun]) -> str:
    """One row per run; config as JSON text, each summary value in its own column."""
    dicts = [{"id": r.id, "title": r.title, "started_at": r.started_at,
              "ended_at": r.ended_at, "config": json.dumps(r.config, ensure_ascii=False),
              **{f"summary.{k}": v for k, v in (r.summary or {}).items()}} for r in runs]
    return _csv(_union_keys(["id", "title", "started_at", "ended_at", "config"], dicts), dicts)


def sim_results_to_csv(results: Iterable[SimResult]) -> str:
    return _csv(list(SimResult.__dataclass_fields__), [r.to_dict() for r in results])


def _union_keys(first: list[str], dicts: list[dict[str, Any]]) -> list[str]:
    keys = dict.fromkeys(first)
    for d in dicts:
        keys.update(dict.fromkeys(d))
    return list(keys)


def _csv(columns: list[str], dicts: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for d in dicts:
        writer.writerow({k: _cell(d.get(k)) for k in columns})
    return out.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else value


# --- Files --------------------------------------------------------------------------

def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write via a temp file and rename, so a crash never leaves half a file."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
