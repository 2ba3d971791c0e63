"""What happens when a chat outgrows the model's context (issue #53): the context overflow
policy, LM Studio's `contextOverflowPolicy` and llama.cpp's `--context-shift`/`--keep`.

- `stop` (the default, as before): the prompt goes as it is and the engine refuses one
  that does not fit (finish reason `context` when the reply reaches the limit).
- `truncate_middle`: keep the system prompt and the first turn (the first user message
  with the replies and tool results that follow it: LM Studio keeps the first user
  message; its replies stay too, so roles still alternate for strict templates), keep
  the latest turns, drop whole turns from the middle, oldest first.
- `rolling_window`: keep the system prompt and the latest turns, drop the oldest.

A turn is a user message and every message after it up to the next user message, so a
message is never cut and a tool call never loses its result. The last turn (the message
being answered) is always kept. Room is kept for the reply: `answer_room` tokens (the
request's max_tokens, at most a quarter of the context, as for attached files). A
truncated prompt is simply a new prompt, so the prefix cache stays exact."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

Message = Mapping[str, Any]


class Policy(StrEnum):
    STOP = "stop"
    TRUNCATE_MIDDLE = "truncate_middle"
    ROLLING_WINDOW = "rolling_window"


# LM Studio's names for the same policies (its `contextOverflowPolicy`)
LM_STUDIO_NAMES = {"stopAtLimit": Policy.STOP, "truncateMiddle": Policy.TRUNCATE_MIDDLE,
                   "rollingWindow": Policy.ROLLING_WINDOW}
NAMES: tuple[str, ...] = tuple(p.value for p in Policy) + tuple(LM_STUDIO_NAMES)


def parse_policy(value: object) -> Policy:
    """A policy from its name (ours or LM Studio's); ValueError naming the choices."""
    if isinstance(value, str):
        if value in LM_STUDIO_NAMES:
            return LM_STUDIO_NAMES[value]
        try:
            return Policy(value)
        except ValueError:
            pass
    raise ValueError(f"context overflow policy must be one of {', '.join(NAMES)}; "
                     f"got {value!r}")


@dataclass(frozen=True, slots=True)
class Dropped:
    """What a policy left out of the prompt: whole messages and the prompt tokens saved."""

    messages: int = 0
    tokens: int = 0

    def __bool__(self) -> bool:
        return self.messages > 0


def turns(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """(the leading system messages, the turns after them); a turn starts at a user
    message (or at the first message after the system prompt, whatever its role)."""
    head = 0
    while head < len(messages) and messages[head].get("role") in ("system", "developer"):
        head += 1
    out: list[list[Message]] = []
    for m in messages[head:]:
        if not out or m.get("role") == "user":
            out.append([m])
        else:
            out[-1].append(m)
    return list(messages[:head]), out


def fit(messages: Sequence[Message], count: Callable[[list[Message]], int], *,
        context_length: int, answer_room: int, policy: Policy
        ) -> tuple[list[Message], Dropped]:
    """`messages` with as few whole turns dropped as make `count(messages)` (the prompt's
    tokens) leave `answer_room` free in the context, by `policy`. Under `stop`, or when
    nothing can be dropped, the messages come back unchanged (the engine then refuses a
    prompt that does not fit, as before)."""
    messages = list(messages)
    if policy is Policy.STOP:
        return messages, Dropped()
    limit = context_length - max(1, answer_room)
    full = count(messages)
    if full <= limit:
        return messages, Dropped()
    system, chat = turns(messages)
    keep_first = 1 if policy is Policy.TRUNCATE_MIDDLE and len(chat) > 2 else 0
    droppable = len(chat) - 1 - keep_first  # the last turn is the one being answered

    def kept(k: int) -> list[Message]:  # k turns dropped after the kept head
        rest = chat[:keep_first] + chat[keep_first + k:]
        return system + [m for turn in rest for m in turn]

    sizes: dict[int, int] = {}  # turns dropped -> the prompt's tokens (each rendered once)

    def size(k: int) -> int:
        if k not in sizes:
            sizes[k] = count(kept(k))
        return sizes[k]

    # the fewest turns dropped that fit: counts shrink as turns go, so a binary search
    lo, hi, best = 1, droppable, droppable
    while lo <= hi:
        mid = (lo + hi) // 2
        if size(mid) <= limit:
            best, hi = mid, mid - 1
        else:
            lo = mid + 1
    if best <= 0:
        return messages, Dropped()
    gone = sum(len(t) for t in chat[keep_first:keep_first + best])
    return kept(best), Dropped(messages=gone, tokens=full - size(best))


# -- a tab's setting (its params' `context_overflow`, kept only when not `stop`) ----------------
KEY = "context_overflow"
WORDS = {Policy.STOP: "Stop at the limit", Policy.TRUNCATE_MIDDLE: "Truncate the middle",
         Policy.ROLLING_WINDOW: "Rolling window"}


def setting(value: object) -> str | None:
    """A tab's saved policy as kept in its params: None for `stop` (the default) and for
    nothing; ValueError for a name that is no policy."""
    if value is None:
        return None
    policy = parse_policy(value)
    return None if policy is Policy.STOP else policy.value


def describe(value: object) -> str:
    """A tab's policy in words ("Stop at the limit" for none)."""
    try:
        return WORDS[parse_policy(value or "stop")]
    except ValueError:
        return str(value)
