"""A request's JSON body, read and parsed, or a Refusal saying why not: too large (413),
not JSON, or nested deeper than any request needs (400; Python's parser would otherwise
raise a RecursionError, a 500, on a body a thousand levels deep)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..request import Refusal, RefusalCode
from .connection import BodyTimeout

# Arrays and objects inside each other. A JSON schema in `response_format` or a tool's
# `parameters` sits 3 to 4 levels down and llguidance takes about 120 levels of it
# (engine/schema_check.py refuses more than 100 with its own message), so no request that
# could be served is refused.
MAX_DEPTH = 128


def too_deep() -> Refusal:
    return Refusal(RefusalCode.INVALID_JSON, f"the JSON body is nested too deep: at most "
                                             f"{MAX_DEPTH} levels of arrays and objects are taken")


async def read_json(request: web.Request, limit: int) -> Any:
    """The parsed body (any JSON value); a Refusal for a body that cannot be taken."""
    import json

    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise Refusal(RefusalCode.REQUEST_TOO_LARGE,
                      f"the request body is larger than {limit} bytes") from None
    except BodyTimeout as exc:  # connection.py's clock; the connection closes after this
        raise Refusal(RefusalCode.REQUEST_TIMEOUT, str(exc)) from None
    try:
        body = json.loads(raw)
    except RecursionError:  # ~1000 levels: the parser's own limit
        raise too_deep() from None
    except ValueError as exc:
        raise Refusal(RefusalCode.INVALID_JSON, f"the body is not valid JSON: {exc}") from None
    if depth_over(body, MAX_DEPTH):
        raise too_deep()
    return body


def depth_over(value: Any, limit: int) -> bool:
    """Whether `value` nests arrays and objects more than `limit` deep (iteratively: no
    recursion on what a client sent)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else \
            item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
