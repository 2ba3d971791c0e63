"""Read a GGUF file's header (metadata and tensor list) without reading its weights.

Plain `struct` over the file: the architecture, context length, file type, every tensor's
shape and type (for the parameter count and the loader's rules), and whether the file is
as long as its tensors say (a partial download is not).
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from math import prod
from pathlib import Path
from typing import Any, BinaryIO

from engine.public import GGUF_FILE_TYPES, ggml_type_name

MAGIC = b"GGUF"
MAX_STRING = 1 << 24  # longer strings or counts mean a corrupt header, not a model
MAX_COUNT = 1 << 28

# bytes per block and weights per block of each GGML tensor type (for the data's length)
_TYPE_SIZES = {0: (4, 1), 1: (2, 1), 30: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32),
               7: (24, 32), 8: (34, 32), 10: (84, 256), 11: (110, 256), 12: (144, 256),
               13: (176, 256), 14: (210, 256), 15: (292, 256)}
# value types: struct format of the fixed-size ones
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
SMALL_ARRAY = 4096  # numbers a layer: read; a vocabulary's scores and types: skipped
_LENGTH = struct.Struct("<Q")
SKIP_CHUNK = 1 << 20  # bytes read at once while skipping a vocabulary's strings
CACHED_HEADERS = 128  # files whose header is kept (the library lists each at every look-up)


class GgufError(ValueError):
    """The file is not a GGUF model this reader can make sense of (the message says why)."""


@dataclass
class GgufHeader:
    version: int
    # arrays of text, and of numbers longer than SMALL_ARRAY, are kept as their length only
    metadata: dict[str, Any]
    tensor_types: Counter[int] = field(default_factory=Counter)  # type -> weights
    tensor_names: set[str] = field(default_factory=set)
    parameters: int = 0
    data_end: int = 0  # where the last tensor's data ends (0: not known)

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def arch_value(self, key: str) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}")

    @property
    def quantization(self) -> str:
        """The file type it names, else the type most of its weights have."""
        ftype = self.metadata.get("general.file_type")
        if isinstance(ftype, int) and ftype in GGUF_FILE_TYPES:
            return GGUF_FILE_TYPES[ftype]
        if self.tensor_types:
            return ggml_type_name(self.tensor_types.most_common(1)[0][0])
        return ""


class _Reader:
    def __init__(self, f: BinaryIO) -> None:
        self.f = f

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) < n:
            raise GgufError("the header is truncated (the file ends inside it)")
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def count(self) -> int:
        n = self.unpack("<Q")
        if n > MAX_COUNT:
            raise GgufError(f"the header is corrupt (a count of {n:,})")
        return n

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > MAX_STRING:
            raise GgufError(f"the header is corrupt (a string of {n:,} bytes)")
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, n = self.unpack("<I"), self.count()
            if item in _SCALARS and n <= SMALL_ARRAY:  # per-layer values (Gemma 4's KV heads)
                return [self.unpack(_SCALARS[item]) for _ in range(n)]
            if item in _SCALARS:  # skipped, not read: a vocabulary's scores are large
                self.f.seek(n * struct.calcsize(_SCALARS[item]), 1)
            elif item == _STRING:  # a vocabulary's tokens: each skipped by its length
                self.skip_strings(n)
            else:
                for _ in range(n):
                    self.value(item)
            return n
        raise GgufError(f"the header is corrupt (value type {kind})")

    def skip_strings(self, n: int) -> None:
        """Move past `n` length-prefixed strings, their lengths read from one buffer at a
        time: a vocabulary is ~50-250k of them, and a read and a seek each took ~10x the
        time."""
        base = self.f.tell()  # the file offset of buf[0]
        buf, pos = b"", 0
        for _ in range(n):
            if pos + 8 > len(buf):
                base += pos
                self.f.seek(base)
                buf, pos = self.f.read(SKIP_CHUNK), 0
                if len(buf) < 8:
                    raise GgufError("the header is truncated (the file ends inside it)")
            length = _LENGTH.unpack_from(buf, pos)[0]
            if length > MAX_STRING:
                raise GgufError(f"the header is corrupt (a string of {length:,} bytes)")
            pos += 8 + length
        self.f.seek(base + pos)


def read_gguf_header(path: Path) -> GgufHeader:
    """The header of the GGUF at `path`; GgufError says why it cannot be read. Kept while
    the file is unchanged (the same inode, size and modification time), so do not modify
    it: the model library describes every file at each look-up (app/fleet/catalog.py), and
    the window's status bar looks models up on each refresh."""
    st = path.stat()
    return _read_unchanged(str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=CACHED_HEADERS)
def _read_unchanged(path: str, dev: int, inode: int, size: int, mtime_ns: int) -> GgufHeader:
    """read_gguf_header's read, keyed by what changes when the file does."""
    return _read(Path(path))


def _read(path: Path) -> GgufHeader:
    with path.open("rb") as f:
        head = f.read(8)
        if not head:
            raise GgufError("the file is empty")
        if head[:4] != MAGIC:
            raise GgufError(f"not a GGUF file (starts with {head[:4]!r})")
        if len(head) < 8:
            raise GgufError("the header is truncated (the file ends inside it)")
        version = struct.unpack("<I", head[4:])[0]
        if version not in (2, 3):
            raise GgufError(f"GGUF version {version} is not supported")
        r = _Reader(f)
        n_tensors, n_meta = r.count(), r.count()
        meta: dict[str, Any] = {}
        for _ in range(n_meta):
            key = r.string()
            meta[key] = r.value(r.unpack("<I"))
        header = GgufHeader(version, meta)
        last: tuple[int, int, int] | None = None  # offset, elements, type of the last tensor
        for _ in range(n_tensors):
            header.tensor_names.add(r.string())
            dims = [r.unpack("<Q") for _ in range(r.unpack("<I"))]
            kind, offset = r.unpack("<I"), r.unpack("<Q")
            n = prod(dims)
            header.tensor_types[kind] += n
            header.parameters += n
            if last is None or offset > last[0]:
                last = (offset, n, kind)
        align = meta.get("general.alignment", 32)
        align = align if isinstance(align, int) and align > 0 else 32
        start = -(-f.tell() // align) * align
        if last is not None and last[2] in _TYPE_SIZES:
            block_bytes, block = _TYPE_SIZES[last[2]]
            header.data_end = start + last[0] + -(-last[1] // block) * block_bytes
        return header
