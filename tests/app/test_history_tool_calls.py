"""Tool calls are kept in the history (issue #30): a reply's calls and each call's outcome
are saved when the reply finishes and whenever an outcome changes; a chat reopened after a
restart has the same calls and outcomes and the same prompt for its next turn. A call that
had no outcome when the app closed reopens failed (nothing can answer it any more).

Real SQLite files, a real OpenAI-style server on loopback that answers with two parallel
calls (tests/app/tool_call_server.py), and the test's real MCP server (stdio) that runs the
call the user allows."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from app.bridge import EngineBridge
from app.conversation import ChatMessage, Conversation
from app.history.convert import CALL_INTERRUPTED
from app.history.export import (
    FORMAT_VERSION,
    export_all,
    export_all_json,
    session_to_markdown,
)
from app.history.import_json import import_document
from app.history.writer import HistoryWriter
from app.mcp import McpManager
from app.remote import Connection
from app.storage import Message, Session, Store
from app.storage.records import utc_now
from app.storage.replay import replay
from app.storage.set_aside import keep
from app.tool_runner import ToolRunner
from tests.mcp.conftest import weather
from tests.remote.broken_server import API_KEY

from .history_sync_helpers import FAST, read_back, start_bridge, wait_until
from .tool_call_server import ANSWER, CALLS, TEXT, ToolCallServer


@dataclass
class Setup:
    db: Path
    bridge: EngineBridge
    server: ToolCallServer
    manager: McpManager

    async def ask(self, sync: HistoryWriter) -> tuple[Conversation, ToolRunner]:
        """A chat on the tool-calling server with the MCP tools; its first reply's two
        calls wait for the user."""
        conv = Conversation(self.bridge, backend="srv",
                            params=FAST | {"mcp_servers": ["weather"], "tool_choice": "auto"})
        sync.attach(conv, 0)
        runner = ToolRunner(conv, self.manager)
        await runner.prepare(["weather"])
        assert conv.send("The weather in Oslo, and 2 + 3?")
        await wait_until(lambda: bool(conv.tool_wait) or not conv.is_busy)
        assert conv.tool_wait, conv.messages[-1].error
        return conv, runner


@asynccontextmanager
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    server = ToolCallServer()
    await server.start()
    conn = Connection(server.url, model="m", api_key=API_KEY, name="srv")
    bridge = await start_bridge()
    bridge.remotes.find = lambda name: conn if name == "srv" else None
    manager = McpManager([weather()])
    try:
        yield Setup(tmp_path / "h.db", bridge, server, manager)
    finally:
        await manager.close()
        await bridge.shutdown(timeout=2.0)
        await server.stop()


def outcomes(db: Path, session_id: str, index: int = 1) -> dict[str, dict[str, str]] | None:
    """The saved outcomes of message `index`, as another process reads them now."""
    _session, messages = read_back(db, session_id)
    return messages[index].tool_results


async def test_calls_and_outcomes_are_saved_and_a_restart_reopens_them(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        sync = HistoryWriter.open(s.db)
        conv, runner = await s.ask(sync)
        reply = conv.messages[1]
        assert (reply.content, reply.tool_calls) == (TEXT, CALLS)
        # saved as the reply finished: both calls, both waiting for the user
        _session, saved = read_back(s.db, conv.session_id)
        assert (saved[1].content, saved[1].tool_calls) == (TEXT, CALLS)
        assert saved[1].tool_results == {"call_weather": {"status": "pending", "text": ""},
                                         "call_add": {"status": "pending", "text": ""}}
        runner.decide(reply, "call_add", allow=False)
        assert outcomes(s.db, conv.session_id)["call_add"] == {"status": "denied", "text": ""}
        runner.decide(reply, "call_weather", allow=True)  # the MCP server runs it
        assert outcomes(s.db, conv.session_id)["call_weather"]["status"] == "running"
        await wait_until(lambda: not conv.is_busy, timeout=30)
        assert conv.messages[2].content == ANSWER
        assert reply.tool_results == {
            "call_weather": {"status": "done", "text": "Sunny in Oslo, 21 °C"},
            "call_add": {"status": "denied", "text": ""}}
        assert outcomes(s.db, conv.session_id) == reply.tool_results
        # the server got the results back: the next prompt is made of these messages
        before = conv.prompt_messages()
        assert [m["role"] for m in before] == ["user", "assistant", "tool", "tool",
                                               "assistant"]
        assert s.server.requests[1]["messages"][2:4] == [
            {"role": "tool", "tool_call_id": "call_weather", "name": "get_weather",
             "content": "Sunny in Oslo, 21 °C"},
            {"role": "tool", "tool_call_id": "call_add", "name": "add",
             "content": "The user denied this tool call."}]
        assert sync.close()

        again = HistoryWriter.open(s.db)  # the app started again on the same file
        [reopened] = again.restore(s.bridge)
        assert [m.role for m in reopened.messages] == ["user", "assistant", "assistant"]
        first = reopened.messages[1]
        assert (first.content, first.tool_calls, first.tool_results) == (
            TEXT, reply.tool_calls, reply.tool_results)
        assert reopened.prompt_messages() == before
        assert again.close()


async def test_calls_without_an_outcome_at_a_quit_reopen_failed(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        sync = HistoryWriter.open(s.db)
        conv, runner = await s.ask(sync)
        runner.decide(conv.messages[1], "call_add", allow=False)
        assert sync.close()  # quit while get_weather still waits for the user
        again = HistoryWriter.open(s.db)
        [reopened] = again.restore(s.bridge)
        reply = reopened.messages[1]
        assert reply.tool_results == {"call_weather": CALL_INTERRUPTED,
                                      "call_add": {"status": "denied", "text": ""}}
        assert not reopened.is_busy  # nothing waits: the chat goes on with a new message
        tool = next(m for m in reopened.prompt_messages() if m["role"] == "tool")
        assert tool["content"] == f"Error: {CALL_INTERRUPTED['text']}"
        assert again.close()


async def test_a_tab_closed_while_a_call_waits_reopens_it_failed(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        sync = HistoryWriter.open(s.db)
        conv, _runner = await s.ask(sync)
        sync.detach(conv)  # the tab closes (the sidebar can open the chat again)
        conv.close()
        reopened = sync.load_conversation(conv.session_id, s.bridge)
        assert list(reopened.messages[1].tool_results.values()) == [CALL_INTERRUPTED] * 2
        assert sync.close()


# -- records: export and import, odd rows, set-aside replay, Markdown ---------------------

OUTCOMES = {"call_weather": {"status": "done", "text": "Sunny in Oslo, 21 °C"},
            "call_add": {"status": "denied", "text": ""}}


def tool_chat(store: Store) -> Session:
    """A chat whose reply made two calls (one ran, one denied), then the answer after."""
    session = Session(title="tools")
    store.save_session(session)
    user = Message(session_id=session.id, seq=0, role="user", content="Oslo, and 2 + 3?")
    reply = Message(session_id=session.id, seq=1, role="assistant", content=TEXT,
                    parent_id=user.id, tool_calls=CALLS, tool_results=OUTCOMES,
                    stats={"finish_reason": "tool_calls"})
    answer = Message(session_id=session.id, seq=2, role="assistant", content=ANSWER,
                     parent_id=reply.id)
    for message in (user, reply, answer):
        store.save_message(message)
    return session


def test_export_and_import_keep_the_calls(store: Store, tmp_path: Path) -> None:
    session = tool_chat(store)
    text = export_all_json(store)
    assert json.loads(text)["format_version"] == FORMAT_VERSION
    other = Store.open(tmp_path / "other.db")
    try:
        assert import_document(other, json.loads(text)).added["messages"] == 3
        reply = other.load_session(session.id).messages[1]
        assert (reply.tool_calls, reply.tool_results) == (CALLS, OUTCOMES)
        assert export_all_json(other) == text
    finally:
        other.close()


def test_a_file_without_the_fields_imports_with_no_calls(store: Store, tmp_path: Path) -> None:
    """Version 1 files and version 2 files written before tool calls have neither field."""
    session = tool_chat(store)
    for version in (1, 2):
        doc = export_all(store)
        doc["format_version"] = version
        for message in doc["sessions"][0]["messages"]:
            del message["tool_calls"], message["tool_results"]
        other = Store.open(tmp_path / f"v{version}.db")
        try:
            import_document(other, doc)
            messages = other.load_session(session.id).messages
            assert [m.content for m in messages] == ["Oslo, and 2 + 3?", TEXT, ANSWER]
            assert all(m.tool_calls is None and m.tool_results is None for m in messages)
        finally:
            other.close()


@pytest.mark.parametrize(("name", "bad"), [
    ("tool_calls", [{"id": "c", "function": {"name": "add"}}]),  # no arguments
    ("tool_calls", [{"id": 7, "type": "function",
                     "function": {"name": "add", "arguments": "{}"}}]),
    ("tool_calls", ["call"]),
    ("tool_calls", {"id": "c"}),
    ("tool_results", {"call_add": {"status": "maybe", "text": ""}}),
    ("tool_results", {"call_add": "done"}),
    ("tool_results", [OUTCOMES]),
])
def test_malformed_calls_are_refused_naming_the_field(store: Store, tmp_path: Path,
                                                      name: str, bad: object) -> None:
    tool_chat(store)
    doc = export_all(store)
    message = doc["sessions"][0]["messages"][1]
    message[name] = bad
    other = Store.open(tmp_path / "other.db")
    try:
        with pytest.raises(ValueError, match=rf"sessions\[0\]\.messages\[1\]: messages record "
                                             rf"{message['id']}: field {name} "):
            import_document(other, doc)
        assert other.list_sessions() == []
    finally:
        other.close()


@pytest.mark.parametrize(("calls", "results"), [
    ("{not json", '{"call_add": '),
    ('"calls"', "[1, 2]"),
    ('[{"id": "c"}]', '{"call_add": {"status": "maybe", "text": ""}}'),
])
async def test_odd_tool_columns_are_left_out(tmp_path: Path, calls: str, results: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """Another program or a hand edit left the columns odd: the chat still opens, the
    reply without its calls, and the log says which field was left out."""
    db = tmp_path / "h.db"
    store = Store.open(db)
    session = tool_chat(store)
    store.close()
    other = sqlite3.connect(db)
    with other:
        other.execute("UPDATE messages SET tool_calls = ?, tool_results = ? WHERE seq = 1",
                      [calls, results])
    other.close()
    bridge = await start_bridge()
    try:
        sync = HistoryWriter.open(db)
        [conv] = sync.restore(bridge)
        assert conv.session_id == session.id
        reply = conv.messages[1]
        assert (reply.content, reply.tool_calls, reply.tool_results) == (TEXT, None, {})
        assert [m["role"] for m in conv.prompt_messages()] == ["user", "assistant",
                                                               "assistant"]
        assert "field tool_calls" in caplog.text and "field tool_results" in caplog.text
        assert "left out" in caplog.text
        assert sync.close()
    finally:
        await bridge.shutdown(timeout=2.0)


def test_a_set_aside_reply_is_replayed_with_its_calls(store: Store, tmp_path: Path) -> None:
    session = tool_chat(store)
    reply = store.load_session(session.id).messages[1]
    later = replace(reply, tool_results={"call_weather": OUTCOMES["call_weather"],
                                         "call_add": {"status": "failed", "text": "boom"}},
                    updated_at=utc_now())
    aside = tmp_path / "h.set-aside.jsonl"
    assert keep(aside, "save_message", (later,), "disk full")
    report = replay(store, aside)
    assert report.messages == {reply.id} and not report.failed
    back = store.load_session(session.id).messages[1]
    assert (back.tool_calls, back.tool_results) == (CALLS, later.tool_results)


def test_markdown_shows_each_call_briefly(store: Store) -> None:
    session = tool_chat(store)
    text = session_to_markdown(store.load_session(session.id))
    assert ("## Assistant\n\nLet me look.\n\n"
            '- Tool call `get_weather {"city": "Oslo"}` — done\n'
            '- Tool call `add {"a": 2, "b": 3}` — denied\n') in text
    assert "Sunny in Oslo" not in text  # the result's text is in the JSON export


def test_a_branch_keeps_its_own_copy_of_the_calls(tmp_path: Path) -> None:
    """A branch saves the calls with its copy of the path; an outcome that changes in the
    chat it came from later does not change the branch's."""
    user = ChatMessage("user", "Oslo, and 2 + 3?")
    reply = ChatMessage("assistant", TEXT, tool_calls=json.loads(json.dumps(CALLS)),
                        tool_results=json.loads(json.dumps(OUTCOMES)),
                        finish_reason="tool_calls")
    conv = Conversation(None, messages=[user, reply])  # type: ignore[arg-type]
    branch = conv.branch(1)
    reply.tool_results["call_add"] = {"status": "failed", "text": "later"}
    reply.tool_calls[0]["function"]["arguments"] = "{}"
    copied = branch.messages[1]
    assert (copied.tool_calls, copied.tool_results) == (CALLS, OUTCOMES)
    sync = HistoryWriter.open(tmp_path / "h.db")
    sync.attach(branch, 0)
    assert sync.close()
    _session, saved = read_back(tmp_path / "h.db", branch.session_id)
    assert (saved[1].tool_calls, saved[1].tool_results) == (CALLS, OUTCOMES)
