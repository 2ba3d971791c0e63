"""What llguidance cannot be trusted with in a JSON schema, found before it sees one.

- Nesting deeper than MAX_SCHEMA_DEPTH: llguidance refuses it with "recursion limit
  exceeded at line 1 column N", which does not say what to change.
- An integer beyond 64 bits: llguidance raises a plain ValueError ("Value is not JSON
  serializable"), not a grammar error.
- A cycle of subschemas that apply to the same value (`{"$ref": "#"}`, `$defs` a -> b -> a,
  an `allOf` that refers back to itself): JSON Schema leaves such "infinite recursive
  nesting" undefined, and llguidance builds a grammar that matches nothing, so the reply
  would be "" ended as if complete. A recursion through `properties` or `items` moves to a
  smaller value and is fine (a tree).

Every walk here is iterative: a schema nested thousands deep cannot overflow the stack.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

MAX_SCHEMA_DEPTH = 100  # objects and arrays; llguidance's own limit is a little above
INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1  # what llguidance reads: i64 and u64
# keywords whose subschemas apply to the value itself, not to a part of it
SAME_VALUE_LISTS = ("allOf", "anyOf", "oneOf")
SAME_VALUE_ONE = ("not", "if", "then", "else")
# keywords holding definitions (used only where a $ref reaches them) or data, not schemas
NOT_SCHEMAS = ("$defs", "definitions", "enum", "const", "default", "examples")


def schema_problem(schema: Any) -> str | None:
    """Why `schema` cannot be used (one sentence), or None."""
    return _too_deep(schema) or _big_integer(schema) or _ref_cycle(schema)


def _children(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        yield from ((str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        yield from ((str(i), v) for i, v in enumerate(value))


def _too_deep(schema: Any) -> str | None:
    stack = [(schema, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping | list):
            if depth > MAX_SCHEMA_DEPTH:
                return (f"the schema is nested too deep: more than {MAX_SCHEMA_DEPTH} levels "
                        "of objects and arrays")
            stack.extend((v, depth + 1) for _, v in _children(value))
    return None


def _big_integer(schema: Any) -> str | None:
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, int) and not isinstance(value, bool) \
                and not INT_MIN <= value <= INT_MAX:
            return (f"the integer at '{where or '/'}' ({_short(value)}) is beyond the 64-bit "
                    "integers a schema may hold")
        stack.extend((v, f"{where}/{k}") for k, v in _children(value))
    return None


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 30 else f"{text[:12]}…{text[-6:]} ({len(text)} digits)"


def _ref_cycle(schema: Any) -> str | None:
    """A cycle in the graph of subschemas that apply to the same value (edges: `$ref`,
    allOf / anyOf / oneOf items, not / if / then / else), as a path of JSON pointers."""
    if not isinstance(schema, Mapping):
        return None
    state: dict[str, int] = {}  # pointer -> 1 on the current path, 2 done
    for start in _in_use(schema):
        if start in state:
            continue
        state[start] = 1
        path = [start]
        stack = [_same_value(schema, start)]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                loop = [*path[path.index(nxt):], nxt]
                return ("the schema refers to itself without end: "
                        f"{' -> '.join('#' + p for p in loop)} applies to the same value "
                        "again (a recursion must go through 'properties' or 'items')")
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(_same_value(schema, nxt))
    return None


def _in_use(root: Mapping[str, Any]) -> list[str]:
    """The pointers of the subschemas a value may be checked against: everything below
    the root but definitions, which count where a `$ref` reaches them."""
    seen: set[str] = set()
    out: list[str] = []
    todo = [""]
    while todo:
        pointer = todo.pop()
        node = _resolve(root, pointer)
        if pointer in seen or not isinstance(node, Mapping | list):
            continue
        seen.add(pointer)
        if isinstance(node, Mapping):
            out.append(pointer)
            ref = node.get("$ref")
            target = _pointer(ref[1:]) if isinstance(ref, str) and ref.startswith("#") else None
            if target is not None:
                todo.append(target)
        for key, _ in _children(node):
            if not (isinstance(node, Mapping) and key in NOT_SCHEMAS):
                todo.append(f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}")
    return out


def _same_value(root: Mapping[str, Any], pointer: str) -> Iterator[str]:
    """The pointers of the subschemas that apply to the same value as the one at
    `pointer` (an unresolvable `$ref` is llguidance's to report)."""
    node = _resolve(root, pointer)
    if not isinstance(node, Mapping):
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        target = _pointer(ref[1:])
        if target is not None and _resolve(root, target) is not None:
            yield target
    for key in SAME_VALUE_LISTS:
        items = node.get(key)
        if isinstance(items, list):
            yield from (f"{pointer}/{key}/{i}" for i in range(len(items)))
    for key in SAME_VALUE_ONE:
        if isinstance(node.get(key), Mapping):
            yield f"{pointer}/{key}"


def _pointer(fragment: str) -> str | None:
    """A URI fragment as a normalised JSON pointer ("" is the root); None for an anchor."""
    fragment = unquote(fragment)
    if fragment and not fragment.startswith("/"):
        return None  # "#name": an $anchor, not followed here
    return fragment.rstrip("/") if fragment != "/" else ""


def _resolve(root: Any, pointer: str) -> Any:
    node = root
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
