"""The KV cache's form (issue #54): None (the model's float), 8 or 4 bits a value, how the app
names it, and its check. The app's setting reaches the engine as EngineConfig.kv_bits at the
next model load (docs/memory.md "KV bits": what each form costs in quality)."""

from __future__ import annotations

from typing import Any

FLOAT = None
CHOICES: tuple[int | None, ...] = (FLOAT, 8, 4)
# float by default: 8 bits measures level with llama.cpp's q8_0 but still moves the
# model's next-token distribution a little (docs/memory.md's KL table); a user trades that
# for about twice the chats or context in the same memory.
DEFAULT = FLOAT

LABELS = {FLOAT: "float", 8: "8-bit", 4: "4-bit"}


def check(value: Any) -> int | None:
    """`value` as EngineConfig.kv_bits takes it (None, 8, 4); 16 and 32 mean float;
    ValueError that says why for anything else."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)
                         and value in (16, 32)):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value in (8, 4):
        return value
    raise ValueError(f"the KV cache must be float, 8 or 4 bits, got {value!r}")


def label(bits: int | None) -> str:
    """How the app names a form: "float", "8-bit", "4-bit" (EngineStats.kv_bits 0 = float)."""
    return LABELS.get(bits or None, f"{bits}-bit")
