"""The loaded model's description in words for the status bar and the model button: the
engine says "NAME Q4_1 GGUF, 4/8-bit quantized on cpu", which puzzles ("4/8"?); this says
"NAME — GGUF file, Q4_1: weights held at 4 bits (some at 8) on cpu"."""

from __future__ import annotations

import re

_DESCRIPTION = re.compile(r"^(?P<name>.*?) (?:(?P<ftype>\S+) )?GGUF, (?P<weights>.+?)"
                          r"(?: on (?P<device>.+))?$")
_QUANTIZED = re.compile(r"^(?P<bits>\d+(?:/\d+)*)-bit quantized$")


def weights_words(weights: str) -> str:
    """"4/8-bit quantized" -> "weights held at 4 bits (some at 8)"; a float type ->
    "weights held as float16"."""
    match = _QUANTIZED.match(weights)
    if match is None:
        return f"weights held as {weights}"
    bits = match["bits"].split("/")
    # the engine lists the widths it holds, lowest first; most layers have the lowest
    # (embeddings and a few tensors are kept wider)
    rest = f" (some at {' and '.join(bits[1:])})" if len(bits) > 1 else ""
    return f"weights held at {bits[0]} bits{rest}"


def plain_description(description: str) -> str:
    """The engine's description of a model in words (unchanged when it is not a GGUF's or
    a quantized model's usual form)."""
    match = _DESCRIPTION.match(description)
    if match is not None:
        kind = f"GGUF file, {match['ftype']}" if match["ftype"] else "GGUF file"
        device = f" on {match['device']}" if match["device"] else ""
        return f"{match['name']} — {kind}: {weights_words(match['weights'])}{device}"
    return re.sub(r"\b\d+(?:/\d+)*-bit quantized\b",
                  lambda m: weights_words(m.group(0)), description)
