"""Which `model` names a request may send (issue #46): clients written for LM Studio or
llama-server send the file name or the repo id, not this server's id.

With one model served (as this server always serves) any name is taken, as llama-server
does, and the reply still names the served id; with `strict`, only the id and its aliases
(the file name with or without .gguf, the directory name, the repo id and its last part),
compared without regard to case, and an unknown name gets a 404 that lists them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..models.names import aliases_of

__all__ = ["aliases_of", "known", "names"]


def names(model_id: str, aliases: Sequence[str]) -> list[str]:
    """The id first, then its aliases, each once."""
    return list(dict.fromkeys([model_id, *aliases]))


def known(asked: str, model_id: str, aliases: Sequence[str]) -> bool:
    """Whether `asked` is the id or one of its aliases (case does not matter)."""
    wanted = asked.casefold()
    return any(wanted == name.casefold() for name in names(model_id, aliases))
