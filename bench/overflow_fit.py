"""`python -m bench.overflow_fit`: what the context overflow policy (app/request/overflow.py)
costs on the bundled model: a 60-turn chat (about 11,000 tokens) fitted into the 8,192-token
context under each policy, with 512 and a quarter of the context kept for the reply. Prints
what each kept and dropped, how many prompts it rendered and counted, and the time (the
chat template and tokenizer: the same work Engine.prompt_tokens does). A chat that fits
costs one count; `stop` costs nothing."""

from __future__ import annotations

import time
from typing import Any

from app.request.overflow import Policy, fit
from engine.loader import bundled_model_path, load_model


def chat(turns: int = 60) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(turns):
        out += [{"role": "user", "content": f"Question {i}: " + "tell me about rivers. " * 12},
                {"role": "assistant", "content": f"Answer {i}: " + "Rivers flow to seas. " * 20}]
    return out + [{"role": "user", "content": "And the last one?"}]


def main() -> None:
    loaded = load_model(str(bundled_model_path()))
    tokenizer, context = loaded.tokenizer, loaded.context_length
    messages = chat()

    def count(m: list[Any]) -> int:
        return len(tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=True))

    count(messages)  # the template compiled once
    t = time.perf_counter()
    full = count(messages)
    print(f"context {context}; the chat: {len(messages)} messages, {full} tokens, "
          f"one count {1000 * (time.perf_counter() - t):.1f} ms")
    for policy in (Policy.TRUNCATE_MIDDLE, Policy.ROLLING_WINDOW):
        for room in (512, context // 4):
            seen: list[int] = []

            def counted(m: list[Any], seen: list[int] = seen) -> int:
                seen.append(len(m))
                return count(m)

            t = time.perf_counter()
            out, dropped = fit(messages, counted, context_length=context, answer_room=room,
                               policy=policy)
            ms = 1000 * (time.perf_counter() - t)
            print(f"{policy.value:15s} room {room:5d}: kept {len(out)} messages "
                  f"({full - dropped.tokens} tokens), dropped {dropped.messages} "
                  f"({dropped.tokens} tokens); {len(seen)} counts, {ms:.0f} ms")


if __name__ == "__main__":
    main()
