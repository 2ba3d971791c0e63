"""The history import with random files (hypothesis): random JSON, a real export with one
value replaced by random JSON (in a reply's tool calls and outcomes too), random text (lone
surrogates included), deep nesting. Each either imports or raises the import's own
ValueError (nothing written), never another exception."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.history.convert import conversation
from app.history.export import EXPORT_FORMAT, FORMAT_VERSION, export_all
from app.history.files import import_file
from app.history.import_json import ImportReport
from app.history.paths import shown_messages
from app.storage import SafeStore, Store

from .test_export_import import fill
from .test_export_tree import tree_chat
from .test_history_tool_calls import tool_chat

EXAMPLES = settings(max_examples=60, deadline=None, database=None, derandomize=True)
TEXT = st.text(st.characters(exclude_categories=()), max_size=40)  # surrogates included
SCALAR = (st.none() | st.booleans() | st.integers() | st.floats() | TEXT
          | st.sampled_from([2**63, -(2**63) - 1, 10**30, "", "\ud800", "system", "user"]))
JSON = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12)


def _export() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        s = Store.open(Path(d) / "source.db")
        fill(s)
        tree_chat(s)  # versions at several levels, a shown path, a pin
        tool_chat(s)  # a reply's tool calls and their outcomes
        doc = export_all(s)
        s.close()
    return doc


EXPORT = _export()  # a real export of a filled history: chats (one a tree, one with tool
# calls), runs, stats


def paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON document (the root excluded)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, inner in items:
        yield at + (key,)
        yield from paths(inner, at + (key,))


PATHS = list(paths(EXPORT))


@cache
def _new_history() -> bytes:
    """The file of a new history, made and migrated once a process: an example's history
    is a copy of it. Migrating each example's new file (every table, the search index, a
    synced commit each) took ~60 % of this file's CPU; the import's checks are the same."""
    with tempfile.TemporaryDirectory() as d:
        made = Path(d) / "history.db"
        s = SafeStore.open(made)
        assert s.store is not None, s.last_error
        s.close()
        assert not Path(d, "history.db-wal").exists()  # all of it in the file
        return made.read_bytes()


@contextmanager
def target() -> Iterator[tuple[SafeStore, Path]]:
    """A new history to import into (hypothesis examples cannot share pytest's tmp_path)."""
    with tempfile.TemporaryDirectory() as d:
        Path(d, "history.db").write_bytes(_new_history())
        s = SafeStore.open(Path(d) / "history.db")
        assert s.store is not None, s.last_error
        try:
            yield s, Path(d)
        finally:
            s.close()


def rows(store: SafeStore) -> int:
    r = store.reader
    return sum(len(x) for x in (r.list_sessions(), r.list_sim_runs(), r.list_request_stats(),
                                r.list_stats_snapshots()))


def imports_or_refuses(text: str) -> None:
    """The one property: an ImportReport, or ValueError with nothing written."""
    with target() as (store, d):
        path = d / "export.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            report = import_file(store, path)
        except ValueError as exc:  # the import's own error; any other type fails the test
            assert str(exc)
            assert rows(store) == 0
        else:
            assert isinstance(report, ImportReport)
            assert report.summary()


@EXAMPLES
@given(JSON)
def test_random_json(doc: Any) -> None:
    imports_or_refuses(json.dumps(doc))


@EXAMPLES
@given(st.fixed_dictionaries({"format": st.just(EXPORT_FORMAT),
                              "format_version": st.integers(0, FORMAT_VERSION)},
                             optional={"sessions": JSON, "sim_runs": JSON,
                                       "request_stats": JSON, "stats_snapshots": JSON}))
def test_random_records_in_an_export(doc: dict[str, Any]) -> None:
    imports_or_refuses(json.dumps(doc))


def replaced(path: tuple[Any, ...], value: Any, delete: bool) -> dict[str, Any]:
    """A copy of EXPORT with the value at `path` set to `value` (or deleted)."""
    doc = json.loads(json.dumps(EXPORT))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@EXAMPLES
@given(st.sampled_from(PATHS), JSON, st.booleans())
def test_a_real_export_with_one_value_replaced(path: tuple[Any, ...], value: Any,
                                               delete: bool) -> None:
    imports_or_refuses(json.dumps(replaced(path, value, delete)))


TOOLS = next(s["id"] for s in EXPORT["sessions"] if s["title"] == "tools")
TOOL_PATHS = [p for p in PATHS if {"tool_calls", "tool_results"} & set(p)]


@EXAMPLES
@given(st.sampled_from(TOOL_PATHS), JSON, st.booleans())
def test_an_export_with_a_tool_call_value_replaced(path: tuple[Any, ...], value: Any,
                                                   delete: bool) -> None:
    """Imported or refused; imported, the chat opens and makes its next prompt."""
    doc = replaced(path, value, delete)
    imports_or_refuses(json.dumps(doc))
    with target() as (store, d):
        (d / "export.json").write_text(json.dumps(doc), encoding="utf-8",
                                       errors="surrogatepass")
        try:
            import_file(store, d / "export.json")
        except ValueError:
            return
        conv = conversation(store.reader.load_session(TOOLS), None)  # type: ignore[arg-type]
        assert [m["role"] for m in conv.prompt_messages()][:2] == ["user", "assistant"]


@EXAMPLES
@given(TEXT)
def test_random_text(text: str) -> None:
    imports_or_refuses(text)


@settings(max_examples=20, deadline=None, database=None, derandomize=True)
@given(st.integers(1, 5000), st.sampled_from(["[", "{\"a\": "]),
       st.sampled_from([(), ("sessions", 0, "params"), ("stats_snapshots", 0, "data"),
                        ("sessions", 0, "title")]))
def test_deep_nesting(depth: int, opener: str, where: tuple[Any, ...]) -> None:
    closer = "]" if opener == "[" else "}"
    nested = opener * depth + "1" + closer * depth
    if not where:
        imports_or_refuses(nested)
        return
    doc = json.loads(json.dumps(EXPORT))
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = "NESTED"
    imports_or_refuses(json.dumps(doc).replace('"NESTED"', nested))


# Found by test_a_real_export_with_one_value_replaced: a StorageError ("BatchChat tried to
# store invalid data … FOREIGN KEY constraint failed") for a file, and the import refused.
@pytest.mark.parametrize("link", ["session_id", "message_id", "sim_run_id"])
def test_stats_linking_to_rows_not_there_keep_their_numbers(link: str) -> None:
    doc = json.loads(json.dumps(EXPORT))
    doc["request_stats"][0][link] = "not-there"
    with target() as (store, d):
        path = d / "export.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        assert import_file(store, path).added["request_stats"] == 1
        [stats] = store.reader.list_request_stats()
        assert getattr(stats, link) is None and stats.cached_tokens == 7


def test_stats_of_a_message_the_history_lacks_import_into_the_chat_it_has() -> None:
    """The chat is in the history already (skipped) but without the message the stats name:
    an export made later, imported into an older copy."""
    doc = json.loads(json.dumps(EXPORT))
    stats = doc["request_stats"][0]
    older = json.loads(json.dumps(doc))
    older["request_stats"] = []
    for chat in older["sessions"]:
        chat["messages"] = [m for m in chat["messages"] if m["id"] != stats["message_id"]]
    with target() as (store, d):
        for name, version in (("older.json", older), ("later.json", doc)):
            (d / name).write_text(json.dumps(version), encoding="utf-8")
            import_file(store, d / name)
        [saved] = store.reader.list_request_stats()
        assert saved.message_id is None and saved.session_id == stats["session_id"]


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_an_integer_sqlite_cannot_hold_is_refused_naming_the_field(value: int) -> None:
    """Was a StorageError from SQLite's OverflowError ("BatchChat tried to store invalid
    data"), naming neither the record nor the field."""
    doc = json.loads(json.dumps(EXPORT))
    doc["sessions"][0]["messages"][1]["seq"] = value
    with target() as (store, d):
        path = d / "export.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        with pytest.raises(ValueError, match=r"sessions\[0\]\.messages\[1\]: .*field seq "
                                             r"must fit in 64 bits") as caught:
            import_file(store, path)
        assert type(caught.value) is ValueError and rows(store) == 0


TREE = next(i for i, s in enumerate(EXPORT["sessions"]) if s["title"] == "tree")
IDS = [m["id"] for s in EXPORT["sessions"] for m in s["messages"]]  # this chat's and others'
PARENT = st.none() | st.sampled_from(IDS) | TEXT


@EXAMPLES
@given(st.lists(PARENT, min_size=8, max_size=8), PARENT, st.booleans())
def test_random_parents_import_whole_as_a_tree(parents: list[Any], shown: Any,
                                               v1: bool) -> None:
    """Any parent_ids and shown_leaf_id (this chat's messages, another chat's, unknown, the
    message itself), in a version 2 file or a version 1 file: the whole chat is imported
    as a tree (each parent an earlier message of the chat) and opens."""
    doc = json.loads(json.dumps(EXPORT))
    chat = doc["sessions"][TREE]
    for message, parent in zip(chat["messages"], parents, strict=True):
        message["parent_id"] = parent
    chat["shown_leaf_id"] = shown
    if v1:
        doc["format_version"] = 1
    with target() as (store, d):
        path = d / "export.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        import_file(store, path)
        loaded = store.reader.load_session(chat["id"])
        assert len(loaded.messages) == 8
        seq = {m.id: m.seq for m in loaded.messages}
        assert all(m.parent_id is None or seq.get(m.parent_id, m.seq) < m.seq
                   for m in loaded.messages)
        assert loaded.session.shown_leaf_id in (None, *seq)
        assert shown_messages(loaded)
