"""A malformed export file is refused whole, naming where the record is, the record and
the field, never with a raw TypeError or AttributeError; nothing is written (issue #15,
item 5). Real export files written by the app, altered, and imported from disk."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.history.export import export_all, session_to_json
from app.history.files import import_file
from app.storage import SafeStore, Store

from .test_export_import import fill

Doc = dict[str, Any]


def msg(doc: Doc) -> Doc:
    return doc["sessions"][0]["messages"][1]


def set_(get: Callable[[Doc], Doc], key: str, value: Any) -> Callable[[Doc], None]:
    return lambda doc: get(doc).__setitem__(key, value)


def drop(get: Callable[[Doc], Doc], key: str) -> Callable[[Doc], None]:
    return lambda doc: get(doc).pop(key)


def session(doc: Doc) -> Doc:
    return doc["sessions"][0]


def result(doc: Doc) -> Doc:
    return doc["sim_runs"][0]["results"][1]


CASES = [
    (drop(msg, "role"), r"sessions\[0\]\.messages\[1\]: messages record \S+: "
                        r"field role is missing"),
    (drop(msg, "seq"), r"sessions\[0\]\.messages\[1\]: .*field seq is missing"),
    (set_(msg, "seq", "1"), r"messages\[1\]: .*field seq must be an integer \(got '1'\)"),
    (set_(msg, "role", "wizard"), r"field role must be one of 'system', 'user', 'assistant'"),
    (set_(msg, "content", None), r"messages\[1\]: .*field content must be text"),
    (set_(msg, "content", "hi \ud800"), r"field content is not valid text: it holds a lone "
                                        r"surrogate \(U\+D800 at character 3\)"),
    (set_(msg, "is_complete", "yes"), r"field is_complete must be true or false"),
    (set_(msg, "stats", "fast"), r"field stats must be an object or null"),
    (set_(msg, "params", {"stop": ["\udc00"]}), r"field params holds text that is not valid"),
    (set_(msg, "session_id", "another"), r"messages\[1\]: .*field session_id is 'another', "
                                         r"not the id of the record it is in"),
    (set_(session, "title", 5), r"sessions\[0\]: sessions record \S+: field title must be "
                                r"text \(got 5\)"),
    (set_(session, "params", []), r"sessions\[0\]: .*field params must be an object"),
    (set_(session, "messages", 3), r"sessions\[0\]\.messages must be a list \(got int\)"),
    (set_(result, "tokens_per_s", "quick"),
     r"sim_runs\[0\]\.results\[1\]: sim_results record \S+: field tokens_per_s must be a "
     r"number or null"),
    (set_(lambda d: d["request_stats"][0], "prompt_tokens", 1.5),
     r"request_stats\[0\]: .*field prompt_tokens must be an integer or null"),
    (set_(lambda d: d["stats_snapshots"][0], "data", None),
     r"stats_snapshots\[0\]: .*field data must be an object"),
    (lambda d: d.__setitem__("sessions", {"a": 1}), r"sessions must be a list \(got dict\)"),
    (lambda d: d["sessions"].append("chat"), r"sessions\[2\] must be an object \(got str\)"),
]


@pytest.fixture
def source(tmp_path: Path) -> Store:
    s = Store.open(tmp_path / "source.db")
    fill(s)
    yield s
    s.close()


@pytest.fixture
def target(tmp_path: Path) -> SafeStore:
    s = SafeStore.open(tmp_path / "target.db")
    yield s
    s.close()


def written(target: SafeStore) -> list[Any]:
    r = target.reader
    return [*r.list_sessions(), *r.list_sim_runs(), *r.list_request_stats(),
            *r.list_stats_snapshots()]


@pytest.mark.parametrize(("alter", "message"), CASES)
def test_malformed_export_is_refused_naming_record_and_field(source, target, tmp_path,
                                                              alter, message) -> None:
    doc = export_all(source)
    alter(doc)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc), encoding="utf-8")  # \ud800 is written escaped
    with pytest.raises(ValueError, match=message) as info:
        import_file(target, path)
    assert type(info.value) is ValueError
    assert written(target) == []


def test_single_chat_export_without_its_session_is_refused(source, target, tmp_path) -> None:
    doc = json.loads(session_to_json(source.load_session(source.list_sessions()[0].id)))
    del doc["session"]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match="single-chat export has no session object"):
        import_file(target, path)
    assert written(target) == []


def test_the_unaltered_export_still_imports(source, target, tmp_path) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export_all(source)), encoding="utf-8")
    report = import_file(target, path)
    assert report.added["sessions"] == 2 and report.added["messages"] == 4
