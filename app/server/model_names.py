"""Which `model` names a request may send (issue #46): clients written for LM Studio or
llama-server send the file name or the repo id, not this server's id.

With one model served (as this server always serves) any name is taken, as llama-server
does, and the reply still names the served id; with `strict`, only the id and its aliases
(the file name with or without .gguf, the directory name, the repo id and its last part),
compared without regard to case, and an unknown name gets a 404 that lists them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath

REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")  # owner/name, as Hugging Face spells repo ids


def aliases_of(source: str | None) -> tuple[str, ...]:
    """The names a client may know a model loaded from `source` by ("bundled", a .gguf
    path, an mlx-lm directory, a repo id)."""
    if not source:
        return ()
    if source == "bundled":
        from engine.public import BUNDLED_FILENAME

        return ("bundled", *_file_names(BUNDLED_FILENAME))
    names: list[str] = []
    if REPO_ID.match(source) and not source.startswith("."):
        names += [source, source.split("/", 1)[1]]  # a repo id, or a path of two parts
    names += _file_names(PurePath(source).name)
    return tuple(dict.fromkeys(n for n in names if n))


def _file_names(name: str) -> list[str]:
    return [name, name[: -len(".gguf")]] if name.lower().endswith(".gguf") else [name]


def names(model_id: str, aliases: Sequence[str]) -> list[str]:
    """The id first, then its aliases, each once."""
    return list(dict.fromkeys([model_id, *aliases]))


def known(asked: str, model_id: str, aliases: Sequence[str]) -> bool:
    """Whether `asked` is the id or one of its aliases (case does not matter)."""
    wanted = asked.casefold()
    return any(wanted == name.casefold() for name in names(model_id, aliases))
