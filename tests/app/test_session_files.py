"""tests/session_files.py: a file built from another is made once a session and copied."""

from __future__ import annotations

from pathlib import Path

from tests import session_files


def test_made_once_for_the_same_source_again_for_a_changed_one(tmp_path, monkeypatch):
    monkeypatch.setattr(session_files, "folder", tmp_path / "kept")
    source = tmp_path / "source.bin"
    source.write_bytes(b"weights")
    made: list[Path] = []

    def make(out: Path) -> None:
        made.append(out)
        out.write_bytes(source.read_bytes()[::-1])

    first = session_files.made_once(source, "reverse", tmp_path / "a.gguf", make)
    first.write_bytes(b"changed by its test")  # a caller's copy is its own
    second = session_files.made_once(source, "reverse", tmp_path / "b.gguf", make)
    assert len(made) == 1 and second.read_bytes() == b"sthgiew"
    session_files.made_once(source, "another recipe", tmp_path / "c.gguf", make)
    source.write_bytes(b"other weights")
    changed = session_files.made_once(source, "reverse", tmp_path / "d.gguf", make)
    assert len(made) == 3 and changed.read_bytes() == b"sthgiew rehto"


def test_outside_a_session_it_is_made_each_time(tmp_path, monkeypatch):
    monkeypatch.setattr(session_files, "folder", None)
    source = tmp_path / "source.bin"
    source.write_bytes(b"x")
    made = []
    for name in ("a", "b"):
        session_files.made_once(source, "r", tmp_path / name, lambda out: (
            made.append(out), out.write_bytes(b"y")))
    assert made == [tmp_path / "a", tmp_path / "b"]
