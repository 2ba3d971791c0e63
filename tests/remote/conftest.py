"""A real `mlx_lm.server` on loopback, started once for the folder on the tiny random-weight
model saved as an mlx-lm directory (bench/mlx_lm_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MODEL = "default_model"  # what mlx_lm.server calls the model it was started with


@dataclass
class MlxServer:
    url: str
    tiny: Any  # tests.tiny_model.TinyModel: the weights it serves


@pytest.fixture(scope="session")
def mlx_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlxServer]:
    from bench.mlx_lm_server import mlx_lm_server
    from tests.tiny_model import make_tiny_model

    tiny = make_tiny_model(context_length=4096)
    tmp: Path = tmp_path_factory.mktemp("mlx_lm_server")
    (tmp / "hf").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        # Its /v1/models scans the Hugging Face cache and sends an empty body when there is
        # none: an empty cache of its own (and no reaching for the hub).
        mp.setenv("HF_HUB_CACHE", str(tmp / "hf"))
        mp.setenv("HF_HUB_OFFLINE", "1")
        with mlx_lm_server(tiny, log=tmp / "server.log") as url:
            yield MlxServer(url, tiny)
