"""Compare: send one message to several targets side by side and continue with one answer."""

from .entry import compare_button, open_compare

__all__ = ["compare_button", "open_compare"]
