"""Byte counts in words people read: binary units, three significant figures at most."""

from __future__ import annotations


def format_bytes(n: int) -> str:
    """"512 B", "46 KiB", "5.9 GiB"."""
    value, unit = float(n), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    if unit == "B" or value >= 10:
        return f"{value:.0f} {unit}"
    return f"{value:.1f} {unit}"
