"""Tiny random-weight vision-language models in mlx-vlm's own format, for fast tests.

`make_tiny_vlm(folder, family)` writes what `mlx_vlm.load` reads from a hub repo: the
config (text and vision configs), the weights of mlx-vlm's own model class built from it,
and a processor (a byte-level tokenizer with the image tokens, the family's own image
processor at a small size, a chat template that places image parts). Nothing is
re-implemented: the model, its config and the processor are mlx-vlm's and transformers'
classes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast


def chat_template(placeholder: str) -> str:
    """A ChatML template whose user turns may be a list of parts: an image part becomes the
    processor's `placeholder`, which the processor expands to the image's tokens."""
    return (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
        "{% for p in m['content'] %}{% if p['type'] == 'image' %}" + placeholder +
        "{% else %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


IMAGE_SIDE = 32  # pixels: the vision tower's input, one tile
PATCH = 8
# Idefics3 and SmolVLM: Idefics3's layout (a SigLIP tower, a pixel-shuffle connector, a
# llama text model); Gemma 3: a SigLIP tower, an average-pooling projector, Gemma 3's text
# model (sliding-window layers, embeddings scaled in the model); Qwen2.5-VL: its windowed ViT
# and patch merger, Qwen2's text model with M-RoPE (3-D positions for image tokens);
# Qwen3-VL: Qwen3's text model, M-RoPE's frequencies interleaved, DeepStack (image features
# of the tower's middle layers added to the first layers' hidden states)
# Mistral 3: a Pixtral tower, a Mistral text model; LFM2-VL: a SigLIP2 tower, LFM2's hybrid
# text model (short convolutions and attention layers)
# Gemma 4: its own vision encoder (2-D RoPE, pooled 2 x 2), Gemma 4's text model with
# per-layer inputs, sliding-window layers and a layer sharing an earlier one's KV;
# Qwen3-VL MoE: Qwen3-VL with Qwen3's mixture-of-experts text model; Pixtral (Pixtral 12B's
# own layout): a Pixtral tower, LLaVA's two-layer projector, no patch merger, a Mistral text model
FAMILIES = ("idefics3", "smolvlm", "gemma3", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "mistral3",
            "lfm2_vl", "gemma4", "qwen3_vl_moe", "pixtral")


def _tokenizer(extra: list[str], placeholder: str,
               named: dict[str, str] | None = None) -> PreTrainedTokenizerFast:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>", *extra])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|endoftext|>", chat_template=chat_template(placeholder),
        extra_special_tokens=named or {})


def make_tiny_vlm(folder: Path, family: str = "idefics3", seed: int = 0, *,
                  hidden: int = 64, layers: int = 2, vision_hidden: int = 32,
                  vision_layers: int = 1, image_side: int = IMAGE_SIDE,
                  patch: int = PATCH) -> Path:
    """Write a tiny random-weight `family` VLM (one of FAMILIES) into `folder`; returns it.

    Both families are Idefics3's layout in mlx-vlm (a SigLIP-style vision tower, a pixel
    shuffle connector, a llama text model), with each its own processor class
    (Idefics3Processor, SmolVLMProcessor) and image processor. The defaults make an image 4
    tokens; bench/images.py asks for a larger one (`image_side` / `patch` / 2 squared
    tokens an image)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    import importlib

    classes = importlib.import_module(f"mlx_vlm.models.{family}")
    folder.mkdir(parents=True, exist_ok=True)
    if family == "gemma4":
        return _gemma4(folder, seed, hidden=hidden, vision_hidden=vision_hidden,
                       vision_layers=vision_layers)
    if family == "lfm2_vl":
        return _lfm2_vl(folder, seed, hidden=hidden, vision_hidden=vision_hidden,
                        vision_layers=vision_layers)
    if family in ("mistral3", "pixtral"):
        return _mistral3(folder, seed, hidden=hidden, layers=layers,
                         vision_hidden=vision_hidden, vision_layers=vision_layers,
                         family=family)
    if family in ("qwen3_vl", "qwen3_vl_moe"):
        return _qwen3_vl(folder, seed, hidden=hidden, layers=layers,
                         vision_hidden=vision_hidden, vision_layers=vision_layers,
                         family=family)
    if family in ("qwen2_5_vl", "qwen2_vl"):
        return _qwen2_5_vl(folder, seed, hidden=hidden, layers=layers,
                           vision_hidden=vision_hidden, vision_layers=vision_layers,
                           family=family)
    if family == "gemma3":
        return _gemma3(folder, seed, hidden=hidden, layers=layers, vision_hidden=vision_hidden,
                       vision_layers=vision_layers, image_side=image_side, patch=patch)
    specials = ["<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"]
    tokenizer = _tokenizer(specials, "<image>")
    vocab = len(tokenizer)
    image_id = tokenizer.convert_tokens_to_ids("<image>")
    scale = 2  # the connector's pixel shuffle: (32/8)^2 = 16 patches -> 4 image tokens
    text = {"model_type": "llama", "hidden_size": hidden, "intermediate_size": 2 * hidden,
            "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": layers,
            "rms_norm_eps": 1e-5, "vocab_size": vocab, "rope_theta": 10000.0,
            "max_position_embeddings": 512, "tie_word_embeddings": False}
    vision = {"model_type": f"{family}_vision",
              "hidden_size": vision_hidden, "num_attention_heads": 2, "patch_size": patch,
              "num_hidden_layers": vision_layers, "intermediate_size": 2 * vision_hidden,
              "image_size": image_side,
              "num_channels": 3, "layer_norm_eps": 1e-6}
    config = {"model_type": family, "text_config": text, "vision_config": vision,
              "vocab_size": vocab, "scale_factor": scale, "image_token_id": image_id,
              "eos_token_id": [tokenizer.convert_tokens_to_ids("<|im_end|>")]}
    model_config = classes.ModelConfig.from_dict(
        {**config, "text_config": classes.TextConfig.from_dict(text),
         "vision_config": classes.VisionConfig.from_dict(vision)})
    mx.random.seed(seed)
    model = classes.Model(model_config)
    head = model.language_model.lm_head
    head.weight = mx.random.normal(head.weight.shape) * 0.5  # greedy text that varies
    mx.eval(model.parameters())
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    _save_processor(folder, family, tokenizer, image_side,
                    image_side * image_side // (patch * patch) // (scale * scale))
    return folder


def _save_processor(folder: Path, family: str, tokenizer: PreTrainedTokenizerFast,
                    side: int, image_seq_len: int) -> None:
    from transformers import Idefics3ImageProcessorPil, SmolVLMImageProcessorPil

    cls = Idefics3ImageProcessorPil if family == "idefics3" else SmolVLMImageProcessorPil
    image_processor = cls(do_resize=True, size={"longest_edge": side},
                          max_image_size={"longest_edge": side},
                          do_image_splitting=False)
    image_processor.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps(
        {"image_seq_len": image_seq_len,
         "processor_class": "Idefics3Processor" if family == "idefics3"
         else "SmolVLMProcessor"}))
    (folder / "chat_template.json").write_text(json.dumps(
        {"chat_template": tokenizer.chat_template}))


def _gemma3(folder: Path, seed: int, *, hidden: int, layers: int, vision_hidden: int,
            vision_layers: int, image_side: int, patch: int) -> Path:
    from mlx_vlm.models import gemma3
    from transformers import Gemma3ImageProcessorPil

    named = {"boi_token": "<start_of_image>", "image_token": "<image_soft_token>",
             "eoi_token": "<end_of_image>"}
    tokenizer = _tokenizer(list(named.values()), named["boi_token"], named)
    vocab = len(tokenizer)
    per_side = 2  # the projector pools each image to 2 x 2 = 4 tokens
    head_dim = 16
    text = {"model_type": "gemma3_text", "hidden_size": hidden, "num_hidden_layers": layers,
            "intermediate_size": 2 * hidden, "num_attention_heads": 4, "head_dim": head_dim,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "vocab_size": vocab,
            "rope_theta": 1_000_000.0, "rope_global_base_freq": 1_000_000.0,
            "rope_local_base_freq": 10_000.0, "query_pre_attn_scalar": head_dim,
            "sliding_window": 16, "sliding_window_pattern": 2,
            "mm_tokens_per_image": per_side * per_side, "max_position_embeddings": 512}
    vision = {"model_type": "siglip_vision_model", "num_hidden_layers": vision_layers,
              "hidden_size": vision_hidden, "intermediate_size": 2 * vision_hidden,
              "num_attention_heads": 2, "patch_size": patch, "image_size": image_side,
              "num_channels": 3, "layer_norm_eps": 1e-6}
    config = {"model_type": "gemma3", "text_config": text, "vision_config": vision,
              "vocab_size": vocab, "hidden_size": hidden,
              "image_token_index": tokenizer.convert_tokens_to_ids(named["image_token"]),
              "pad_token_id": tokenizer.pad_token_id,
              "eos_token_id": [tokenizer.convert_tokens_to_ids("<|im_end|>")]}
    model_config = gemma3.ModelConfig.from_dict(
        {**config, "text_config": gemma3.TextConfig.from_dict(text),
         "vision_config": gemma3.VisionConfig.from_dict(vision)})
    mx.random.seed(seed)
    model = gemma3.Model(model_config)
    head = model.language_model.lm_head
    head.weight = mx.random.normal(head.weight.shape) * 0.5
    projector = model.multi_modal_projector
    projector.mm_input_projection_weight = mx.random.normal(
        projector.mm_input_projection_weight.shape) * 0.1  # (its default: ones)
    mx.eval(model.parameters())
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    Gemma3ImageProcessorPil(size={"height": image_side, "width": image_side},
                            do_pan_and_scan=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps(
        {"image_seq_length": per_side * per_side, "processor_class": "Gemma3Processor"}))
    (folder / "chat_template.json").write_text(json.dumps(
        {"chat_template": tokenizer.chat_template}))
    return folder


def _qwen2_5_vl(folder: Path, seed: int, *, hidden: int, layers: int, vision_hidden: int,
                vision_layers: int, family: str = "qwen2_5_vl") -> Path:
    """Qwen2.5-VL (or Qwen2-VL, `family`: another vision tower, the same text model): an
    image resized to about 56 x 56 pixels is a grid of 14-pixel patches, merged 2 x 2 into
    tokens at 3-D positions (t, h, w); the text after it goes on from the image's largest
    position + 1, below its index (the rope delta)."""
    import importlib

    classes = importlib.import_module(f"mlx_vlm.models.{family}")

    specials = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tokenizer = _tokenizer(specials, "<|vision_start|><|image_pad|><|vision_end|>")
    vocab = len(tokenizer)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in specials}
    side, patch = 56, 14
    text = {"model_type": family, "hidden_size": hidden, "num_hidden_layers": layers,
            "intermediate_size": 2 * hidden, "num_attention_heads": 4,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "vocab_size": vocab,
            # a low base: every frequency turns within a short prompt, so the positions an
            # image's tokens and the text after it get change the answer
            "rope_theta": 20.0, "max_position_embeddings": 512,
            # head_dim 16: 8 frequencies, 2 for time, 3 for height, 3 for width
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
            "tie_word_embeddings": False}
    vision = {"model_type": "qwen2_5_vl", "depth": vision_layers, "hidden_size": vision_hidden,
              "intermediate_size": 2 * vision_hidden, "out_hidden_size": hidden,
              "num_heads": 2, "patch_size": patch, "spatial_patch_size": patch,
              "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 56,
              "fullatt_block_indexes": [0], "in_channels": 3}
    if family == "qwen2_vl":  # its tower's own names: embed_dim inside, hidden_size out
        vision = {"model_type": "qwen2_vl", "depth": vision_layers, "embed_dim": vision_hidden,
                  "hidden_size": hidden, "num_heads": 2, "mlp_ratio": 2,
                  "patch_size": patch, "spatial_patch_size": patch, "spatial_merge_size": 2,
                  "temporal_patch_size": 2, "in_channels": 3}
    # flat, as Qwen2.5-VL's own config.json: the text model's keys at the top
    config = {**text, "vision_config": vision, "image_token_id": ids["<|image_pad|>"],
              "video_token_id": ids["<|video_pad|>"],
              "vision_start_token_id": ids["<|vision_start|>"],
              "vision_end_token_id": ids["<|vision_end|>"],
              "eos_token_id": [tokenizer.convert_tokens_to_ids("<|im_end|>")]}
    model_config = classes.ModelConfig.from_dict(dict(config))
    model_config.text_config = classes.TextConfig.from_dict(text)
    model_config.vision_config = classes.VisionConfig.from_dict(vision)
    mx.random.seed(seed)
    model = classes.Model(model_config)
    head = model.language_model.lm_head
    head.weight = mx.random.normal(head.weight.shape) * 0.5
    for layer in model.language_model.model.layers:  # sharp attention: positions matter
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
            proj.weight = proj.weight * 4
    mx.eval(model.parameters())
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "preprocessor_config.json").write_text(json.dumps(
        {"patch_size": patch, "temporal_patch_size": 2, "merge_size": 2,
         "min_pixels": side * side, "max_pixels": side * side,
         "image_processor_type": "Qwen2VLImageProcessor"}))
    tokenizer.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps(
        {"processor_class": "Qwen2_5_VLProcessor" if family == "qwen2_5_vl"
         else "Qwen2VLProcessor"}))
    (folder / "chat_template.json").write_text(json.dumps(
        {"chat_template": tokenizer.chat_template}))
    return folder


def _qwen3_vl(folder: Path, seed: int, *, hidden: int, layers: int, vision_hidden: int,
              vision_layers: int, family: str = "qwen3_vl") -> Path:
    """Qwen3-VL: 16-pixel patches merged 2 x 2, an image of 64 x 64 pixels 4 tokens; two
    DeepStack levels (the tower's layers 0 and 1) added after the text model's first two
    layers at the image's tokens. Qwen3-VL MoE (`family`): the same with a mixture-of-experts
    text model (8 experts, 2 a token, every layer but the first sparse)."""
    import importlib

    classes = importlib.import_module(f"mlx_vlm.models.{family}")

    specials = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tokenizer = _tokenizer(specials, "<|vision_start|><|image_pad|><|vision_end|>")
    vocab = len(tokenizer)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in specials}
    side, patch = 64, 16
    head_dim = 16
    text = {"model_type": "qwen3_vl_text", "hidden_size": hidden,
            "num_hidden_layers": max(layers, 2), "intermediate_size": 2 * hidden,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": head_dim,
            "rms_norm_eps": 1e-6, "vocab_size": vocab, "rope_theta": 20.0,
            "max_position_embeddings": 512, "tie_word_embeddings": False,
            "rope_scaling": {"rope_type": "default", "mrope_interleaved": True,
                             "mrope_section": [2, 3, 3]}}
    if family == "qwen3_vl_moe":
        text |= {"model_type": "qwen3_vl_moe_text", "num_experts": 8,
                 "num_experts_per_tok": 2, "decoder_sparse_step": 1, "mlp_only_layers": [0],
                 "moe_intermediate_size": hidden, "norm_topk_prob": True}
    vision = {"model_type": family, "depth": max(vision_layers, 2),
              "hidden_size": vision_hidden, "intermediate_size": 2 * vision_hidden,
              "out_hidden_size": hidden, "num_heads": 2, "patch_size": patch,
              "spatial_merge_size": 2, "temporal_patch_size": 2,
              "num_position_embeddings": 16, "in_channels": 3,
              "deepstack_visual_indexes": [0, 1]}
    config = {"model_type": family, "text_config": text, "vision_config": vision,
              "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
              "vision_start_token_id": ids["<|vision_start|>"],
              "vision_end_token_id": ids["<|vision_end|>"],
              "eos_token_id": [tokenizer.convert_tokens_to_ids("<|im_end|>")]}
    mx.random.seed(seed)
    model = classes.Model(classes.ModelConfig.from_dict(json.loads(json.dumps(config))))
    head = model.language_model.lm_head
    head.weight = mx.random.normal(head.weight.shape) * 0.5
    for layer in model.language_model.model.layers:  # sharp attention: positions matter
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
            proj.weight = proj.weight * 4
    mx.eval(model.parameters())
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "preprocessor_config.json").write_text(json.dumps(
        {"patch_size": patch, "temporal_patch_size": 2, "merge_size": 2,
         "size": {"shortest_edge": side * side, "longest_edge": side * side},
         "image_processor_type": "Qwen2VLImageProcessor"}))
    tokenizer.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps(
        {"processor_class": "Qwen3VLProcessor"}))
    (folder / "chat_template.json").write_text(json.dumps(
        {"chat_template": tokenizer.chat_template}))
    return folder


def _mistral3(folder: Path, seed: int, *, hidden: int, layers: int, vision_hidden: int,
              vision_layers: int, family: str = "mistral3") -> Path:
    """Mistral 3 (Mistral Small 3.1's layout): a Pixtral tower (8-pixel patches, its own 2-D
    RoPE), a 2 x 2 patch merger, a Mistral (llama) text model; an image of 32 x 32 pixels is
    2 rows of 2 [IMG] tokens, [IMG_BREAK] after each row but the last, then [IMG_END].
    Pixtral (`family`, Pixtral 12B's layout): the same tower with LLaVA's projector and no
    merger, a token a patch: 4 rows of 4."""
    import importlib

    classes = importlib.import_module(f"mlx_vlm.models.{family}")
    merge = 2 if family == "mistral3" else 1

    specials = ["[IMG]", "[IMG_BREAK]", "[IMG_END]"]
    tokenizer = _tokenizer(specials, "[IMG]")
    vocab = len(tokenizer)
    side, patch = 32, 8
    text = {"model_type": "mistral", "hidden_size": hidden, "num_hidden_layers": layers,
            "intermediate_size": 2 * hidden, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5,
            "vocab_size": vocab, "rope_theta": 10000.0, "max_position_embeddings": 512,
            "tie_word_embeddings": False}
    vision = {"model_type": "pixtral", "num_hidden_layers": vision_layers,
              "hidden_size": vision_hidden, "head_dim": vision_hidden // 2,
              "intermediate_size": 2 * vision_hidden, "num_attention_heads": 2,
              "image_size": side, "patch_size": patch, "num_channels": 3,
              "rope_theta": 10000.0}
    config = {"model_type": family, "text_config": text, "vision_config": vision,
              "image_token_index": tokenizer.convert_tokens_to_ids("[IMG]"),
              "vision_feature_layer": -1,
              "eos_token_id": [tokenizer.convert_tokens_to_ids("<|im_end|>")]}
    if merge > 1:
        config["spatial_merge_size"] = merge
    model_config = classes.ModelConfig.from_dict(dict(config))
    model_config.text_config = classes.TextConfig.from_dict(text)
    model_config.vision_config = classes.VisionConfig.from_dict(vision)
    mx.random.seed(seed)
    model = classes.Model(model_config)
    head = model.language_model.lm_head
    head.weight = mx.random.normal(head.weight.shape) * 0.5
    mx.eval(model.parameters())
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "PixtralImageProcessor", "do_resize": True,
         "size": {"longest_edge": side}, "patch_size": {"height": patch, "width": patch},
         "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
         "image_mean": [0.48, 0.46, 0.41], "image_std": [0.27, 0.26, 0.28],
         "do_convert_rgb": True}))
    tokenizer.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps(
        {"processor_class": "Mistral3Processor" if family == "mistral3"
         else "PixtralProcessor", "patch_size": patch, "spatial_merge_size": merge}))
    (folder / "chat_template.json").write_text(json.dumps(
        {"chat_template": tokenizer.chat_template}))
    return folder


def _lfm2_vl(folder: Path, seed: int, *, hidden: int, vision_hidden: int,
             vision_layers: int) -> Path:
    """LFM2-VL: a SigLIP2 tower on 8-pixel patches, pixel-unshuffled 2 x 2 (an image is 4 to
    16 tokens between <|image_start|> and <|image_end|>), LFM2's text model: a convolution
    layer, an attention layer, a convolution layer; tied embeddings (as every LFM2-VL)."""
    from mlx_vlm.models import lfm2_vl

    tokenizer = _tokenizer(["<image>", "<|image_start|>", "<|image_end|>", "<|img_thumbnail|>"],
                           "<image>")
    vocab = len(tokenizer)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    text = {"model_type": "lfm2", "hidden_size": hidden, "num_hidden_layers": 3,
            "intermediate_size": 2 * hidden, "num_attention_heads": 4,
            "num_key_value_heads": 2, "max_position_embeddings": 512, "rope_theta": 10000.0,
            "vocab_size": vocab, "norm_eps": 1e-5, "conv_bias": False, "conv_L_cache": 3,
            "block_dim": hidden, "block_ff_dim": 2 * hidden, "block_auto_adjust_ff_dim": False,
            "block_multiple_of": 256, "block_ffn_dim_multiplier": 1.0, "conv_dim": hidden,
            "conv_dim_out": hidden, "layer_types": ["conv", "full_attention", "conv"],
            "full_attn_idxs": [1], "tie_word_embeddings": True, "eos_token_id": end}
    vision = {"model_type": "lfm2_vl", "hidden_size": vision_hidden,
              "intermediate_size": 2 * vision_hidden, "num_hidden_layers": vision_layers,
              "num_attention_heads": 2, "num_channels": 3, "image_size": 32, "patch_size": 8,
              "num_patches": 64}
    config = {"model_type": "lfm2-vl", "text_config": text, "vision_config": vision,
              "downsample_factor": 2, "encoder_patch_size": 8,
              "image_token_id": tokenizer.convert_tokens_to_ids("<image>"),
              "min_image_tokens": 4, "max_image_tokens": 16, "do_image_splitting": False,
              "projector_hidden_size": hidden, "max_num_patches": 64, "eos_token_id": end}
    model_config = lfm2_vl.ModelConfig.from_dict(dict(config))
    model_config.text_config = lfm2_vl.TextConfig.from_dict(text)
    model_config.vision_config = lfm2_vl.VisionConfig.from_dict(vision)
    mx.random.seed(seed)
    model = lfm2_vl.Model(model_config)
    for layer in model.language_model.model.layers:  # (tied embeddings: else each token
        ffn = layer.feed_forward.w2                   # would predict itself)
        ffn.weight = mx.random.normal(ffn.weight.shape) * 0.5
    mx.eval(model.parameters())
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "Siglip2ImageProcessor", "encoder_patch_size": 8,
         "patch_size": 8, "downsample_factor": 2, "min_image_tokens": 4,
         "max_image_tokens": 16, "tile_size": 64, "max_num_patches": 64}))
    tokenizer.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps(
        {"processor_class": "Lfm2VlProcessor"}))
    (folder / "chat_template.json").write_text(json.dumps(
        {"chat_template": tokenizer.chat_template}))
    return folder


def _gemma4(folder: Path, seed: int, *, hidden: int, vision_hidden: int,
            vision_layers: int) -> Path:
    """Gemma 4 (E2B / E4B's layout): its vision encoder on 8-pixel patches pooled 2 x 2 (at
    most 4 tokens an image, its aspect kept: a 40 x 24 image is 2), Gemma 4's text model:
    per-layer inputs, a sliding-window layer, a full one, and a last (full) layer reading the
    one before's KV (num_kv_shared_layers), tied embeddings, a soft-capped head."""
    from mlx_vlm.models import gemma4

    named = {"boi_token": "<|image>", "image_token": "<|image|>",  # Gemma 4's own
             "eoi_token": "<image|>"}
    # (<|video|>: Gemma4Processor adds it to a vocabulary without it)
    tokenizer = _tokenizer([*named.values(), "<|audio|>", "<|video|>"], named["image_token"],
                           named)
    vocab = len(tokenizer)
    ids = {k: tokenizer.convert_tokens_to_ids(v) for k, v in named.items()}
    patch, pooling, soft_tokens = 8, 2, 4
    text = {"model_type": "gemma4_text", "hidden_size": hidden, "num_hidden_layers": 3,
            "intermediate_size": 2 * hidden, "num_attention_heads": 4, "head_dim": 16,
            "global_head_dim": 16, "num_key_value_heads": 2, "num_kv_shared_layers": 1,
            "rms_norm_eps": 1e-6, "vocab_size": vocab, "vocab_size_per_layer_input": vocab,
            "hidden_size_per_layer_input": 8, "sliding_window": 16,
            "layer_types": ["sliding_attention", "full_attention", "full_attention"],
            "max_position_embeddings": 512, "final_logit_softcapping": 30.0,
            "tie_word_embeddings": True,
            # as Gemma 4's config.json says (mlx-vlm's and mlx-lm's defaults differ)
            "rope_parameters": {
                "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0,
                                   "rope_type": "proportional"},
                "sliding_attention": {"partial_rotary_factor": 1.0, "rope_theta": 10_000.0,
                                      "rope_type": "default"}}}
    vision = {"model_type": "gemma4_vision", "hidden_size": vision_hidden,
              "intermediate_size": 2 * vision_hidden, "num_hidden_layers": vision_layers,
              "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 16,
              "global_head_dim": 16, "patch_size": patch, "position_embedding_size": 64,
              "pooling_kernel_size": pooling, "default_output_length": soft_tokens}
    config = {"model_type": "gemma4", "text_config": text, "vision_config": vision,
              "vocab_size": vocab, "hidden_size": hidden, "image_token_id": ids["image_token"],
              "boi_token_id": ids["boi_token"], "eoi_token_id": ids["eoi_token"],
              "audio_token_id": tokenizer.convert_tokens_to_ids("<|audio|>"),
              "vision_soft_tokens_per_image": soft_tokens,
              "pad_token_id": tokenizer.pad_token_id,
              "eos_token_id": [tokenizer.convert_tokens_to_ids("<|im_end|>")]}
    model_config = gemma4.ModelConfig.from_dict(dict(config))
    model_config.text_config = gemma4.TextConfig.from_dict(text)
    model_config.vision_config = gemma4.VisionConfig.from_dict(vision)
    mx.random.seed(seed)
    model = gemma4.Model(model_config)
    embedder = model.vision_tower.patch_embedder  # (its position table's default: ones)
    embedder.position_embedding_table = mx.random.normal(
        embedder.position_embedding_table.shape) * 0.5
    for layer in model.language_model.model.layers:  # (tied embeddings: else each token
        down = layer.mlp.down_proj                    # would predict itself)
        down.weight = mx.random.normal(down.weight.shape) * 0.5
    mx.eval(model.parameters())
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    tokenizer.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps(
        {"processor_class": "Gemma4Processor",
         "image_processor": {"patch_size": patch, "max_soft_tokens": soft_tokens,
                             "pooling_kernel_size": pooling}}))
    (folder / "chat_template.json").write_text(json.dumps(
        {"chat_template": tokenizer.chat_template}))
    return folder


def png_bytes(colour: tuple[int, int, int], size: tuple[int, int] = (40, 24)) -> bytes:
    """A plain PNG of one colour (with a stripe, so resizing has something to do)."""
    from PIL import Image

    image = Image.new("RGB", size, colour)
    for x in range(size[0]):
        image.putpixel((x, size[1] // 2), (255 - colour[0], 255 - colour[1], 255 - colour[2]))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()
