"""A model path that cannot be read is a ModelLoadError naming the path, never a raw
PermissionError (issue #15, item 7). Real files with real permissions, loaded in a
process that cannot override them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unprivileged import unprivileged

LOAD = """
import sys
from engine.loader import ModelLoadError, load_model
try:
    load_model(sys.argv[1])
except ModelLoadError as exc:
    print(exc)
    sys.exit(3)
"""
ROOT = Path(__file__).resolve().parents[2]


def load_in_subprocess(source: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(unprivileged([sys.executable, "-c", LOAD, str(source)]),
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.fixture
def models(tmp_path: Path):
    d = tmp_path / "models"
    d.mkdir()
    yield d
    for p in [d, *d.rglob("*")]:  # let pytest clean up
        p.chmod(0o755)


@pytest.mark.parametrize("what", ["directory", "parent", "gguf"])
def test_unreadable_model_is_a_load_error_naming_the_path(models: Path, what: str) -> None:
    if what == "gguf":
        source = models / "m.gguf"
        source.write_bytes(b"GGUF" + bytes(60))
        source.chmod(0)
    else:
        source = models / "m" / "inner" if what == "parent" else models / "m"
        source.mkdir(parents=True)
        (source / "config.json").write_text("{}")
        (models / "m").chmod(0)
    result = load_in_subprocess(source)
    assert result.returncode == 3, result.stderr
    message = result.stdout.strip()
    assert str(source) in message and "Permission denied" in message
    assert "Traceback" not in result.stderr
