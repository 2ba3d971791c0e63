"""llama.cpp's own test data, from the llama-cpp-python source package on PyPI.

The sdist vendors llama.cpp, whose ``models/`` folder holds test vocabularies
(``ggml-vocab-*.gguf``, with the texts in ``.inp`` and llama.cpp's token ids for them in
``.out``) and the chat templates of ~70 model families (``templates/*.jinja``). They are
fetched once (``pip download --no-deps --no-binary :all:``, ~77 MB, 30 s here) and those
files kept under ``$BATCHCHAT_TEST_DATA`` (default ``~/.cache/batchchat/llama.cpp-<version>``);
scripts/setup.sh runs ``python -m tests.llama_cpp_data`` so that CI has them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VERSION = "0.3.36"  # llama-cpp-python (its vendored llama.cpp: what the tests hold us to)
_KEEP = ("vendor/llama.cpp/models/ggml-vocab-", "vendor/llama.cpp/models/templates/",
         "vendor/llama.cpp/LICENSE")


def data_dir() -> Path:
    root = os.environ.get("BATCHCHAT_TEST_DATA")
    base = Path(root) if root else Path.home() / ".cache" / "batchchat"
    return base / f"llama.cpp-{VERSION}"


def models_dir(fetch: bool = True) -> Path:
    """The folder with ggml-vocab-* and templates/ (fetched first if missing and `fetch`)."""
    d = data_dir() / "models"
    if not (d / "templates").is_dir() and fetch:
        _fetch()
    return d


def _fetch() -> None:
    target = data_dir()
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "-q", "-d", tmp, f"llama-cpp-python=={VERSION}"],
            capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"pip download llama-cpp-python=={VERSION} failed: "
                               f"{run.stderr.strip()[-500:]}")
        sdist = next(Path(tmp).glob("*.tar.gz"))
        staging = Path(tmp) / "out"
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                inner = member.name.split("/", 1)[-1]
                if member.isfile() and inner.startswith(_KEEP):
                    member.name = inner.removeprefix("vendor/llama.cpp/")
                    tar.extract(member, staging, filter="data")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(staging), target)


def vocab_cases(vocab: Path) -> list[tuple[str, list[int]]]:
    """The texts of a vocabulary's ``.inp`` and llama.cpp's ids for each (``.out``)."""
    texts = Path(f"{vocab}.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    ids = Path(f"{vocab}.out").read_text(encoding="utf-8").split("\n")
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, ids, strict=False)]


if __name__ == "__main__":
    print(models_dir())
