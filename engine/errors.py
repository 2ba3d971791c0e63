"""Errors the engine raises at its API boundary."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class RequestRejected(EngineError, ValueError):
    """A request was refused at `submit`: the message names the problem."""


class QueueFullError(RequestRejected):
    """The waiting queue is at `max_queue`: backpressure, try again later."""


class EngineStopped(EngineError, RuntimeError):
    """The engine is shut down (or was never started) and takes no new work."""
