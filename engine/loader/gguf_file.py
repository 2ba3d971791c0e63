"""A GGUF file's metadata and tensors, read with gguf-py (llama.cpp's own reader).

gguf-py reads every tensor type (MLX's reader knows six) and maps the file: a tensor's
``data`` is a view of the file's pages, read when it is converted. Its metadata parser
slices a numpy memmap for every value, which costs ~2.5 s for a 49k-token vocabulary;
``_Reader`` gives it a plain array view of the same map and skips the byte-order view a
little-endian file never needs (5x faster, the same values).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType

from .errors import ModelLoadError
from .source_check import check_gguf_header


class TruncatedTensor(ValueError):
    """A tensor's data runs past the end of the file."""


class _Reader(GGUFReader):
    @property
    def data(self) -> np.ndarray:
        return self._plain

    @data.setter
    def data(self, value: np.ndarray) -> None:
        self._mapped = value  # keeps the map open
        self._plain = value.view(np.ndarray)

    def _get(self, offset: int, dtype: Any, count: int = 1,
             override_order: Any = None) -> np.ndarray:
        if self.byte_order != "I" or override_order is not None:
            return super()._get(offset, dtype, count, override_order)
        dt = np.dtype(dtype)
        return self._plain[offset:offset + dt.itemsize * int(count)].view(dt)

    def _get_field_parts(self, orig_offs: int, raw_type: int) -> tuple[int, list[Any],
                                                                        list[int], list[Any]]:
        # An array of strings (a vocabulary: 50k-260k of them) read as memoryview slices in
        # one loop, and a numeric one (token types, scores) as one view: gguf-py makes a
        # numpy view or two an element (~7 s for Qwen's 152k tokens). The same parts for
        # ReaderField.contents().
        if raw_type != GGUFValueType.ARRAY or self.byte_order != "I":
            return super()._get_field_parts(orig_offs, raw_type)
        item_type = int(self._plain[orig_offs:orig_offs + 4].view(np.uint32)[0])
        count = int(self._plain[orig_offs + 4:orig_offs + 12].view(np.uint64)[0])
        head = [self._plain[orig_offs:orig_offs + 4], self._plain[orig_offs + 4:orig_offs + 12]]
        scalar = self.gguf_scalar_to_np.get(GGUFValueType(item_type))
        if scalar is not None:  # a numeric array: one view (contents() flattens its parts)
            values = self._get(orig_offs + 12, scalar, count)
            return 12 + values.nbytes, [*head, values], [2], \
                [GGUFValueType.ARRAY, GGUFValueType(item_type)]
        if item_type != GGUFValueType.STRING:
            return super()._get_field_parts(orig_offs, raw_type)
        spans_of = _native_string_spans()
        if spans_of is not None:
            # the native loop finds each string; the parts are its bytes alone (contents()
            # reads only those): 0.2 s instead of 1 s for Qwen's tokens and merges
            spans = np.empty((count, 2), dtype=np.int64)
            end = spans_of(self._plain, orig_offs + 12, count, spans.reshape(-1))
            if end < 0:
                raise ValueError("a string array runs past the end of the file")
            start = orig_offs + 12
            raw = bytes(self._plain[start:end])
            starts = (spans[:, 0] - start).tolist()
            ends = (spans[:, 0] - start + spans[:, 1]).tolist()
            # decoded here, once, as contents() would (a part a string and contents()
            # turning each back into bytes: ~0.5 s of Qwen's 303k tokens and merges)
            strings = _Strings(raw[a:b].decode("utf-8")
                               for a, b in zip(starts, ends, strict=True))
            return end - orig_offs, [*head, strings], [2], \
                [GGUFValueType.ARRAY, GGUFValueType.STRING]
        mv = memoryview(self._plain)
        parts: list[Any] = list(head)
        idxs: list[int] = []
        pos = orig_offs + 12
        unpack = struct.Struct("<Q").unpack_from
        for _ in range(count):
            (n,) = unpack(mv, pos)
            parts.append(mv[pos:pos + 8])
            parts.append(mv[pos + 8:pos + 8 + n])
            idxs.append(len(parts) - 1)
            pos += 8 + n
        if pos > len(mv):
            raise ValueError("a string array runs past the end of the file")
        return pos - orig_offs, parts, idxs, [GGUFValueType.ARRAY, GGUFValueType.STRING]

    def _build_tensors(self, start_offs: int, fields: list[Any]) -> None:
        # name the tensor that runs past the end (gguf-py fails reshaping its short view)
        for field in fields:
            _, name, _, dims, raw_type, offset = field.parts
            kind = GGMLQuantizationType(int(raw_type[0]))
            block, size = GGML_QUANT_SIZES[kind]
            end = start_offs + int(offset[0]) + int(np.prod(dims)) * size // block
            if end > len(self._plain):
                raise TruncatedTensor(f"tensor {bytes(name).decode(errors='replace')!r} "
                                      f"extends past the end")
        super()._build_tensors(start_offs, fields)


def _native_string_spans() -> Any:
    """engine.native's gguf_string_spans, or None where the extension is not built."""
    from .. import native

    return native.built_function("gguf_string_spans")


@dataclass(frozen=True)
class GgufTensor:
    name: str
    kind: GGMLQuantizationType
    shape: tuple[int, ...]  # numpy order: (..., rows, columns)
    data: np.ndarray  # the file's bytes (quantized: (..., rows, bytes a row)) or values

    @property
    def n_bytes(self) -> int:
        return int(self.data.nbytes)


@dataclass(frozen=True)
class GgufFile:
    path: Path
    metadata: dict[str, Any]
    tensors: dict[str, GgufTensor]

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_value(self, key: str, default: Any = None) -> Any:
        """``{architecture}.{key}`` from the metadata."""
        return self.metadata.get(f"{self.architecture}.{key}", default)


class _Strings(list):
    """A string array's values, decoded while it was read (the field's one data part)."""


def _value(field: Any) -> Any:
    if field.types and isinstance(field.parts[-1], _Strings):
        return field.parts[-1]
    value = field.contents()
    if field.types and field.types[0] == GGUFValueType.ARRAY and len(field.types) > 1 \
            and field.types[1] != GGUFValueType.STRING and isinstance(value, list):
        return np.asarray(value)  # token types, scores: arrays, not lists of Python ints
    return value


def read_gguf_file(path: Path) -> GgufFile:
    """The file's metadata (plain values) and tensors (views of the mapped file); every
    failure is a ModelLoadError naming the file."""
    check_gguf_header(path)
    size = path.stat().st_size
    try:
        reader = _Reader(path)
    except (ValueError, IndexError, KeyError, OverflowError, UnicodeDecodeError,
            struct.error) as e:
        raise ModelLoadError(
            f"{path}: cannot read GGUF: the file is truncated or corrupt ({size:,} bytes; "
            f"{e})") from e
    metadata = {name: _value(f) for name, f in reader.fields.items()
                if not name.startswith("GGUF.")}
    tensors = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        tensors[t.name] = GgufTensor(t.name, t.tensor_type, shape, t.data)
    return GgufFile(path, metadata, tensors)
