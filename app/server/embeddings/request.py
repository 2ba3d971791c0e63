"""The body of POST /v1/embeddings, checked: the inputs as token ids, the format and the
dimensions. Every refusal is a 400 in OpenAI's shape naming the field (and the input's
index where one input is at fault)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...request import Refusal, RefusalCode
from ..errors import invalid
from ..schemas import _integral

FORMATS = ("float", "base64")
MAX_INPUTS = 2048  # OpenAI's own limit on the items of one request
FIELDS = ("input", "model", "encoding_format", "dimensions", "user")  # others are ignored


@dataclass(frozen=True, slots=True)
class EmbeddingRequest:
    model: str
    inputs: list[list[int]]  # each input's token ids, in the request's order
    encoding_format: str  # "float" or "base64" (little-endian float32, as OpenAI's)
    dimensions: int | None  # None: the model's whole width


def parse(body: Any, encode: Callable[[str], list[int]], vocab_size: int,
          context_length: int, width: int) -> EmbeddingRequest:
    """The checked request; `encode` turns a string into the model's token ids."""
    if not isinstance(body, dict):
        raise invalid("body", "the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model", "'model' must be a non-empty string")
    fmt = body.get("encoding_format") or "float"
    if fmt not in FORMATS:
        raise invalid("encoding_format", "'encoding_format' must be 'float' or 'base64'")
    dims = body.get("dimensions")
    if dims is not None and (not _integral(dims) or dims < 1):
        raise invalid("dimensions", "'dimensions' must be an integer >= 1")
    dims = None if dims is None else int(dims)
    if dims is not None and dims > width:  # the model's limit, not the field's
        raise Refusal(RefusalCode.INVALID_REQUEST, f"'dimensions' is {dims}; this model's "
                      f"embeddings have {width}", param="dimensions")
    if "user" in body and body["user"] is not None and not isinstance(body["user"], str):
        raise invalid("user", "'user' must be a string")
    inputs = _token_lists(body.get("input"), encode, vocab_size)
    for i, ids in enumerate(inputs):
        if not ids:
            raise invalid("input", f"input[{i}] is empty")
        if len(ids) > context_length:
            raise Refusal(RefusalCode.INVALID_REQUEST,
                          f"input[{i}] has {len(ids)} tokens, more than this model's context "
                          f"of {context_length}", param="input")
    return EmbeddingRequest(model, inputs, fmt, dims)


def _token_lists(value: Any, encode: Callable[[str], list[int]],
                 vocab_size: int) -> list[list[int]]:
    """A string, a list of strings, a list of token ids or a list of lists of token ids."""
    if isinstance(value, str):
        return [encode(value)] if value else [[]]
    if not isinstance(value, list) or not value:
        raise invalid("input", "'input' must be a non-empty string or a non-empty array of "
                               "strings, of token ids or of arrays of token ids")
    if len(value) > MAX_INPUTS:
        raise invalid("input", f"'input' has {len(value)} items; at most {MAX_INPUTS}")
    if all(_is_token(v) for v in value):
        return [_checked_ids(value, 0, vocab_size)]
    lists: list[list[int]] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            lists.append(encode(item) if item else [])
        elif isinstance(item, list) and all(_is_token(v) for v in item):
            lists.append(_checked_ids(item, i, vocab_size))
        else:
            raise invalid("input", f"input[{i}] must be a string or an array of token ids "
                                   f"(one kind of item for the whole array)")
    if len({type(item) for item in value}) > 1:
        raise invalid("input", "'input' mixes strings and token arrays")
    return lists


def _is_token(value: Any) -> bool:
    return _integral(value)  # 3 and 3.0, as JSON Schema counts integers


def _checked_ids(ids: Sequence[int], index: int, vocab_size: int) -> list[int]:
    if any(t < 0 for t in ids):
        raise invalid("input", f"input[{index}] has a negative token id")
    bad = next((t for t in ids if t >= vocab_size), None)
    if bad is not None:  # the model's limit, not the field's
        raise Refusal(RefusalCode.INVALID_REQUEST, f"input[{index}] has the token id {bad}, "
                      f"outside this model's vocabulary (0 to {vocab_size - 1})", param="input")
    return [int(t) for t in ids]
