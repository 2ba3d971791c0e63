"""`python -m bench.moe_rss ARCH {packed,affine}`: resident memory of a random-weight MoE
GGUF (bench.arch_decode's: hidden 1024, 6 layers, 32 experts of which 4 a token, Q4_0)
loaded and made ready by the engine (load_model, ModelRunner, one pass): with the loader's
experts decoded straight into the packed layout (packed: one copy) or as affine arrays the
engine packs again at install (affine: the tree before 82eaf74, two copies). One process a
run; alternate them yourself."""

import gc
import sys
import tempfile
from pathlib import Path

import mlx.core as mx

from app.process_memory import resident_bytes
from bench.arch_decode import write
from engine.loader import gguf_weights, load_model
from engine.model_runner import ModelRunner


def rss_mib() -> float:
    return (resident_bytes() or 0) / 2**20


def main(arch: str, mode: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = write(arch, 1024, 6, Path(d), 32, 4)
        if mode == "affine":  # experts (3-D) not packable: the loader's affine arrays
            real = gguf_weights.packable
            gguf_weights.packable = lambda t: t.data.ndim == 2 and real(t)
        before = rss_mib()
        runner = ModelRunner(load_model(str(path)).model)
        mx.eval(runner.model(mx.array([[1, 2, 3]])))
        gc.collect()
        print(f"{arch} {mode}: file {path.stat().st_size / 2**20:.0f} MiB, resident "
              f"{rss_mib():.0f} MiB ({before:.0f} before the load)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
