"""Download a model repo from the Hugging Face hub into the hub cache, resumably.

The files land where huggingface_hub puts them (models--org--name/blobs, snapshots/<commit>/
links, refs/main), so mlx-lm, huggingface_hub and this library all find them. The hub
client lists the repo and each file's ETag and size; the bytes come over plain HTTP with a
Range header, because a partial file (blobs/<etag>.incomplete) is kept when a pull stops
(network gone, Cancel, the app closed) and the next pull goes on from its last byte.
"""

from __future__ import annotations

import fnmatch
import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path, PurePosixPath

from huggingface_hub import HfApi, constants, get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers

from engine.public import format_bytes

from . import places

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# the quantization at the end of a GGUF file name: model.Q4_K_M.gguf, model-f16.gguf
QUANT_TAG = re.compile(r"[._-](I?Q\d\w*|B?F16|F32)\.gguf$", re.IGNORECASE)
# What mlx-lm fetches for a model (mlx_lm.utils), plus GGUF files.
DEFAULT_PATTERNS = ("*.json", "model*.safetensors", "*.py", "tokenizer.model", "*.tiktoken",
                    "tiktoken.model", "*.txt", "*.jsonl", "*.jinja", "*.gguf")
CHUNK = 1 << 20
TIMEOUT_S = 30.0


class PullError(Exception):
    """A pull that did not finish; the message is for the user (what to do next too)."""


class PullCancelled(PullError):
    """Cancel was asked for; what arrived is kept for the next pull."""


@dataclass(frozen=True)
class PullProgress:
    file: str  # the file arriving now
    files_done: int
    files_total: int
    bytes_done: int  # over all files, those already here before this pull included
    bytes_total: int

    @property
    def fraction(self) -> float:
        return self.bytes_done / self.bytes_total if self.bytes_total else 0.0

    def summary(self) -> str:
        """The line under a progress bar: "12 MiB of 94 MiB · file 2 of 7 · model.safetensors"."""
        file = f" · {self.file}" if self.file else ""
        return (f"{format_bytes(self.bytes_done)} of {format_bytes(self.bytes_total)} · file "
                f"{min(self.files_done + 1, self.files_total)} of {self.files_total}{file}")


@dataclass(frozen=True)
class _File:
    name: str
    url: str
    etag: str
    size: int | None


def pull(repo_id: str, *, revision: str = "main", include: Sequence[str] = DEFAULT_PATTERNS,
         cache_dir: Path | None = None, endpoint: str | None = None,
         progress: Callable[[PullProgress], None] | None = None,
         cancel: threading.Event | None = None) -> Path:
    """Download `repo_id` (its files matching `include`) and return its snapshot folder.
    "org/name:Q4_0" takes only that quantization's .gguf of a GGUF repo (as `ollama pull`
    does); a repo with several .gguf files needs one named so.

    cache_dir: the hub cache (default places.hub_cache_dir()); endpoint: the hub (default
    $HF_ENDPOINT, else huggingface.co). Raises PullError, with a message for the user."""
    repo_id, tag = split_tag(repo_id)
    if not REPO_ID.match(repo_id):
        raise PullError(f"{repo_id!r} is not a Hugging Face repo id (like org/name)")
    endpoint = endpoint or places.hub_endpoint()
    cache = cache_dir or places.hub_cache_dir()
    commit, files = _list_files(repo_id, revision, include, tag, endpoint)
    storage = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    total = sum(f.size or 0 for f in files)
    done = 0
    for i, file in enumerate(files):
        def report(n: int, i: int = i, file: _File = file, before: int = done) -> None:
            if progress is not None:
                progress(PullProgress(file.name, i, len(files), before + n, total))
            if cancel is not None and cancel.is_set():
                raise PullCancelled(f"{repo_id}: download cancelled; pull it again to resume")
        _fetch(file, storage / "blobs", snapshot / file.name, report)
        done += file.size or 0
    if progress is not None:
        progress(PullProgress("", len(files), len(files), total, total))
    if revision != commit:
        (storage / "refs").mkdir(parents=True, exist_ok=True)
        (storage / "refs" / revision).write_text(commit)
    return snapshot


def _unreachable(endpoint: str, e: Exception) -> PullError:
    return PullError(f"cannot reach the Hugging Face hub at {endpoint} ({_why(e)}); check the "
                     "network connection (or HF_ENDPOINT). Nothing was downloaded.")


def _why(e: Exception) -> str:
    if isinstance(e, TimeoutError) or "timeout" in type(e).__name__.lower():  # httpx's too
        return f"no answer within {constants.HF_HUB_ETAG_TIMEOUT:g} s"
    if isinstance(e, urllib.error.URLError):
        return str(e.reason)
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def split_tag(spec: str) -> tuple[str, str]:
    """"org/name:Q4_0" -> ("org/name", "Q4_0"); no tag -> ("org/name", "")."""
    repo, _, tag = spec.strip().partition(":")
    return repo.strip(), tag.strip()


def _one_gguf(repo_id: str, names: list[str], tag: str,
              sizes: Mapping[str, int] | None = None) -> list[str]:
    """`names` keeping only the .gguf file(s) `tag` names; several and no tag: an error
    that lists the choices with their sizes (a GGUF repo holds one file per quantization,
    each gigabytes)."""
    sizes = sizes or {}
    ggufs = [n for n in names if n.lower().endswith(".gguf")]
    if tag:
        chosen = [n for n in ggufs if tag.lower() in PurePosixPath(n).name.lower()]
        if not chosen:
            raise PullError(f"{repo_id}: no .gguf file matches {tag!r}; it has: "
                            + ", ".join(ggufs or ["no .gguf files"]))
        return [n for n in names if n not in ggufs or n in chosen]
    if len(ggufs) > 1:
        by_tag: dict[str, int] = {}
        for n in ggufs:
            m = QUANT_TAG.search(n)
            if m:  # split files (-00001-of-00002) add up
                by_tag[m.group(1)] = by_tag.get(m.group(1), 0) + (sizes.get(n) or 0)
        tags = sorted(by_tag)
        example = f"{repo_id}:{tags[0]}" if tags else f"{repo_id}:<part of a file name>"
        listed = ", ".join(f"{t} {format_bytes(by_tag[t])}" if by_tag[t] else t for t in tags)
        raise PullError(f"{repo_id} has {len(ggufs)} .gguf files; name one, e.g. {example}"
                        + (f" (quantizations: {listed})" if tags else
                           f" (files: {', '.join(ggufs[:8])})"))
    return names


def _list_files(repo_id: str, revision: str, include: Sequence[str], tag: str,
                endpoint: str) -> tuple[str, list[_File]]:
    """The commit `revision` names and the files to fetch, each with its ETag and size."""
    try:
        # A hub that takes the connection and never answers must not hang the pull: the
        # metadata calls get huggingface_hub's own timeout ($HF_HUB_ETAG_TIMEOUT, 10 s).
        info = HfApi(endpoint=endpoint).model_info(repo_id, revision=revision,
                                                   files_metadata=True,
                                                   timeout=constants.HF_HUB_ETAG_TIMEOUT)
        commit = info.sha or ""
        siblings = [s for s in info.siblings or []
                    if any(fnmatch.fnmatch(s.rfilename, p) for p in include)]
        names = _one_gguf(repo_id, sorted(s.rfilename for s in siblings), tag,
                          {s.rfilename: s.size or 0 for s in siblings})
        files = []
        for name in names:
            url = hf_hub_url(repo_id, name, revision=commit, endpoint=endpoint)
            meta = get_hf_file_metadata(url, endpoint=endpoint,
                                        timeout=constants.HF_HUB_ETAG_TIMEOUT)
            if not meta.etag:
                raise PullError(f"{repo_id}: the hub gave no ETag for {name}")
            files.append(_File(name, meta.location or url, meta.etag, meta.size))
    except (RepositoryNotFoundError, GatedRepoError) as e:
        gated = isinstance(e, GatedRepoError)
        raise PullError(f"{repo_id}: " + ("the repo is gated: accept its terms on the hub and "
                                          "set HF_TOKEN" if gated else
                                          f"no such model repo on {endpoint} (a private one "
                                          "needs HF_TOKEN)")) from e
    except RevisionNotFoundError as e:
        raise PullError(f"{repo_id}: no revision {revision!r}") from e
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else "?"
        if status == 404:
            raise PullError(f"{repo_id}: no such model repo on {endpoint}") from e
        raise PullError(f"{repo_id}: the hub at {endpoint} answered HTTP {status}") from e
    except PullError:
        raise
    except Exception as e:  # connection refused, DNS, timeouts: httpx2's and the OS's errors
        raise _unreachable(endpoint, e) from e
    if not commit:
        raise PullError(f"{repo_id}: the hub named no commit for {revision!r}")
    if not files:
        raise PullError(f"{repo_id}: no model files in the repo (looked for "
                        f"{', '.join(include)})")
    return commit, files


def _fetch(file: _File, blobs: Path, pointer: Path, report: Callable[[int], None]) -> None:
    """The file's blob (resumed from its .incomplete part) and its snapshot link."""
    blob = blobs / file.etag
    if not (blob.is_file() and (file.size is None or blob.stat().st_size == file.size)):
        blobs.mkdir(parents=True, exist_ok=True)
        part = blob.with_name(blob.name + ".incomplete")
        have = part.stat().st_size if part.is_file() else 0
        if file.size is not None and have > file.size:
            have = 0  # not this file's bytes
        report(have)
        headers = build_hf_headers()
        headers["Accept-Encoding"] = "identity"
        if have and have != file.size:
            headers["Range"] = f"bytes={have}-"
        if file.size is None or have < file.size:
            have = _download(file, part, have, headers, report)
        if file.size is not None and have != file.size:
            raise PullError(f"{file.name}: the download stopped at {have:,} of {file.size:,} "
                            "bytes; pull it again to resume")
        os.replace(part, blob)
    report(file.size or blob.stat().st_size)
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if pointer.is_symlink() or pointer.exists():
        pointer.unlink()
    os.symlink(os.path.relpath(blob, pointer.parent), pointer)


def _download(file: _File, part: Path, have: int, headers: dict[str, str],
              report: Callable[[int], None]) -> int:
    """Append the rest of the file to `part`; the bytes in it after (kept on any error)."""
    request = urllib.request.Request(file.url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            mode = "ab" if have and response.status == 206 else "wb"  # 200: from the start
            have = have if mode == "ab" else 0
            with part.open(mode) as out:
                while chunk := response.read1(CHUNK):  # what has arrived, up to CHUNK
                    out.write(chunk)
                    have += len(chunk)
                    report(have)
    except urllib.error.HTTPError as e:
        raise PullError(f"{file.name}: the hub answered HTTP {e.code}") from e
    except (urllib.error.URLError, HTTPException, OSError) as e:
        size = f" of {file.size:,}" if file.size else ""
        raise PullError(f"{file.name}: the download stopped at {part_size(part):,}{size} "
                        f"bytes ({_why(e)}); pull it again to resume") from e
    return have


def part_size(part: Path) -> int:
    return part.stat().st_size if part.is_file() else 0
