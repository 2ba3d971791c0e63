"""Read a .safetensors file's header (each tensor's dtype and shape) without its data."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header


class SafetensorsError(ValueError):
    """The file is not readable safetensors (the message says why)."""


@dataclass(frozen=True)
class Tensor:
    dtype: str  # "BF16", "F16", "F32", "U32", ...
    shape: tuple[int, ...]


def read_safetensors_header(path: Path) -> dict[str, Tensor]:
    """Each tensor's dtype and shape; SafetensorsError when the header is broken or the file
    is shorter than its tensors (a partial download)."""
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError(f"{path.name} is truncated ({len(head)} bytes)")
        n = struct.unpack("<Q", head)[0]
        if n > MAX_HEADER:
            raise SafetensorsError(f"{path.name} is not a safetensors file")
        raw = f.read(n)
    if len(raw) < n:
        raise SafetensorsError(f"{path.name} is truncated (inside its header)")
    try:
        header = json.loads(raw)
    except ValueError as e:
        raise SafetensorsError(f"{path.name} has an unreadable header ({e})") from e
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path.name} has an unreadable header")
    tensors: dict[str, Tensor] = {}
    end = 0
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        try:
            tensors[name] = Tensor(str(info["dtype"]), tuple(int(d) for d in info["shape"]))
            end = max(end, int(info["data_offsets"][1]))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise SafetensorsError(f"{path.name}: tensor {name!r} is described badly") from e
    if path.stat().st_size < 8 + n + end:
        raise SafetensorsError(f"{path.name} is truncated ({path.stat().st_size:,} of "
                               f"{8 + n + end:,} bytes)")
    return tensors
