"""Models in the Hugging Face hub cache (models--org--name/snapshots/<rev>/), through
huggingface_hub's scan_cache_dir."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path

from huggingface_hub import CachedRepoInfo, CachedRevisionInfo, scan_cache_dir
from huggingface_hub.errors import CacheNotFound

from engine.public import is_mmproj

from . import places
from .entry import ModelEntry
from .inspect import describe

log = logging.getLogger(__name__)


def incomplete_note(repo_path: Path) -> str:
    """Why a repo's download is not whole yet ("" when it is): a pull left partial files."""
    blobs = repo_path / "blobs"
    if blobs.is_dir() and any(blobs.glob("*.incomplete")):
        return "download incomplete (pull it again to resume)"
    return ""


def hub_models(cache: Path) -> Iterator[ModelEntry]:
    """One entry per model repo (its main revision, else its newest), or per .gguf in it."""
    try:
        info = scan_cache_dir(cache)
    except CacheNotFound:
        return
    except (OSError, ValueError) as e:
        log.warning("cannot scan the hub cache %s: %s", cache, e)
        return
    for repo in sorted(info.repos, key=lambda r: r.repo_id.lower()):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        yield from _repo_models(repo, _revision(repo))


def _revision(repo: CachedRepoInfo) -> CachedRevisionInfo:
    revisions = sorted(repo.revisions, key=lambda r: r.last_modified, reverse=True)
    return next((r for r in revisions if "main" in r.refs), revisions[0])


def _repo_models(repo: CachedRepoInfo, rev: CachedRevisionInfo) -> Iterator[ModelEntry]:
    snapshot = Path(rev.snapshot_path)
    partial = incomplete_note(Path(repo.repo_path))
    entries: list[ModelEntry] = []
    if (snapshot / "config.json").is_file():
        entries.append(describe(snapshot, name=repo.repo_id, place=places.HUGGING_FACE))
    entries += [describe(p, name=f"{repo.repo_id}/{p.relative_to(snapshot).as_posix()}"
                         .removesuffix(".gguf"), place=places.HUGGING_FACE)
                for p in sorted(snapshot.rglob("*.gguf")) if not is_mmproj(p)]
    if not entries and partial:  # a pull stopped before its config arrived
        entries.append(ModelEntry(name=repo.repo_id, source=str(snapshot),
                                  place=places.HUGGING_FACE, path=snapshot, format="mlx-lm"))
    for entry in entries:
        if partial:
            entry = dataclasses.replace(entry, reason=partial)
        yield entry
