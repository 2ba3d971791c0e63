"""A tab's reply to a file too large for the context (issue #51): the request road gives the
prompt the message's passages, and the reply keeps the citations it was given, the planted
fact's among them with its line range (the tiny model on a 2,048-token context)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from app.attachments import Attachment, read_attachment
from app.bridge import EngineBridge
from app.conversation import Conversation

from .history_sync_helpers import FAST, start_bridge, wait_until


@pytest.fixture
async def bridge():
    b = await start_bridge(context_length=2048)
    yield b
    await b.shutdown(timeout=2.0)


async def test_a_reply_to_a_large_file_keeps_its_citations(bridge: EngineBridge,
                                                           tmp_path: Path) -> None:
    rng = random.Random(4)
    words = "river stone market ledger harbor lantern vault code gate tower".split()
    lines = [" ".join(rng.choice(words) for _ in range(10)) + "." for _ in range(1500)]
    lines[700] = "The Osprey vault code is 7719."
    doc = tmp_path / "ledger.txt"
    doc.write_text("\n".join(lines) + "\n")
    att = read_attachment(doc)
    assert isinstance(att, Attachment)
    conv = Conversation(bridge, system_prompt="", params=FAST)
    assert conv.send("What is the Osprey vault code?", attachments=[att])
    await wait_until(lambda: not conv.is_busy)
    reply = conv.messages[-1]
    assert reply.error is None and reply.stats.prompt_tokens <= 2048 - FAST["max_tokens"]
    hit = [c for c in reply.citations if "Osprey vault code is 7719" in c.text]
    assert len(hit) == 1 and hit[0].file == "ledger.txt"
    assert hit[0].first_line <= 701 <= hit[0].last_line
    assert [c.n for c in reply.citations] == list(range(1, len(reply.citations) + 1))
    # a file that fits gives no citations: it went in whole
    small = tmp_path / "note.md"
    small.write_text("A short note.\n")
    note = read_attachment(small)
    assert conv.send("And this?", attachments=[note])
    await wait_until(lambda: not conv.is_busy)
    assert conv.messages[-1].citations == ()


async def test_citations_come_back_after_a_restart(bridge: EngineBridge, tmp_path: Path) -> None:
    from app.history.writer import HistoryWriter

    rng = random.Random(9)
    words = "river stone market ledger harbor lantern vault code gate tower".split()
    lines = [" ".join(rng.choice(words) for _ in range(10)) + "." for _ in range(1500)]
    lines[300] = "The Heron gate opens at dawn."
    doc = tmp_path / "gates.txt"
    doc.write_text("\n".join(lines) + "\n")
    att = read_attachment(doc)
    db = tmp_path / "h.db"
    sync = HistoryWriter.open(db)
    conv = Conversation(bridge, system_prompt="", params=FAST)
    sync.attach(conv, 0)
    assert conv.send("When does the Heron gate open?", attachments=[att])
    await wait_until(lambda: not conv.is_busy)
    given = conv.messages[-1].citations
    assert any("Heron gate opens at dawn" in c.text for c in given)
    sync.detach(conv)
    assert sync.close()
    again = HistoryWriter.open(db)
    restored = again.load_conversation(conv.session_id, bridge)
    assert restored.messages[-1].citations == given
    again.close()


async def test_a_chat_with_a_file_saves_the_kv_of_the_prompt_that_ran(tmp_path: Path) -> None:
    """The KV saved to disk for a chat is its prompt's, files included (the messages are
    fitted as a send fits them before the engine looks its prefix up)."""
    from engine import Engine, EngineConfig

    from .history_sync_helpers import tiny

    t = tiny()
    bridge = EngineBridge()
    await bridge.use_engine(Engine(t.model, t.tokenizer, eos_token_ids=[],
                                   context_length=t.context_length,
                                   config=EngineConfig(kv_disk_dir=str(tmp_path / "kv"))),
                            "tiny")
    try:
        note = tmp_path / "note.md"
        note.write_text("The widget ships on Friday. Ana writes the release notes.\n")
        conv = Conversation(bridge, system_prompt="", params=FAST)
        assert conv.send("When?", attachments=[read_attachment(note)])
        await wait_until(lambda: not conv.is_busy)
        prompt = conv.messages[-1].stats.prompt_tokens
        saved = await bridge.save_kv(conv.prompt_messages())
        assert saved >= prompt  # the file's tokens and the question's, not a short match
    finally:
        await bridge.shutdown(timeout=2.0)


async def test_saving_the_kv_reindexes_a_file_off_the_loop(bridge: EngineBridge, tmp_path: Path,
                                                          monkeypatch) -> None:
    """A chat's KV is saved with its files fitted as a send fits them; a file whose index has
    left the cache since (16 are kept) is indexed again on the worker thread, never on the
    loop (the app's UI thread)."""
    import threading

    from app.attachments import index, messages

    rng = random.Random(6)
    lines = [f"line {i}: " + " ".join(rng.choice(("tide", "quay", "rope", "buoy"))
                                      for _ in range(8)) for i in range(1500)]
    doc = tmp_path / "log.txt"
    doc.write_text("\n".join(lines) + "\n")
    conv = Conversation(bridge, system_prompt="", params=FAST)
    assert conv.send("Which line mentions the buoy first?", attachments=[read_attachment(doc)])
    await wait_until(lambda: not conv.is_busy)
    monkeypatch.setattr(messages, "_shared", None)  # the index is gone from the cache
    built_on: list[str] = []
    real_init = index.ChunkIndex.__init__

    def recording(self, chunks, *rest):
        built_on.append(threading.current_thread().name)
        real_init(self, chunks, *rest)

    monkeypatch.setattr(index.ChunkIndex, "__init__", recording)
    await bridge.save_kv(conv.prompt_messages())
    assert len(built_on) == 1 and built_on[0] != threading.current_thread().name
