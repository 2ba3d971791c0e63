"""Loader error type (kept free of mlx imports)."""

from __future__ import annotations


class ModelLoadError(Exception):
    """A model could not be loaded. The message always names the source and the problem."""
