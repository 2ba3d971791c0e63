"""Plain records for each table, and their conversion to and from SQLite rows.

Ids are uuid4 strings made in Python, so the app can refer to a row before it is
saved and an export can be imported into another database without re-keying.
Timestamps are UTC ISO-8601 strings with microseconds (they sort as text).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import reprlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Self

from app.storage.record_check import check_fields, field_default, field_problem

log = logging.getLogger(__name__)

Role = Literal["system", "user", "assistant"]


def new_id() -> str:
    return str(uuid.uuid4())


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Record:
    """Shared row conversion; subclasses name their table and special columns."""

    TABLE: ClassVar[str]
    id: str
    JSON_FIELDS: ClassVar[tuple[str, ...]] = ()
    BOOL_FIELDS: ClassVar[tuple[str, ...]] = ()

    def to_row(self) -> dict[str, Any]:
        row = dataclasses.asdict(self)  # type: ignore[call-overload]
        for name in self.JSON_FIELDS:
            if row[name] is not None:
                row[name] = json.dumps(row[name], ensure_ascii=False)
        for name in self.BOOL_FIELDS:
            row[name] = int(bool(row[name]))
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Self:
        values = dict(row)
        for name in cls.JSON_FIELDS:
            if values.get(name) is not None:
                values[name] = cls._json_field(values, name)
        for name in cls.BOOL_FIELDS:
            values[name] = bool(values[name])
        return cls(**values)

    @classmethod
    def _json_field(cls, values: dict[str, Any], name: str) -> Any:
        """A JSON column's value; one that is not valid JSON, or not of its field's kind
        (written by another program, or damaged), is left out (logged) so the rest of the
        chat still loads."""
        try:
            value = json.loads(values[name])
            problem = field_problem(cls, name, value) or cls.value_problem(name, value)
        except (TypeError, ValueError) as exc:
            problem = f"is not valid JSON ({exc})"
        if problem is None:
            return value
        log.warning("%s record %s: field %s %s; left out", cls.TABLE, values.get("id"), name,
                    problem)
        return field_default(cls, name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form used by export (the inverse of from_dict)."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown {cls.TABLE} fields: {', '.join(sorted(unknown))}")
        check_fields(cls, data)
        cls.check_dict(data)
        return cls(**data)

    @classmethod
    def check_dict(cls, data: dict[str, Any]) -> None:
        """Refuse values SQLite would store but the app could not use (ValueError)."""

    @classmethod
    def value_problem(cls, name: str, value: Any) -> str | None:
        """What is wrong with a JSON field's value beyond its type (None: nothing); a
        stored one with a problem is left out, an imported one refused."""
        return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bad_field(table: str, data: dict[str, Any], name: str, expected: str) -> ValueError:
    return ValueError(f"{table} record {data.get('id', '?')}: field {name} must be {expected} "
                      f"(got {reprlib.repr(data[name])})")


@dataclass(slots=True)
class Session(Record):
    """One chat tab: its settings, place in the tab bar, and whether it is open."""

    TABLE: ClassVar[str] = "sessions"
    JSON_FIELDS: ClassVar[tuple[str, ...]] = ("params",)
    BOOL_FIELDS: ClassVar[tuple[str, ...]] = ("is_open", "pinned")

    title: str = "New chat"
    system_prompt: str = ""
    # Sampling settings: temperature, top_p, top_k, min_p, repetition_penalty,
    # max_tokens, seed, stop (list).
    params: dict[str, Any] = field(default_factory=dict)
    preset: str | None = None
    position: int = 0
    is_open: bool = True
    # The last message of the path the tab shows (None: the newest message's path).
    shown_leaf_id: str | None = None
    pinned: bool = False  # listed first in the sidebar
    id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=utc_now)
    updated_at: str = field(default_factory=utc_now)


@dataclass(slots=True)
class Message(Record):
    """One turn; is_complete is False while a reply streams or after it was cut off."""

    TABLE: ClassVar[str] = "messages"
    JSON_FIELDS: ClassVar[tuple[str, ...]] = ("params", "stats", "token_ids", "tool_calls",
                                              "tool_results")
    BOOL_FIELDS: ClassVar[tuple[str, ...]] = ("is_complete",)

    session_id: str
    seq: int
    role: Role
    content: str = ""
    is_complete: bool = True
    params: dict[str, Any] | None = None
    # prompt_tokens, cached_tokens, generated_tokens, ttft_s, tokens_per_s, finish_reason,
    # queue_s, decode_s
    stats: dict[str, Any] | None = None
    # A finished reply's generated token ids (app.conversation.ChatMessage.token_ids); they
    # belong to this exact content, so whatever rewrites the content drops them.
    token_ids: list[int] | None = None
    # The message this one follows (None: a first message). A chat is a tree: versions of
    # a reply or of an edited message are siblings; seq orders them by when they were made.
    parent_id: str | None = None
    # A reply that called tools: its calls in OpenAI's shape ({"id", "type": "function",
    # "function": {"name", "arguments": JSON text}}) and each call's outcome by call id
    # ({"status": pending | running | done | failed | denied, "text": the result or why}).
    tool_calls: list[dict[str, Any]] | None = None
    tool_results: dict[str, Any] | None = None
    # A reasoning model's thinking before the answer (`content`); None: none (issue #49)
    reasoning: str | None = None
    id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=utc_now)
    updated_at: str = field(default_factory=utc_now)

    @classmethod
    def check_dict(cls, data: dict[str, Any]) -> None:
        ids = data.get("token_ids")
        if ids is not None and not (isinstance(ids, list) and all(_is_int(i) for i in ids)):
            raise _bad_field(cls.TABLE, data, "token_ids", "a list of integers or null")
        for name in ("tool_calls", "tool_results"):
            if data.get(name) is not None and cls.value_problem(name, data[name]):
                raise _bad_field(cls.TABLE, data, name, TOOL_SHAPES[name])

    @classmethod
    def value_problem(cls, name: str, value: Any) -> str | None:
        if value is None or name not in TOOL_SHAPES:
            return None
        fits = _is_call if name == "tool_calls" else _is_outcome
        items = value if name == "tool_calls" else list(value.values())
        ok = all(fits(v) for v in items) and (name == "tool_calls" or all(
            isinstance(k, str) for k in value))
        return None if ok else f"is not {TOOL_SHAPES[name]}"


TOOL_SHAPES = {
    "tool_calls": "a list of tool calls ({id, type, function: {name, arguments}}) or null",
    "tool_results": "an object of call outcomes ({status, text} by call id) or null",
}
TOOL_STATUSES = ("pending", "running", "done", "failed", "denied")


def _is_call(call: Any) -> bool:
    """A call the app can show and send back (app/tools/calls.py's ToolCall.openai())."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return False
    fn = call["function"]
    return isinstance(call.get("id"), str) and isinstance(fn.get("name"), str) \
        and isinstance(fn.get("arguments"), str)


def _is_outcome(outcome: Any) -> bool:
    return isinstance(outcome, dict) and outcome.get("status") in TOOL_STATUSES \
        and isinstance(outcome.get("text"), str)


@dataclass(slots=True)
class RequestStatsRecord(Record):
    """The engine's numbers for one finished request (chat or simulation)."""

    TABLE: ClassVar[str] = "request_stats"

    request_id: str
    session_id: str | None = None
    message_id: str | None = None
    sim_run_id: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int = 0  # of prompt_tokens, reused from the engine's prefix cache
    generated_tokens: int | None = None
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    queue_s: float | None = None
    decode_s: float | None = None
    finish_reason: str | None = None
    finished_at: str = field(default_factory=utc_now)
    id: str = field(default_factory=new_id)
    # speculative decoding (issue #31): draft tokens checked, of those accepted, and the
    # decode steps the reply took; 0 for requests that drafted nothing and rows from before
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    decode_steps: int = 0

    @classmethod
    def check_dict(cls, data: dict[str, Any]) -> None:
        for name in ("cached_tokens", "drafted_tokens", "accepted_tokens", "decode_steps"):
            if name in data and not _is_int(data[name]):
                raise _bad_field(cls.TABLE, data, name, "an integer")


@dataclass(slots=True)
class StatsSnapshot(Record):
    """The engine's aggregate stats at one moment (active, queued, tokens_per_s, ...)."""

    TABLE: ClassVar[str] = "stats_snapshots"
    JSON_FIELDS: ClassVar[tuple[str, ...]] = ("data",)

    data: dict[str, Any]
    taken_at: str = field(default_factory=utc_now)
    id: str = field(default_factory=new_id)


@dataclass(slots=True)
class SimRun(Record):
    """One simulation run; ended_at and summary are filled in when it finishes."""

    TABLE: ClassVar[str] = "sim_runs"
    JSON_FIELDS: ClassVar[tuple[str, ...]] = ("config", "summary")

    title: str = "Simulation"
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    started_at: str = field(default_factory=utc_now)
    ended_at: str | None = None
    id: str = field(default_factory=new_id)


@dataclass(slots=True)
class SimResult(Record):
    """One simulated request's outcome within a run."""

    TABLE: ClassVar[str] = "sim_results"

    sim_run_id: str
    seq: int
    prompt: str
    reply: str = ""
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    finish_reason: str | None = None
    queue_s: float | None = None
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    id: str = field(default_factory=new_id)


@dataclass(slots=True)
class LoadedSession:
    session: Session
    messages: list[Message]
    # each message's attached files by message id (app/storage/attachments.py's dicts)
    attachments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass(slots=True)
class SessionSummary:
    """A row of the history list: last_active_at is the newest message (or the session)."""

    session: Session
    message_count: int
    last_active_at: str


@dataclass(slots=True)
class LoadedSimRun:
    run: SimRun
    results: list[SimResult]


@dataclass(slots=True)
class SearchHit:
    """A session or sim run matching a search; message_id names the matching message."""

    kind: Literal["session", "sim_run"]
    id: str
    title: str
    snippet: str
    message_id: str | None = None
