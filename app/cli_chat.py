"""A terminal chat on the engine: the app's fallback when no window can be shown."""

from __future__ import annotations

import asyncio
import sys
import threading

from engine.public import CpuOptions, SamplingParams

from .backend import load_local
from .plural import counted
from .request import ChatRequest, Refusal, RefusalCode


async def chat(source: str, params: SamplingParams, system: str | None = None,
               cpu: CpuOptions | None = None, speculative: str = "off") -> None:
    """`cpu`: the engine's CPU switches (None: from the environment); `speculative`: off,
    ngram or draft:PATH (app/speculative.py)."""
    print(f"Loading {source} ...", file=sys.stderr)
    options = {"speculative": speculative} | ({} if cpu is None else {"cpu": cpu})
    backend = load_local(source, **options)
    engine = backend.target
    print(f"{engine.description}. Type a message; an empty line or Ctrl-D quits.",
          file=sys.stderr)
    await engine.start()
    history: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    try:
        while True:
            line = await _read_line("you> ")
            if not line:
                break
            history.append({"role": "user", "content": line})
            try:
                stream = backend.submit(ChatRequest(messages=list(history),
                                                    params=params)).stream
            except Refusal as exc:
                if exc.code != RefusalCode.INVALID_REQUEST:  # only a rejected chat is said
                    raise
                print(f"[refused: {exc}]")
                history.pop()
                continue
            print("bot> ", end="", flush=True)
            async for event in stream:
                print(event.text, end="", flush=True)
            s = stream.stats
            drafts = (f", drafts {s.acceptance:.0%} accepted, {s.tokens_per_step:.1f} "
                      f"tokens per step" if s.acceptance is not None and s.tokens_per_step else "")
            print(f"\n[{counted(s.generated_tokens, 'token')}, {s.tokens_per_s:.1f} tok/s, "
                  f"first token {s.ttft_s or 0:.2f} s{drafts}, {s.finish_reason}]")
            history.append({"role": "assistant", "content": stream.text})
    finally:
        await engine.shutdown()


async def _read_line(prompt: str) -> str:
    """The next line, read on a daemon thread: after Ctrl+C the process exits without
    waiting for a line (asyncio's executor threads are joined at exit, so an `input()` left
    pending there held the exit until Enter)."""
    loop = asyncio.get_running_loop()
    got: asyncio.Future[str] = loop.create_future()

    def deliver(line: str | None, exc: BaseException | None) -> None:
        if got.done():  # cancelled meanwhile (Ctrl+C)
            return
        if exc is not None:
            got.set_exception(exc)
        else:
            got.set_result(line or "")

    def work() -> None:
        try:
            line, exc = _read(prompt), None
        except Exception as e:  # noqa: BLE001 - handed to the awaiting task
            line, exc = None, e
        try:
            loop.call_soon_threadsafe(deliver, line, exc)
        except RuntimeError:  # the loop closed first
            pass

    threading.Thread(target=work, name="terminal-input", daemon=True).start()
    return await got


def _read(prompt: str) -> str:
    try:
        return input(prompt).strip()
    except EOFError:
        return ""
