"""Issue #53: the app's built-in API server keeps /v1/responses' stored responses in the
app's history database, through the history's one writer, so `previous_response_id`, GET
and DELETE work after the app's context is made again on the same file (as after a
restart). Real SQLite files, a real loopback server, the official `openai` client."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import openai
import pytest

from app.bridge import EngineBridge
from app.context import AppContext
from app.history.entries import ApiResponses
from app.history.writer import HistoryWriter
from app.server.in_app import AppServer
from app.settings import Settings
from app.workspace import Workspace
from tests.api_clients import openai_client
from tests.server.test_anthropic_api import recording

from .history_sync_helpers import start_bridge

GREEDY = {"temperature": 0, "max_output_tokens": 3}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@asynccontextmanager
async def app_serving(bridge: EngineBridge, db: Path,
                      settings_file: Path) -> AsyncIterator[openai.AsyncOpenAI]:
    """The app's context on the history file `db` as a start makes it (a Workspace holding
    the writer, the context given its entries), its API server on, an openai client; all
    closed at the end, the history too (as a quit does)."""
    settings = Settings(settings_file)
    settings.server_port = free_port()
    ws = Workspace(bridge, settings, HistoryWriter.open(db))
    ctx = AppContext(settings, bridge)
    ctx.history_reader, ctx.records = ws.history_reader, ws.records
    ctx.api_responses = ws.api_responses
    server = AppServer(ctx)
    assert await server.start(), server.error
    client = openai_client(server.url, api_key="unused", max_retries=0, timeout=60)
    try:
        yield client
    finally:
        await client.close()
        await server.stop()
        assert ws.close_history()  # nothing left unsaved


def rows(db: Path) -> list[str]:
    """The stored responses' ids, as another process reads the history file."""
    other = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in other.execute("SELECT id FROM api_responses ORDER BY id")]
    finally:
        other.close()


async def test_a_stored_response_survives_a_restart_of_the_app(tmp_path: Path) -> None:
    db, settings_file = tmp_path / "history.db", tmp_path / "settings.json"
    bridge = await start_bridge()
    try:
        async with app_serving(bridge, db, settings_file) as client:
            first = await client.responses.create(model="tiny", input="Remember 42.",
                                                  **GREEDY)
            unstored = await client.responses.create(model="tiny", input="Forget me.",
                                                     store=False, **GREEDY)
        assert rows(db) == [first.id]  # in the app's history file, written at once
        assert unstored.id not in rows(db)

        async with app_serving(bridge, db, settings_file) as client:  # as after a restart
            prompts = recording(bridge.local.engine)
            again = await client.responses.retrieve(first.id)
            assert again.output_text == first.output_text and again.id == first.id
            second = await client.responses.create(model="tiny", input="Which number?",
                                                   previous_response_id=first.id, **GREEDY)
            assert "Remember 42." in prompts[-1] and first.output_text in prompts[-1]
            assert "Which number?" in prompts[-1]
            with pytest.raises(openai.NotFoundError):
                await client.responses.retrieve(unstored.id)
            assert sorted(rows(db)) == sorted([first.id, second.id])
            await client.responses.delete(first.id)
            with pytest.raises(openai.NotFoundError):
                await client.responses.retrieve(first.id)
            with pytest.raises(openai.NotFoundError):
                await client.responses.delete(first.id)
            assert rows(db) == [second.id]
            # the second still continues (its own input holds the first's turn)
            third = await client.responses.create(model="tiny", input="And?",
                                                  previous_response_id=second.id, **GREEDY)
            assert "Remember 42." in prompts[-1] and "And?" in prompts[-1]
            assert third.status == "incomplete"
    finally:
        await bridge.shutdown(timeout=2.0)


def test_a_response_written_while_the_file_is_locked_is_kept(tmp_path: Path) -> None:
    """The file locked by another process: the put is queued, the next request still finds
    the response; a quit with no one to ask sets it aside, and the next start writes it
    back (app/storage/replay.py), so it is found after the restart too."""
    db = tmp_path / "history.db"
    writer = HistoryWriter.open(db)
    entry = ApiResponses(writer)
    items = [{"type": "message", "role": "user", "content": "Remember 42."}]
    response = {"id": "resp_1", "object": "response", "output": []}
    entry.put("resp_0", items, response | {"id": "resp_0"})
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        entry.put("resp_1", items, response)
        assert writer.pending_count == 1  # queued, not lost
        assert entry.get("resp_1") == (items, response)
        assert entry.delete("resp_0")  # queued after the put, in order
        assert entry.get("resp_0") is None
        assert not writer.close(set_aside=True)
    finally:
        other.rollback()
        other.close()
    again = HistoryWriter.open(db)  # the set-aside writes are replayed first
    try:
        assert again.start_replay.reports and again.start_replay.reports[0].changes == 2
        entry = ApiResponses(again)
        assert entry.get("resp_1") == (items, response)
        assert entry.get("resp_0") is None and not entry.delete("resp_0")
    finally:
        again.close()
    assert rows(db) == ["resp_1"]
