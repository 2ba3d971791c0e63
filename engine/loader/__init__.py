"""Model loading: the bundled SmolLM2 GGUF, any llama GGUF, mlx-lm directories, hub repos.

Importing this package does not import mlx (so CLI entry points can call
engine.preload.ensure_preloads() first); load_model imports the heavy parts lazily.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bundled import BUNDLED_FILENAME, BUNDLED_PACKAGE, bundled_model_path, model_cache_dir
from .errors import ModelLoadError
from .progress import LoadProgress, ProgressReporter
from .source_check import check_found, check_mmproj_pairs, check_source, unreadable

if TYPE_CHECKING:
    import mlx.nn
    from mlx_lm.tokenizer_utils import TokenizerWrapper

    from ..cpu_options import CpuOptions

__all__ = [
    "BUNDLED_FILENAME",
    "BUNDLED_PACKAGE",
    "LoadProgress",
    "LoadedModel",
    "ModelLoadError",
    "bundled_model_path",
    "check_source",
    "load_model",
    "model_cache_dir",
]

@dataclass
class LoadedModel:
    model: mlx.nn.Module  # an mlx-lm model (mlx_lm.models.llama.Model for GGUFs)
    tokenizer: TokenizerWrapper  # wraps a PreTrainedTokenizerFast with chat_template set
    eos_token_ids: frozenset[int]  # eos id plus the template's end-of-turn token(s)
    context_length: int
    source: str  # resolved file path / directory / repo id
    description: str  # one line for the UI
    # what a user should know about how it runs here, once each (a tensor type held wider
    # than in its file, say); empty when nothing
    notes: tuple[str, ...] = ()
    # a vision-language model's image side (engine/vision/prompt.py VisionTower); None:
    # the model reads text only
    vision: Any = None


def load_model(source: str = "bundled", *, quantized: bool | None = None,
               progress: LoadProgress | None = None,
               cpu: CpuOptions | None = None, mmproj: str | None = None) -> LoadedModel:
    """Load a model and its tokenizer.

    source: "bundled", a .gguf file, an mlx-lm model directory, or a Hugging Face repo id.
    quantized: None = float32 on CPU (fast with OpenBLAS; MLX's CPU quantized kernels are
    slow), quantized weights kept on Metal/CUDA; False/True force either.
    progress: called (stage, fraction) on this thread as the load goes (loader/progress.py).
    cpu: the CPU switches the engine will run with (EngineConfig.cpu; None: from the
    environment): on the CPU, quantized=None keeps the weights quantized exactly when the
    engine's quantized linears will run on the native kernel.
    mmproj: a GGUF's vision projector (llama.cpp's mmproj file) to load with it as one VLM;
    None: the mmproj*.gguf beside the GGUF, if any (engine/vision/mmproj.py).
    """
    report = progress if isinstance(progress, ProgressReporter) else ProgressReporter(progress)
    try:
        return _load(source, quantized, report, cpu, mmproj)
    except OSError as e:  # an unreadable file or directory (permissions, I/O)
        raise unreadable(source, e) from e


def _load(source: str, quantized: bool | None, report: ProgressReporter,
          cpu: CpuOptions | None, mmproj: str | None = None) -> LoadedModel:
    if source == "bundled":
        report("fetching the bundled model", 0.0)
        path = bundled_model_path(fetch=True)
    else:
        path = Path(source).expanduser()
    check_mmproj_pairs(source, path, mmproj)  # (source_check.py: these checks, said early)
    if path.is_dir():
        from ..vision.support import is_vision_config, read_config, vision_refusal
        from .mlx_dir import load_mlx_dir

        config = read_config(path)
        if is_vision_config(config):  # images in chats (#52): through mlx-vlm
            not_yet = vision_refusal(config.get("model_type"), config)
            if not_yet is None:
                from ..vision.load import load_vlm

                return LoadedModel(**load_vlm(str(path), config, quantized, report, cpu))
            # a family whose images do not run here yet: its text, where mlx-lm reads it
            loaded = LoadedModel(**load_mlx_dir(path, quantized, report, cpu))
            loaded.notes += (f"it reads text only here: images of {not_yet}",)
            return loaded

        return LoadedModel(**load_mlx_dir(path, quantized, report, cpu))
    if path.is_file():
        from ..vision.mmproj import load_gguf_with_vision

        return LoadedModel(**load_gguf_with_vision(path.resolve(), mmproj, quantized, report,
                                                   cpu))

    check_found(source, path)
    from .mlx_dir import load_hf_repo

    return LoadedModel(**load_hf_repo(source, quantized, report, cpu))
