"""A folder's text files, as git would see them: .gitignore files at every depth applied
(pathspec's GitIgnoreSpec, git's own matching rules), .git itself left out, files that are
not text skipped and counted."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pathspec import GitIgnoreSpec

from .attachment import Part

MAX_FILES = 2000


def _spec(directory: Path) -> GitIgnoreSpec | None:
    ignore = directory / ".gitignore"
    try:
        return GitIgnoreSpec.from_lines(ignore.read_text("utf-8", "replace").splitlines())
    except OSError:
        return None


def folder_parts(root: Path, read_text: Callable[[Path], str | None], max_bytes: int
                 ) -> tuple[tuple[Part, ...], int, int]:
    """(a part per text file, its `source` the path under `root`; bytes read; files
    skipped). Files are taken in sorted order (a stable prompt) until `max_bytes`."""
    parts: list[Part] = []
    total = skipped = 0
    specs: list[tuple[Path, GitIgnoreSpec]] = []
    for current, dirs, files in os.walk(root):
        here = Path(current)
        spec = _spec(here)
        if spec is not None:
            specs.append((here, spec))

        def ignored(path: Path, is_dir: bool) -> bool:
            for base, s in specs:
                if base == path or base not in path.parents:
                    continue
                rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
                if s.match_file(rel):
                    return True
            return False

        dirs[:] = sorted(d for d in dirs if d != ".git" and not ignored(here / d, True))
        for name in sorted(files):
            path = here / name
            if name == ".gitignore" or ignored(path, False) or path.is_symlink():
                skipped += 1
                continue
            if len(parts) >= MAX_FILES:
                skipped += 1
                continue
            try:
                size = path.stat().st_size
            except OSError:
                skipped += 1
                continue
            if total + size > max_bytes:
                skipped += 1
                continue
            text = read_text(path)
            if text is None or not text.strip():
                skipped += 1
                continue
            total += size
            parts.append(Part(text, source=path.relative_to(root).as_posix()))
    return tuple(parts), total, skipped
