"""Load a vision-language model directory (or hub repo) through mlx-vlm.

mlx-vlm's `load` builds the VLM with its own classes and processor. The engine runs the
language model as mlx-lm's own class for the text config's architecture, over the very
same weight arrays (no copy): the engine's kernels, ragged passes and caches know mlx-lm's
modules. The VLM keeps its vision tower, connector and merge (`VisionTower`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.nn as nn
from mlx.utils import tree_flatten

from ..loader.common import (
    cast_floats_to_float32,
    device_name,
    end_token_ids,
    resolve_quantized,
    weights_description,
    widen_floats,
)
from ..loader.errors import ModelLoadError
from ..loader.progress import ProgressReporter
from . import deepstack, image_mask, mrope, scaled_rows
from .image_blocks import bidirectional
from .prompt import VisionTower
from .support import text_config, vision_refusal


def load_vlm(source: str, config: dict[str, Any], quantized: bool | None,
             report: ProgressReporter, cpu: Any) -> dict[str, Any]:
    """The LoadedModel fields of the VLM at `source` (a directory or a repo id), `vision`
    among them."""
    from mlx_lm.tokenizer_utils import TokenizerWrapper
    from mlx_lm.utils import dequantize_model
    from mlx_vlm.utils import load as vlm_load

    kind = config.get("model_type")
    reason = vision_refusal(kind, config)
    if reason:
        raise ModelLoadError(f"{source}: {reason}")
    report("reading file", 0.0)
    try:
        vlm, processor = vlm_load(source)
    except Exception as e:  # noqa: BLE001 - mlx-vlm's and transformers' many errors
        raise ModelLoadError(f"{source}: mlx-vlm cannot load it: {type(e).__name__}: {e}") from e
    report("converting layers", 0.0)
    if not resolve_quantized(quantized, cpu) and _quantized(vlm):
        vlm = dequantize_model(vlm)
    if widen_floats(quantized):
        cast_floats_to_float32(vlm)  # both towers, so image and text embeddings agree
    model = text_model(vlm, config, source)
    scaled_rows.install(model, kind)
    both_ways = bidirectional(kind, text_config(config))
    if both_ways:
        image_mask.install(model)
    feed = mrope.install(model, kind, text_config(config))
    if feed is not None:
        deepstack.install(model, feed, len(config["vision_config"].get(
            "deepstack_visual_indexes") or ()))
    report("tokenizer", 0.0)
    hf_tok = getattr(processor, "tokenizer", processor)
    eos = end_token_ids([*_config_eos(config), hf_tok.eos_token_id], hf_tok.get_vocab(),
                        hf_tok.all_special_tokens)
    tokenizer = TokenizerWrapper(hf_tok, eos_token_ids=sorted(eos))
    image_token = config.get("image_token_id", config.get("image_token_index"))
    if not isinstance(image_token, int):
        raise ModelLoadError(f"{source}: its config names no image token id")
    text = text_config(config)
    name = Path(source).name if Path(source).is_dir() else source
    return {
        "model": model,
        "tokenizer": tokenizer,
        "eos_token_ids": eos,
        "context_length": int(text.get("max_position_embeddings") or 4096),
        "source": str(Path(source).resolve()) if Path(source).is_dir() else source,
        "description": (f"{name} (mlx-vlm, sees images), {weights_description(model)} on "
                        f"{device_name()}"),
        "vision": VisionTower(vlm, processor, image_token, positioned=feed is not None,
                              bidirectional=both_ways),
    }


def text_model(vlm: nn.Module, config: dict[str, Any], source: str) -> nn.Module:
    """The VLM's language model as mlx-lm's class for its text config, on the same arrays
    (quantized where the VLM's are). ModelLoadError when mlx-lm has no such class or the
    weights do not map one to one."""
    from mlx_lm.utils import _get_classes

    text = dict(text_config(config))
    text.setdefault("vocab_size", config.get("vocab_size"))
    if config.get("model_type") in mrope.MROPE_STYLES:
        # the language model itself (mlx-lm's qwen2_vl wraps it under other names); its
        # rotation is the engine's M-RoPE (mrope.install), not the rope_scaling's
        text["model_type"] = mrope.TEXT_MODELS[config["model_type"]]
        text.pop("rope_scaling", None)
    try:
        model_class, args_class = _get_classes(text)
    except ValueError as e:
        raise ModelLoadError(f"{source}: mlx-lm has no language model "
                             f"{text.get('model_type')!r}: {e}") from e
    if config.get("model_type") in scaled_rows.FAMILIES and "rope_parameters" not in text:
        # Gemma 4: a config without them gets mlx-vlm's defaults there, which are not
        # mlx-lm's (the full layers' partial rotation): the text model takes mlx-vlm's
        text["rope_parameters"] = vlm.config.text_config.rope_parameters
    own = dict(tree_flatten(vlm.language_model.parameters()))
    if "lm_head.weight" in own:
        text["tie_word_embeddings"] = False
    model = model_class(args_class.from_dict(text))
    modules = dict(vlm.language_model.named_modules())

    def theirs(name: str) -> str | None:
        for candidate in (name, name.removeprefix("model.")):
            if candidate in own or candidate in modules:
                return candidate
        return None

    def quantized_like(path: str, module: nn.Module) -> Any:
        match = modules.get(theirs(path) or "")
        # (mlx-vlm's own QuantizedSwitchLinear too: a MoE text model's stacked experts)
        if isinstance(match, (nn.QuantizedLinear, nn.QuantizedEmbedding)) or \
                _quantized_experts(match):
            return {"group_size": match.group_size, "bits": match.bits,
                    "mode": getattr(match, "mode", "affine")}
        return False

    if _quantized(vlm.language_model):
        nn.quantize(model, class_predicate=quantized_like)
    found = {name: own[other] for name, _ in tree_flatten(model.parameters())
             if (other := theirs(name)) is not None and other in own}
    # mlx-lm's own sanitize sees what the VLM has (a tied head: Gemma 3's drops lm_head)
    found = model.sanitize(found) if hasattr(model, "sanitize") else found
    missing = [n for n, _ in tree_flatten(model.parameters()) if n not in found]
    if missing:
        raise ModelLoadError(f"{source}: the language model has no weight for {missing[0]}")
    model.load_weights(list(found.items()), strict=True)
    return model


def _quantized(model: nn.Module) -> bool:
    return any(isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding))
               or _quantized_experts(m) for _, m in model.named_modules())


def _quantized_experts(module: Any) -> bool:
    """Whether `module` is a quantized stack of experts (mlx-vlm's QuantizedSwitchLinear)."""
    from mlx_vlm.models.switch_layers import QuantizedSwitchLinear

    return isinstance(module, QuantizedSwitchLinear)


def _config_eos(config: dict[str, Any]) -> list[int]:
    eos = config.get("eos_token_id")
    return [e for e in (eos if isinstance(eos, list) else [eos]) if isinstance(e, int)]
