"""A deeply nested JSON file is refused by the import with its own clear error, like any
other file that is not an export, never a RecursionError; nothing is written (issue #28).
Real files on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.history.files import import_file
from app.storage import SafeStore, Store

from .test_export_import import fill
from .test_import_malformed import written


@pytest.fixture
def target(tmp_path: Path) -> SafeStore:
    s = SafeStore.open(tmp_path / "target.db")
    yield s
    s.close()


def test_a_file_of_100000_nested_lists_is_refused_clearly(target, tmp_path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        import_file(target, path)
    assert type(info.value) is ValueError
    assert str(info.value).startswith(f"{path} is not a BatchChat export: its JSON is too "
                                      "deeply nested")
    assert written(target) == []


def test_an_export_with_a_value_nested_just_parseably_deep_is_refused(target,
                                                                      tmp_path) -> None:
    """Shallow enough for the parser, too deep to copy into records: the same error."""
    source = Store.open(tmp_path / "source.db")
    fill(source)
    from app.history.export import export_all

    doc = export_all(source)
    source.close()
    text = json.dumps(doc)
    deep = "[" * 900 + "]" * 900
    text = text.replace('"temperature": 0.7', f'"temperature": {deep}', 1)
    assert deep in text
    path = tmp_path / "export.json"
    path.write_text(text, encoding="utf-8")
    json.loads(text)  # the parser takes it
    with pytest.raises(ValueError, match="too deeply nested"):
        import_file(target, path)
    assert written(target) == []
