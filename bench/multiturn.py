"""Multi-turn chat scenarios (conversation memory): one chat of 10 turns, and 8 chats of
4 turns with a think time between a reply and the next question.

The same scripted user messages go to every client; each client keeps its own replies
(sampled as the run asks), so every side follows its own natural conversation. Figures per
turn: TTFT, prompt and cached tokens; per run: output tokens/s over the wall time, last-turn TTFT.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from app.simulator.workload import percentile

from .chat_clients import ChatClient, Reply

FOLLOW_UPS = ["Go on.", "What happened next?", "Why did that matter to them?",
              "Describe one detail more closely.", "What would you change about it?",
              "Give me an example.", "How does it end?", "Summarize it in two sentences.",
              "Thank you. One last thought?"]


def user_message(chat: int, turn: int, opening: str = "Tell me a short story about") -> str:
    from .scenarios import TOPICS

    if turn == 0:
        return f"{opening} {TOPICS[chat % len(TOPICS)]}."
    return FOLLOW_UPS[(turn - 1 + chat) % len(FOLLOW_UPS)]


@dataclass(slots=True)
class TurnResult:
    chat: int
    turn: int
    ttft_s: float
    e2e_s: float
    tokens: int
    prompt_tokens: int | None
    cached_tokens: int | None
    text: str


async def run_chat(client: ChatClient, chat: int, turns: int, max_tokens: int,
                   think_s: float = 0.0, opening: str = "Tell me a short story about",
                   ) -> list[TurnResult]:
    messages: list[dict[str, Any]] = []
    out = []
    for turn in range(turns):
        if turn and think_s:
            await asyncio.sleep(think_s)
        messages.append({"role": "user", "content": user_message(chat, turn, opening)})
        r: Reply = await client.reply(messages, max_tokens)
        reply: dict[str, Any] = {"role": "assistant", "content": r.text}
        if r.token_ids:
            reply["token_ids"] = r.token_ids
        messages.append(reply)
        out.append(TurnResult(chat, turn, r.ttft_s, r.e2e_s, r.tokens, r.prompt_tokens,
                              r.cached_tokens, r.text))
    return out


def _hit_rate(rows: list[TurnResult]) -> float | None:
    known = [r for r in rows if r.prompt_tokens and r.cached_tokens is not None]
    if not known:
        return None
    return sum(r.cached_tokens for r in known) / sum(r.prompt_tokens for r in known)


async def one_chat(clients: list[ChatClient], turns: int = 10, max_tokens: int = 64,
                   repeats: int = 1) -> list[dict]:
    """`repeats` chats per client, each on another topic, the clients alternated chat by
    chat (a noisy moment hits all of them); TTFT per turn is the median over the chats."""
    rows: dict[str, list[list[TurnResult]]] = {c.name: [] for c in clients}
    for rep in range(repeats):
        for client in clients:
            # Its own opening, so no later scenario's chat starts where this one left off.
            rows[client.name].append(await run_chat(client, rep, turns, max_tokens,
                                                    opening="Tell me, in parts, about"))
    out = []
    for name, chats in rows.items():
        ttft = [statistics.median(chat[t].ttft_s for chat in chats) for t in range(turns)]
        flat = [r for chat in chats for r in chat]
        out.append({"client": name, "repeats": repeats, "ttft_s": ttft,
                    "last_over_first": ttft[-1] / ttft[0], "hit_rate": _hit_rate(flat),
                    "turns": [asdict(r) for r in chats[0]],
                    "all_turns": [asdict(r) for r in flat]})
    return out


async def many_chats(client: ChatClient, chats: int = 8, turns: int = 4,
                     max_tokens: int = 64, think_s: float = 1.0) -> dict:
    t0 = time.perf_counter()
    per_chat = await asyncio.gather(*(run_chat(client, c, turns, max_tokens, think_s)
                                      for c in range(chats)))
    wall = time.perf_counter() - t0
    rows = [r for chat in per_chat for r in chat]
    tokens = sum(r.tokens for r in rows)
    by_turn = [sorted(r.ttft_s for r in rows if r.turn == t) for t in range(turns)]
    return {"client": client.name, "chats": chats, "turns_per_chat": turns,
            "think_s": think_s, "wall_s": wall, "tokens": tokens,
            # Think time is part of the wall: this is the rate users see, like a server's.
            "output_tps": tokens / wall,
            "ttft_median_by_turn": [statistics.median(t) for t in by_turn],
            "ttft_p99_by_turn": [percentile(t, 99) for t in by_turn],
            "last_turn_ttft_median": statistics.median(by_turn[-1]),
            "hit_rate": _hit_rate(rows), "turns": [asdict(r) for r in rows]}
