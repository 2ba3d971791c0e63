"""Conversation memory across restarts: cached prefixes saved as mlx-lm prompt-cache files.

One `.safetensors` file per saved prefix, written with mlx-lm's `save_prompt_cache`; its
metadata holds the model's fingerprint and the token ids. At start the directory is
indexed from the files' headers (no KV is read); a prompt whose longest saved prefix is
longer than what memory holds loads that file. The directory is kept under `max_bytes`
by deleting the least recently used files. Anything wrong with a file (missing, corrupt,
another model, an unexpected shape) means it is ignored with a log line, and the prompt
is computed as usual; a file that cannot be read at all is renamed `<name>.corrupt` (one
warning, not one at every start). A folder that cannot be written is said so once, by
path; its files are still read, and nothing is saved. Engine-thread only.

Quantized KV (EngineConfig.kv_bits, engine/kv_quant.py): a file's metadata says its form
("kv": "float" or the packing's tag, format batchchat-kv-2; files of format 1 are float).
A file in the engine's form loads as it is; a float file into a quantized engine is packed
as it loads (old files still serve), and so is a 4-bit file from before 4-bit rows were
turned (q4g32 into q4g32h: unpacked, packed again; KvPacking.reads); a quantized file into
an engine of another form is left for the engine that wrote it (as another model's).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.models.cache import load_prompt_cache, save_prompt_cache

from .cache import LayerCaches
from .kv_quant import KvPacking
from .prefix_cache import cache_len, compacted
from .prefix_cache import kv_only as supports  # a file holds plain KV only

log = logging.getLogger(__name__)

SUFFIX = ".safetensors"
PARTIAL = ".partial" + SUFFIX  # mlx names every file it saves *.safetensors
CORRUPT = ".corrupt"  # appended to a file that cannot be read (out of the index's glob)
FORMAT = "batchchat-kv-2"  # 2: "kv" names the form (issue #54)
FORMATS = ("batchchat-kv-1", FORMAT)  # 1: float KV, before the form was written


def fingerprint(model: nn.Module, extra: str = "") -> str:
    """Identifies the weights the KV was computed with: every parameter's name, shape and
    dtype, and a sample of the values of the first, middle and last ones."""
    params = tree_flatten(model.parameters())
    h = hashlib.sha256(extra.encode())
    for name, value in params:
        h.update(f"{name}:{value.shape}:{value.dtype};".encode())
    for _, value in (params[0], params[len(params) // 2], params[-1]):
        sample = value.reshape(-1)[:4096]
        h.update(np.array(sample.astype(mx.float32)).tobytes())
    return h.hexdigest()[:32]


@dataclass(eq=False, slots=True)
class SavedPrefix:
    path: Path
    tokens: np.ndarray
    nbytes: int
    last_used: float

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)


def kv_form(meta: dict[str, str]) -> str:
    """A file's KV form from its metadata: "float" or a KvPacking tag."""
    return meta.get("kv") or "float"


class PrefixStore:
    def __init__(self, directory: Path, model_id: str, max_bytes: int,
                 packing: KvPacking | None = None) -> None:
        self.directory = directory
        self.model_id = model_id
        self.packing = packing  # the engine's KV form (None: float)
        self.form = packing.tag if packing is not None else "float"
        self.max_bytes = max_bytes
        self.saved: list[SavedPrefix] = []  # this model's files
        self.loads = self.saves = 0
        directory.mkdir(parents=True, exist_ok=True)
        self.writable = True  # False once the folder was found read-only (said once)
        why = _not_writable(directory)
        if why is not None:
            self._read_only(why, "saved conversations are read from it, new ones are not "
                                 "saved")
        else:
            for leftover in directory.glob(f"*{PARTIAL}"):  # a save cut off by a crash
                leftover.unlink(missing_ok=True)
        for path in self._files():
            entry = self._index(path)
            if entry is not None:
                self.saved.append(entry)

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.saved)

    def _index(self, path: Path) -> SavedPrefix | None:
        try:
            meta = _read_metadata(path)
            if meta.get("format") not in FORMATS:
                raise ValueError("not a BatchChat KV file")
            if meta.get("model") != self.model_id:
                return None  # another model's: kept for it, unless space runs out
            if kv_form(meta) != self.form and (self.packing is None
                                               or not self.packing.reads(kv_form(meta))):
                return None  # another KV form's: kept for an engine of that form
            tokens = np.asarray(json.loads(meta["tokens"]), dtype=np.int32)
            if tokens.ndim != 1 or not tokens.size:
                raise ValueError("no tokens")
            stat = path.stat()
            return SavedPrefix(path, tokens, stat.st_size, stat.st_mtime)
        except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
            self._set_aside(path, exc)
            return None

    def _set_aside(self, path: Path, exc: BaseException) -> None:
        """A file that cannot be indexed: renamed out of the `*.safetensors` the index reads,
        so it is warned about once (kept, not deleted: it may not be ours)."""
        if not self.writable:
            log.warning("ignoring KV cache file %s: %s (left as it is: the folder is not "
                        "writable)", path, exc)
            return
        aside = path.with_name(path.name + CORRUPT)
        try:
            os.replace(path, aside)
        except OSError as err:
            log.warning("ignoring KV cache file %s: %s (could not rename it: %s)", path, exc,
                        err)
            return
        log.warning("ignoring KV cache file %s: %s; renamed to %s", path, exc, aside.name)

    def _read_only(self, why: str, what: str) -> None:
        self.writable = False
        log.warning("KV cache folder %s is not writable (%s): %s", self.directory, why, what)

    # -- saving -------------------------------------------------------------------------
    def save(self, tokens: np.ndarray, cache: LayerCaches) -> bool:
        """Write `cache` (the KV of `tokens`) unless a file already holds these tokens or
        more; then delete least recently used files beyond the size limit. True when a file
        holds them now; False (never raises: logged) if none could be written."""
        if not supports(cache) or cache_len(cache) < len(tokens):
            return False
        for entry in self.saved:
            if entry.num_tokens >= len(tokens) and np.array_equal(entry.tokens[: len(tokens)],
                                                                  tokens):
                self._touch(entry)
                return True
        if not self.writable:
            return False
        form = b"" if self.packing is None else self.form.encode()  # float: names as before
        name = hashlib.sha256(self.model_id.encode() + form + tokens.tobytes()).hexdigest()[:24]
        path = self.directory / f"{name}{SUFFIX}"
        tmp = self.directory / f"{name}{PARTIAL}"
        meta = {"format": FORMAT, "model": self.model_id, "kv": self.form,
                "tokens": json.dumps(tokens.tolist())}
        try:
            save_prompt_cache(str(tmp), compacted(cache, len(tokens)), meta)
            os.replace(tmp, path)  # a crash never leaves a half-written file under the name
        except Exception as exc:  # noqa: BLE001 - MLX raises RuntimeError; saving is optional
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            why = _not_writable(self.directory)
            if why is not None:  # MLX's own text names only the temporary file
                self._read_only(why, "conversations are no longer saved across restarts")
            else:
                log.warning("could not save KV cache to %s: %s", path, exc)
            return False
        # Files holding a prefix of these tokens are covered by the new one.
        for entry in [e for e in self.saved if e.num_tokens < len(tokens) and e.path != path
                      and np.array_equal(tokens[: e.num_tokens], e.tokens)]:
            self._delete(entry)
        self.saved.append(SavedPrefix(path, tokens, path.stat().st_size, time.time()))
        self.saves += 1
        self._trim()
        return True

    def _trim(self) -> None:
        files = []
        for path in self._files():
            try:
                stat = path.stat()
            except OSError:
                continue
            files.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):  # oldest first, any model's
            if total <= self.max_bytes:
                break
            mine = next((e for e in self.saved if e.path == path), None)
            if mine is not None:
                self._delete(mine)
            else:
                path.unlink(missing_ok=True)
            total -= size

    def _files(self) -> list[Path]:
        return sorted(p for p in self.directory.glob(f"*{SUFFIX}")
                      if not p.name.endswith(PARTIAL))

    # -- loading ------------------------------------------------------------------------
    def longest(self, prompt: list[int]) -> tuple[SavedPrefix | None, int]:
        """The saved prefix sharing the most tokens with `prompt` (all but its last)."""
        limit = len(prompt) - 1
        want = np.asarray(prompt[:limit], dtype=np.int32)
        best, best_n = None, 0
        for entry in self.saved:
            m = min(entry.num_tokens, limit)
            if m <= best_n:
                continue
            diff = np.flatnonzero(entry.tokens[:m] != want[:m])
            n = int(diff[0]) if diff.size else m
            if n > best_n:
                best, best_n = entry, n
        return best, best_n

    def load(self, entry: SavedPrefix) -> LayerCaches | None:
        """The file's cache, or None (logged, and the file forgotten) if it can't be used."""
        try:
            cache, meta = load_prompt_cache(str(entry.path), return_metadata=True)
            if meta.get("model") != self.model_id or not supports(cache) \
                    or cache_len(cache) != entry.num_tokens:
                raise ValueError("its contents don't match its header")
            form = kv_form(meta)
            if form != self.form:  # float KV (or an older form) into this one: packed now
                if self.packing is None or not self.packing.reads(form):
                    raise ValueError(f"its KV form {form} is not {self.form}")
                for layer in cache:
                    layer.keys = self.packing.repack(layer.keys, form)
                    layer.values = self.packing.repack(layer.values, form)
            mx.eval([(layer.keys, layer.values) for layer in cache])
        except Exception as exc:  # noqa: BLE001 - any unreadable file is skipped, not fatal
            log.warning("ignoring KV cache file %s: %s", entry.path, exc)
            self._delete(entry)
            return None
        self.loads += 1
        self._touch(entry)
        return cache

    def _touch(self, entry: SavedPrefix) -> None:
        entry.last_used = time.time()
        try:
            os.utime(entry.path)
        except OSError:
            pass

    def _delete(self, entry: SavedPrefix) -> None:
        self.saved.remove(entry)
        with contextlib.suppress(OSError):  # a read-only folder: forgotten, left on disk
            entry.path.unlink(missing_ok=True)


def _not_writable(directory: Path) -> str | None:
    """Why no file can be created in `directory` (None: one can). Tried, not asked of
    os.access, which answers for the real user and ignores read-only mounts."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-test-"):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def _read_metadata(path: Path) -> dict[str, str]:
    """The metadata mlx-lm's save_prompt_cache wrote, from the safetensors header alone."""
    with path.open("rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        if not 0 < size < 64 << 20:
            raise ValueError("bad safetensors header")
        header = json.loads(f.read(size))
    flat = header.get("__metadata__") or {}
    meta, *_ = tree_unflatten(list(flat.items()))
    if not isinstance(meta, dict):
        raise ValueError("no metadata")
    return meta
