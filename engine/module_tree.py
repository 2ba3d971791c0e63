"""The engine's own copy of a model's module tree, and replacing modules in it.

The engine runs a loaded model through layers of its own (the native kernels' quantized
linears, RoPE, RMSNorm, attention and SiLU: engine/native/layers.py, engine/cpu_kernels.py).
It puts them in a copy of the model's tree of modules, never in the model itself: the copy
shares every array (no memory), has the same parameter names (saved weights and the prefix
store's fingerprints are unchanged), and mlx / mlx-lm's classes and functions are not
touched, so mlx-lm's own generators on the loaded model run exactly as they do without the
engine (the benchmarks' and tests' reference).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

import mlx.nn as nn

M = TypeVar("M", bound=nn.Module)


def adopt(old: nn.Module, cls: type[M]) -> M:
    """A new `cls` module with `old`'s children, arrays and attributes (shared, not copied);
    `old` itself is left as it is."""
    new = cls.__new__(cls)
    # sets (the frozen parameters' names) are copied so that freezing one leaves the other
    new.__dict__.update({k: copy.copy(v) if isinstance(v, set) else v
                         for k, v in old.__dict__.items()})
    dict.update(new, old)
    return new


def clone(model: M) -> M:
    """The same tree of modules, each a new object of its own class, sharing every array."""
    new = adopt(model, type(model))
    for key, value in model.items():
        dict.__setitem__(new, key, _clone_value(value))
    return new


def _clone_value(value: Any) -> Any:
    if isinstance(value, nn.Module):
        return clone(value)
    if isinstance(value, list):
        return [_clone_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_clone_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone_value(v) for k, v in value.items()}
    return value  # an array (shared) or a plain value


def replace(tree: nn.Module, make: Callable[[nn.Module], nn.Module | None]) -> int:
    """Put `make(child)` in place of every module below `tree` for which it returns one
    (then the new module's own children are visited); returns how many were replaced.
    For a `clone`: its containers are its own."""
    count = 0
    for key, value in list(tree.items()):
        if isinstance(value, nn.Module):
            new = make(value)
            if new is not None:
                dict.__setitem__(tree, key, new)
                count += 1
            count += replace(new if new is not None else value, make)
        elif isinstance(value, list | dict):
            count += _replace_in(value, make)
    return count


def _replace_in(container: list[Any] | dict[Any, Any],
                make: Callable[[nn.Module], nn.Module | None]) -> int:
    count = 0
    keys = range(len(container)) if isinstance(container, list) else list(container)
    for k in keys:
        value = container[k]
        if isinstance(value, nn.Module):
            new = make(value)
            if new is not None:
                container[k] = new
                count += 1
            count += replace(new if new is not None else value, make)
        elif isinstance(value, list | dict):
            count += _replace_in(value, make)
    return count
