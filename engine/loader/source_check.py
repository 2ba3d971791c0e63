"""What load_model refuses before it reads any weights, checked without loading MLX.

`batchchat serve` and `batchchat --cli` run `check_source` before the engine (MLX, mlx-lm)
loads (issue #47): a missing path, a file that is not a GGUF or a folder mlx-lm has no
model for is refused in a fraction of a second, not after ~2.8 CPU-s of imports. load_model
runs these same functions, so the words are the loader's own, once. What only reading the
file can find (a truncated GGUF, an architecture the GGUF names) is still said by the load.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

from .errors import ModelLoadError

GGUF_MAGIC = b"GGUF"
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def check_source(source: str, mmproj: str | None = None) -> None:
    """Raise the ModelLoadError load_model(source, mmproj=mmproj) would raise before it
    reads weights; nothing when those checks pass ("bundled" and repo ids always do)."""
    try:
        _check(source, mmproj)
    except OSError as e:
        raise unreadable(source, e) from e


def unreadable(source: str, e: OSError) -> ModelLoadError:
    """load_model's words for a file or folder it may not read (permissions, I/O)."""
    where = e.filename or source
    return ModelLoadError(f"{source}: cannot read {where}: {e.strerror or e}")


def _check(source: str, mmproj: str | None) -> None:
    if source == "bundled":
        return  # the load finds (or fetches) it
    path = Path(source).expanduser()
    check_mmproj_pairs(source, path, mmproj)
    if path.is_dir():
        from ..vision.support import is_vision_config, read_config, vision_refusal

        config = read_config(path)
        # a VLM whose images run here goes to mlx-vlm, which checks its folder itself
        if not is_vision_config(config) or \
                vision_refusal(config.get("model_type"), config) is not None:
            check_mlx_dir(path)
        return
    if path.is_file():
        if mmproj is not None:
            mmproj_file(mmproj)
        check_gguf_header(path.resolve())
        return
    check_found(source, path)


def check_mmproj_pairs(source: str, path: Path, mmproj: str | None) -> None:
    if mmproj is not None and not (path.is_file() and path.suffix.lower() == ".gguf"):
        raise ModelLoadError(f"{source}: an mmproj pairs with a GGUF file only")


def mmproj_file(mmproj: str) -> Path:
    """The mmproj file a user named, refused when there is none."""
    path = Path(mmproj).expanduser()
    if not path.is_file():
        raise ModelLoadError(f"{mmproj}: no such mmproj file")
    return path


def check_found(source: str, path: Path) -> None:
    """A path that is neither a file nor a folder: refused unless it reads as a repo id."""
    if path.suffix.lower() == ".gguf" or source.startswith((".", "/", "~")) \
            or not _REPO_ID_RE.match(source):
        raise ModelLoadError(f"{source}: no such file or directory")


def check_mlx_dir(path: Path) -> None:
    """A folder mlx-lm can build a model of: a config.json naming a model_type it has."""
    from .support import mlx_lm_unsupported

    if not (path / "config.json").is_file():
        raise ModelLoadError(
            f"{path}: directory has no config.json, so it is not an mlx-lm model directory "
            "(pass a .gguf file or a directory made by mlx_lm.convert)")
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{path / 'config.json'}: unreadable config: {e}") from e
    kind = config.get("model_type") if isinstance(config, dict) else None
    reason = mlx_lm_unsupported(kind if isinstance(kind, str) else None)
    if reason:  # the model library's words (support.py), not an import error of mlx-lm's
        raise ModelLoadError(f"{path}: {reason}")


def check_gguf_header(path: Path) -> None:
    """Fail early, with a plain message, on files that are not GGUF at all."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read the file: {e.strerror or e}") from e
    if not head:
        raise ModelLoadError(f"{path}: the file is empty (0 bytes); not a GGUF model")
    if head[:4] != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path}: not a GGUF file (starts with {head[:4]!r}, expected b'GGUF')")
    if len(head) < 8:
        raise ModelLoadError(f"{path}: truncated GGUF file ({len(head)} bytes)")
    version = struct.unpack("<I", head[4:8])[0]
    if version not in (2, 3):
        raise ModelLoadError(f"{path}: GGUF version {version} is not supported (versions 2 "
                             "and 3 are)")
