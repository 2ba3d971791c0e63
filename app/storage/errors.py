"""Storage failures as one exception type carrying a message a user can read."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Literal

ErrorKind = Literal["locked", "read_only", "disk_full", "corrupt", "too_new", "invalid", "io"]

# Kinds that may clear up by themselves, so a queued write is worth retrying.
TRANSIENT_KINDS: frozenset[str] = frozenset({"locked", "read_only", "disk_full", "corrupt", "io"})

_KEPT = "changes are kept in memory and will be retried."

# Primary SQLite result codes (the low byte of the extended code).
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 5, 6, 8
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL = 10, 11, 13
_SQLITE_CANTOPEN, _SQLITE_CONSTRAINT, _SQLITE_NOTADB = 14, 19, 26


class StorageError(Exception):
    """A history-database failure; str(err) is fit to show the user as is."""

    def __init__(self, message: str, *, kind: ErrorKind, path: Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind: ErrorKind = kind
        self.path = path

    @property
    def is_transient(self) -> bool:
        return self.kind in TRANSIENT_KINDS


class SchemaTooNewError(StorageError):
    """The file was written by a newer BatchChat; it is left untouched."""


def translate(exc: BaseException, path: Path) -> StorageError:
    """Map a sqlite3 or OS error to a StorageError with a human message."""
    if isinstance(exc, StorageError):
        return exc
    kind = _kind_of(exc)
    where = f"The history database at {path}"
    messages: dict[ErrorKind, str] = {
        "locked": f"{where} is locked by another program; {_KEPT}",
        "read_only": f"{where} is read-only; {_KEPT}",
        "disk_full": f"The disk holding the history database at {path} is full; {_KEPT}",
        "corrupt": f"{where} is damaged ({exc}); restart BatchChat to set it aside; {_KEPT}",
        "io": f"{where} could not be written ({exc}); {_KEPT}",
        "invalid": f"BatchChat tried to store invalid data in {path}: {_describe(exc)}",
    }
    return StorageError(messages[kind], kind=kind, path=path)


def _kind_of(exc: BaseException) -> ErrorKind:
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOSPC:
            return "disk_full"
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return "read_only"
        return "io"
    if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError
                  | sqlite3.InterfaceError | sqlite3.DataError | UnicodeError | OverflowError):
        return "invalid"  # this write's own data: retrying can never help
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return "locked"
    if primary in (_SQLITE_READONLY, _SQLITE_CANTOPEN):
        return "read_only"
    if primary == _SQLITE_FULL:
        return "disk_full"
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return "corrupt"
    if primary == _SQLITE_CONSTRAINT:
        return "invalid"
    if isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError):
        return "io"
    return "invalid"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UnicodeEncodeError):
        return (f"text that is not valid Unicode (U+{ord(exc.object[exc.start]):04X} at "
                f"character {exc.start} is a lone surrogate)")
    return str(exc)
