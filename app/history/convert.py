"""Conversion between the chat model (Conversation, ChatMessage) and history records."""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

from app.attachments.fit import Citation
from app.attachments.stored import from_saved
from app.bridge import EngineBridge, Generation, ReplyStats
from app.conversation import ChatMessage, Conversation
from app.images.stored import from_saved as image_from_saved
from app.images.stored import is_saved_image
from app.storage import LoadedSession, Message, RequestStatsRecord, Session

from .paths import message_tree

ANSWERS_KEY = "answers"  # in a session's saved params: the tab's ×N (app.conversation)
INTERRUPTED = "interrupted"  # shown for a reply the app never finished (crash, kill)
# A saved call with no outcome yet (the app, or the chat's tab, closed while it waited or
# ran): nothing can answer it now, so it reopens failed and the model reads why.
CALL_INTERRUPTED = {"status": "failed",
                    "text": "The chat was closed before this call had a result."}


def session_record(conv: Conversation, *, position: int, is_open: bool,
                   created_at: str | None = None) -> Session:
    leaf = conv.tree.leaf
    params = dict(conv.params)
    if conv.answers > 1:  # the tab's ×N, with its settings (none saved for the usual 1)
        params[ANSWERS_KEY] = conv.answers
    session = Session(title=conv.title, system_prompt=conv.system_prompt,
                      params=params, preset=conv.preset, position=position,
                      is_open=is_open, id=conv.session_id,
                      shown_leaf_id=leaf.id if leaf is not None else None)
    if created_at is not None:
        session.created_at = created_at
    return session


def stats_dict(msg: ChatMessage, gen: Generation | None = None) -> dict[str, Any] | None:
    """The per-message numbers saved with a finished reply (None for user messages)."""
    if msg.role != "assistant" or msg.streaming:
        return None
    out: dict[str, Any] = {"finish_reason": msg.finish_reason}
    if msg.stats is not None:
        s = msg.stats
        out.update(prompt_tokens=s.prompt_tokens, generated_tokens=s.generated_tokens,
                   ttft_s=s.ttft_s, tokens_per_s=s.tokens_per_s, e2e_s=s.e2e_s,
                   cached_tokens=s.cached_tokens)
        # speculative decoding (0 drafted: none); a restored reply's stats equal the live ones
        out.update(drafted_tokens=s.drafted_tokens, accepted_tokens=s.accepted_tokens,
                   decode_steps=s.decode_steps)
        if s.dropped_tokens:  # the context overflow policy's
            out.update(dropped_tokens=s.dropped_tokens, dropped_messages=s.dropped_messages)
    raw = gen.stream.stats if gen is not None else None
    if raw is not None:
        out.update(queue_s=raw.queue_s, decode_s=raw.decode_s)
    if msg.error:
        out["error"] = msg.error
    if msg.answered_by:
        out["answered_by"] = msg.answered_by  # "model" or "connection (model)"; never a key
    if msg.backend is not None:
        out["backend"] = msg.backend  # the connection's name (absent: the local engine)
    if msg.model is not None:
        out["model"] = msg.model  # a library model beside the default one (issue #50)
    if msg.reasoning:  # how long and how much it thought (issue #49), for the block's title
        out.update(thinking_s=msg.thinking_s, reasoning_tokens=msg.reasoning_tokens)
    if msg.citations:  # the passages of files it was given (#51), shown under it
        out["citations"] = [dataclasses.asdict(c) for c in msg.citations]
    return out


def message_record(conv: Conversation, msg: ChatMessage, *, created_at: str | None = None,
                   gen: Generation | None = None) -> Message:
    record = Message(session_id=conv.session_id, seq=msg.seq, role=msg.role,  # type: ignore[arg-type]
                     content=msg.content, is_complete=not msg.streaming, params=msg.params,
                     stats=stats_dict(msg, gen), token_ids=token_ids(msg), id=msg.id,
                     parent_id=msg.parent_id)
    if msg.tool_calls:  # copied: the record is queued and the outcomes change in place
        record.tool_calls = copy.deepcopy(msg.tool_calls)
        record.tool_results = copy.deepcopy(msg.tool_results)
    record.reasoning = msg.reasoning or None  # a reasoning model's thinking, apart
    if created_at is not None:
        record.created_at = created_at
    return record


def token_ids(msg: ChatMessage) -> list[int] | None:
    """A finished reply's ids, copied: the saved record is queued and may outlive `msg`."""
    if msg.role != "assistant" or msg.streaming or not msg.token_ids:
        return None
    return list(msg.token_ids)


def request_stats_record(conv: Conversation, msg: ChatMessage,
                         gen: Generation) -> RequestStatsRecord | None:
    raw = gen.stream.stats
    if raw is None:
        return None
    return RequestStatsRecord(request_id=gen.request_id, session_id=conv.session_id,
                              message_id=msg.id, prompt_tokens=raw.prompt_tokens,
                              cached_tokens=raw.cached_tokens,
                              generated_tokens=raw.generated_tokens, ttft_s=raw.ttft_s,
                              tokens_per_s=raw.tokens_per_s, queue_s=raw.queue_s,
                              decode_s=raw.decode_s,
                              finish_reason=gen.finish_reason or raw.finish_reason,
                              drafted_tokens=raw.drafted_tokens,
                              accepted_tokens=raw.accepted_tokens,
                              decode_steps=raw.decode_steps)


def chat_message(record: Message) -> ChatMessage:
    """A saved message as the tab shows it; an incomplete reply is marked interrupted."""
    msg = ChatMessage(record.role, record.content, params=record.params, id=record.id,
                      parent_id=record.parent_id, seq=record.seq)
    if record.role != "assistant":
        return msg
    msg.reasoning = record.reasoning or ""
    if not record.is_complete:
        msg.finish_reason = INTERRUPTED
        return msg
    stats = record.stats or {}
    msg.token_ids = list(record.token_ids) if record.token_ids else None
    msg.finish_reason = _text(stats.get("finish_reason"))
    msg.error = _text(stats.get("error"))
    msg.backend = _text(stats.get("backend"))
    msg.model = _text(stats.get("model"))
    msg.answered_by = _text(stats.get("answered_by")) or ""
    if msg.reasoning:
        msg.thinking_s = _number(stats, "thinking_s", float)
        msg.reasoning_tokens = _number(stats, "reasoning_tokens", int)
    if record.tool_calls:
        msg.tool_calls = copy.deepcopy(record.tool_calls)
        results = record.tool_results or {}
        msg.tool_results = {c["id"]: _outcome(results.get(c["id"])) for c in msg.tool_calls}
    msg.citations = _citations(stats.get("citations"))
    generated = _number(stats, "generated_tokens", int)
    if generated is not None:  # numbers of the wrong kind (an edited import) are left out
        msg.stats = ReplyStats(
            generated_tokens=generated,
            prompt_tokens=_number(stats, "prompt_tokens", int) or 0,
            ttft_s=_number(stats, "ttft_s", float),
            tokens_per_s=_number(stats, "tokens_per_s", float) or 0.0,
            e2e_s=_number(stats, "e2e_s", float) or 0.0,
            finish_reason=str(stats.get("finish_reason") or ""), error=msg.error,
            cached_tokens=_number(stats, "cached_tokens", int) or 0,
            drafted_tokens=_number(stats, "drafted_tokens", int) or 0,
            accepted_tokens=_number(stats, "accepted_tokens", int) or 0,
            decode_steps=_number(stats, "decode_steps", int) or 0,
            dropped_tokens=_number(stats, "dropped_tokens", int) or 0,
            dropped_messages=_number(stats, "dropped_messages", int) or 0)
    return msg


def conversation(loaded: LoadedSession, bridge: EngineBridge) -> Conversation:
    s = loaded.session
    messages = [chat_message(m) for m in loaded.messages]
    for msg in messages:  # a user message's files (#51) and images (#52), kept together
        saved = loaded.attachments.get(msg.id, ())
        msg.attachments = tuple(from_saved(f) for f in saved if not is_saved_image(f))
        msg.images = tuple(i for i in map(image_from_saved, filter(is_saved_image, saved))
                           if i is not None)
    tree = message_tree(messages, s.shown_leaf_id)
    params = dict(s.params)
    answers = params.pop(ANSWERS_KEY, 1)  # not a sampling setting: the tab's ×N
    conv = Conversation(bridge, title=s.title, system_prompt=s.system_prompt,
                        params=params, session_id=s.id, preset=s.preset,
                        tree=tree, backend=last_backend(tree.path),
                        model=last_model(tree.path))
    if isinstance(answers, int) and not isinstance(answers, bool):
        conv.set_answers(answers)  # a hand-edited value is brought into range
    return conv


def last_backend(messages: list[ChatMessage]) -> str | None:
    """A restored chat goes on where the shown path's last reply came from (None: the
    local engine)."""
    replies = [m for m in messages if m.role == "assistant" and m.finish_reason is not None]
    return replies[-1].backend if replies else None


def last_model(messages: list[ChatMessage]) -> str | None:
    """A restored chat goes on with the library model of the shown path's last reply
    (None: the default model), as with its backend."""
    replies = [m for m in messages if m.role == "assistant" and m.finish_reason is not None]
    return replies[-1].model if replies else None


def _outcome(saved: dict[str, str] | None) -> dict[str, str]:
    if saved is None or saved["status"] in ("pending", "running"):
        return dict(CALL_INTERRUPTED)
    return dict(saved)


def _citations(saved: Any) -> tuple[Citation, ...]:
    """A reply's saved citations; any of the wrong shape (an edited import) left out."""
    out = []
    for c in saved if isinstance(saved, list) else ():
        try:
            out.append(Citation(**c))
        except TypeError:
            continue
    return tuple(out)


def _number(stats: dict[str, Any], key: str, kind: type[int] | type[float]) -> Any:
    value = stats.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if kind is int:
        return value if isinstance(value, int) else None
    return float(value) if math.isfinite(value) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
