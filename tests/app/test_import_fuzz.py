"""The history import with random files (hypothesis): random JSON, a real export with one
value replaced by random JSON, random text (lone surrogates included), deep nesting. Each
either imports or raises the import's own ValueError (nothing written), never another
exception."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.history.export import EXPORT_FORMAT, FORMAT_VERSION, export_all
from app.history.files import import_file
from app.history.import_json import ImportReport
from app.storage import SafeStore, Store

from .test_export_import import fill

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
        doc = export_all(s)
        s.close()
    return doc


EXPORT = _export()  # a real export of a filled history: sessions, messages, runs, stats


def paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON document (the root excluded)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, inner in items:
        yield at + (key,)
        yield from paths(inner, at + (key,))


PATHS = list(paths(EXPORT))


@contextmanager
def target() -> Iterator[tuple[SafeStore, Path]]:
    """A fresh history to import into (hypothesis examples cannot share pytest's tmp_path)."""
    with tempfile.TemporaryDirectory() as d:
        s = SafeStore.open(Path(d) / "history.db")
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


@EXAMPLES
@given(st.sampled_from(PATHS), JSON, st.booleans())
def test_a_real_export_with_one_value_replaced(path: tuple[Any, ...], value: Any,
                                               delete: bool) -> None:
    doc = json.loads(json.dumps(EXPORT))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    imports_or_refuses(json.dumps(doc))


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
