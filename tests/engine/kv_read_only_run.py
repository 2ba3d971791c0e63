"""Run as a process by test_kv_folder_faults.py, without root's power to ignore file
permissions (tests/unprivileged.py): engines on a KV folder they cannot write. Prints one
JSON object: what save_prefix returned (or raised), the cache hits, and the log."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from pathlib import Path

from tests.engine.test_prefix_store import engine_on, finish, first_turn_saved
from tests.tiny_model import make_tiny_model


async def save(engine, tokens: list[int]) -> int | str:
    try:
        return await engine.save_prefix(prompt_tokens=tokens)
    except Exception as exc:  # noqa: BLE001 - the test reports what was raised
        return f"raised {type(exc).__name__}: {exc}"


async def main(kv_dir: Path) -> dict:
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    tiny = make_tiny_model()
    kv_dir.mkdir()
    history, turn2 = await first_turn_saved(tiny, kv_dir)  # one file, saved while writable
    new_chat = [5, 6, 7, 8, 9, 10, 11, 12]
    out: dict = {}

    # Started on a folder that is already read-only: said at start, files still read.
    kv_dir.chmod(0o555)
    try:
        engine = engine_on(tiny, kv_dir)
        out["cached_from_disk"] = finish(engine, turn2).stats.cached_tokens
        finish(engine, new_chat)
        out["saves_at_start_read_only"] = [await save(engine, new_chat + [1]) for _ in range(2)]
    finally:
        kv_dir.chmod(0o755)
    out["log_read_only_at_start"] = log.getvalue()
    log.truncate(0)
    log.seek(0)

    # Made read-only while the engine runs: said at the first save that fails.
    engine = engine_on(tiny, kv_dir)
    finish(engine, new_chat)
    kv_dir.chmod(0o555)
    try:
        out["saves_after_made_read_only"] = [await save(engine, new_chat + [1])
                                             for _ in range(2)]
    finally:
        kv_dir.chmod(0o755)
    out["log_made_read_only"] = log.getvalue()
    out["history_len"] = len(history)
    out["files"] = sorted(p.name for p in kv_dir.iterdir())
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(Path(sys.argv[1])))))
