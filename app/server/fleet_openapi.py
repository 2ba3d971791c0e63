"""The OpenAPI description of a server of several models (app/server/fleet_api.py): the
model list with each model's state, the load / unload / running paths, and a TTL per
request (`ttl`, `keep_alive`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..fleet import ModelState
from .fleet_api import DURATION
from .openapi import INT, STR, _errors, _get, _json, _obj, nullable

NUMBER = {"type": "number"}
STATE = {"enum": [s.value for s in ModelState]}
TTL = {"ttl": {**NUMBER, "description": "seconds the model stays loaded once idle "
                                        "(negative: for ever; 0: unloaded after this)"},
       "keep_alive": {"anyOf": [NUMBER, {"type": "string", "pattern": f"^{DURATION.pattern}$"}],
                      "description": "as `ttl`, or a duration such as \"5m\" (Ollama's)"}}
INFO = _obj({"id": STR, "source": STR, "state": STATE, "estimate_bytes": INT,
             "estimate": STR, "pinned": {"type": "boolean"}, "ttl": nullable(NUMBER),
             "idle_s": nullable(NUMBER), "running": INT,
             "resident_growth_bytes": nullable(INT),
             "progress": nullable({**NUMBER, "minimum": 0, "maximum": 1,
                                   "description": "while loading: the share loaded"})})
LISTING = _obj({"object": {"const": "list"}, "budget_bytes": INT, "used_bytes": INT,
                "max_models": nullable(INT), "data": {"type": "array", "items": INFO}})
MODELS = _obj({"object": {"const": "list"}, "data": {"type": "array", "items": _obj({
    "id": STR, "object": {"const": "model"}, "created": INT, "owned_by": STR,
    "state": STATE})}})
ESTIMATE = _obj({"model": STR, "estimate_bytes": INT, "estimate": STR, "budget_bytes": INT,
                 "used_bytes": INT})


def _post(summary: str, request: dict[str, Any], reply: dict[str, Any],
          *errors: int) -> dict[str, Any]:
    return {"post": {"summary": summary,
                     "requestBody": {"required": True, "content": _json(request)},
                     "responses": {"200": {"description": "OK", "content": _json(reply)},
                                   **_errors(*errors)}}}


def extend(document: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """`document` (openapi.document with every model's name) with the paths of several
    models; `names`: the models there are."""
    paths = document["paths"]
    for path in ("/v1/chat/completions", "/v1/completions"):
        body = paths[path]["post"]["requestBody"]["content"]["application/json"]
        body["schema"] = body["schema"] | {"properties": body["schema"]["properties"] | TTL}
    model = {"enum": list(names), "description": "a name from GET /models (or an alias, "
                                                "a file name, a path)"}
    load = {"type": "object", "required": ["model"], "properties": {
        "model": model, "pin": {"type": "boolean"},
        "estimate_only": {"type": "boolean", "description": "the estimate, no load"}, **TTL}}
    unload = {"type": "object", "required": ["model"], "properties": {
        "model": model, "cancel": {"type": "boolean", "description": "cancel its running "
                                   "replies (default: wait for them)"},
        "timeout": {**NUMBER, "minimum": 0, "exclusiveMaximum": 1e6,
                    "description": "seconds to wait before cancelling the rest"}}}
    paths |= {
        "/v1/models": _get("every model, loaded or available, with its state",
                           _json(MODELS), 401, 503),
        "/models": _get("every model with its state, estimate, TTL and pin",
                        _json(LISTING), 401),
        "/models/running": _get("the models loading, loaded or unloading", _json(LISTING),
                                401),
        "/models/load": _post("load a model (or only estimate it)", load,
                              {"anyOf": [_obj({"model": INFO}), ESTIMATE]},
                              400, 401, 404, 413, 500, 503),
        "/models/unload": _post("unload a model: its replies finish first, or are "
                                "cancelled", unload,
                                _obj({"model": STR, "unloaded": {"type": "boolean"}}),
                                400, 401, 404, 413),
    }
    return document
