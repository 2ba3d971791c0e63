"""The OpenAPI description of POST /v1/embeddings (app/server/openapi.py puts it in its
document): the request as request.py checks it and OpenAI's reply. What depends on the
model is in the descriptions: token ids below its vocabulary size, `dimensions` up to its
width, each input within its context (else 400 with code invalid_request)."""

from __future__ import annotations

from typing import Any

from ..openapi import INT, STR, _errors, _json, _obj, nullable
from .request import FORMATS, MAX_INPUTS

TEXT = {"type": "string", "minLength": 1}
IDS = {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}
INPUT = {"anyOf": [
    TEXT,
    {"type": "array", "minItems": 1, "maxItems": MAX_INPUTS, "items": TEXT},
    IDS | {"description": "one input's token ids, each below the model's vocabulary size"},
    {"type": "array", "minItems": 1, "maxItems": MAX_INPUTS, "items": IDS},
], "description": "a text, texts, one input's token ids, or several inputs' token ids; "
                  "each input within the model's context"}
REQUEST = {
    "type": "object", "required": ["model", "input"],
    "description": "Unknown fields are ignored.",
    "properties": {
        "input": INPUT,
        "encoding_format": nullable({"enum": list(FORMATS), "description":
                                     "base64: the little-endian float32 bytes"}),
        "dimensions": nullable({"type": "integer", "minimum": 1, "description":
                                "the first this many components, renormalised; at most the "
                                "model's width"}),
        "user": nullable(STR),
    },
}
EMBEDDING = _obj({"object": {"const": "embedding"}, "index": INT,
                  "embedding": {"anyOf": [{"type": "array", "items": {"type": "number"}},
                                          STR]}})
REPLY = _obj({"object": {"const": "list"}, "model": STR,
              "data": {"type": "array", "items": EMBEDDING},
              "usage": _obj({"prompt_tokens": INT, "total_tokens": INT})})


def paths(model: dict[str, Any]) -> dict[str, Any]:
    """The path, `model` the served model's field (openapi.model_field)."""
    request = REQUEST | {"properties": REQUEST["properties"] | {"model": model}}
    return {"/v1/embeddings": {"post": {
        "summary": "embeddings: the served model's mean-pooled, normalised hidden states",
        "requestBody": {"required": True, "content": _json(request)},
        "responses": {"200": {"description": "one embedding per input, in order",
                              "content": _json(REPLY)},
                      **_errors(400, 401, 404, 408, 413, 503)}}}}
