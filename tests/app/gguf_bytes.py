"""Write GGUF files byte by byte (header, tensor list, zeroed data) for headers that
mx.save_gguf cannot write: K-quant tensors, other architectures, odd files."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

BLOCKS = {0: (4, 1), 2: (18, 32), 3: (20, 32), 12: (144, 256), 15: (292, 256)}  # type: (bytes, weights)


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack("<Q", len(raw)) + raw


def _value(v: Any) -> bytes:
    if isinstance(v, str):
        return struct.pack("<I", 8) + _string(v)
    if isinstance(v, int):
        return struct.pack("<I", 4) + struct.pack("<I", v)
    if isinstance(v, list):  # strings only
        return struct.pack("<IIQ", 9, 8, len(v)) + b"".join(_string(x) for x in v)
    raise TypeError(v)


def write_gguf(path: Path, meta: dict[str, Any],
               tensors: list[tuple[str, tuple[int, ...], int]]) -> Path:
    """`tensors`: (name, dims, GGML type); the data is zeros of the right length."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)))
    for key, value in meta.items():
        out += _string(key) + _value(value)
    offset = 0
    for name, dims, kind in tensors:
        out += _string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", kind, offset)
        n = 1
        for d in dims:
            n *= d
        size = -(-n // BLOCKS[kind][1]) * BLOCKS[kind][0]
        offset += -(-size // 32) * 32
    out += b"\0" * (-len(out) % 32)
    out += b"\0" * offset
    path.write_bytes(bytes(out))
    return path
