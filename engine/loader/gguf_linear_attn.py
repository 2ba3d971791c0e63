"""Qwen 3.5's Gated DeltaNet layers as llama.cpp's converter wrote them, put back in the
form mlx-lm's ``qwen3_5`` module (Hugging Face's) takes.

What convert_hf_to_gguf.py does to them (conversion/qwen.py), each undone here exactly:

- ``Qwen3NextModel.modify_tensors``: ``A_log`` stored as ``ssm_a = -exp(A_log)`` (taken
  back as ``log(-ssm_a)``, the one step that is not bit-exact: within an ulp of float32);
  ``dt_bias`` renamed ``ssm_dt.bias`` (Arch.tensors); the conv1d kernel squeezed from
  (channels, 1, width) to (channels, width) (mlx-lm's Conv1d wants (channels, width, 1));
  the other RMSNorms stored plus one, which mlx-lm's own sanitize adds to a Hugging Face
  checkpoint too, so they are taken as they are;
- ``_LinearAttentionVReorderBase.modify_tensors``: with fewer key heads than value heads,
  the value heads reordered from grouped by key head to tiled (``_reorder_v_heads``), in
  the V rows of ``attn_qkv``, the rows of ``attn_gate`` (z), ``ssm_alpha`` and
  ``ssm_beta``, the values of ``ssm_a`` and ``ssm_dt``, the V channels of the conv1d and
  the columns of ``ssm_out``. mlx-lm repeats each key head over its group
  (``gated_delta_ops``: ``mx.repeat``), so every one goes back to grouped order: rows by
  gguf_weights' row order (a quantized tensor's rows move whole), the float tensors here,
  and ``ssm_out``'s columns, a whole value head at a time, in the converted arrays
  (gguf.py: a head's columns are whole groups of the affine form, so nothing is
  re-encoded).
- MTP (multi-token prediction) blocks, written after the model's own as extra
  ``blk.{i}`` (``nextn_predict_layers``): mlx-lm's model has none (its sanitize drops
  them), so they are left out.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType

from .ggml_types import to_float32
from .gguf_file import GgufFile, GgufTensor

_BLOCK = re.compile(r"^blk\.(\d+)\.")


def value_head_order(key_heads: int, value_heads: int) -> np.ndarray | None:
    """The value heads' order that undoes ``_reorder_v_heads`` (None: nothing to undo):
    Hugging Face's head h is the file's head ``order[h]``. The converter wrote head
    (key group g, member j) at j * key_heads + g; Hugging Face keeps it at g * per + j."""
    if key_heads <= 0 or value_heads == key_heads:
        return None
    per = value_heads // key_heads
    return np.arange(value_heads).reshape(per, key_heads).T.reshape(-1)


def _rows(order: np.ndarray, width: int) -> np.ndarray:
    """A head order as the order of its heads' rows, `width` rows a head."""
    return (order[:, None] * width + np.arange(width)[None, :]).reshape(-1)


def _heads(config: dict[str, Any]) -> tuple[np.ndarray | None, int, int]:
    order = value_head_order(config["linear_num_key_heads"], config["linear_num_value_heads"])
    key_dim = config["linear_num_key_heads"] * config["linear_key_head_dim"]
    return order, key_dim, config["linear_value_head_dim"]


def _f32(name: str, values: np.ndarray) -> GgufTensor:
    values = np.ascontiguousarray(values, dtype=np.float32)
    return GgufTensor(name, GGMLQuantizationType.F32, tuple(values.shape), values)


def fix_file(f: GgufFile, config: dict[str, Any]) -> GgufFile:
    """The file with its MTP blocks left out and its float linear-attention tensors (A,
    dt, conv1d: llama-quantize keeps them float) as the Hugging Face checkpoint had them."""
    order, key_dim, head_v = _heads(config)
    layers = config["num_hidden_layers"]
    tensors: dict[str, GgufTensor] = {}
    for name, t in f.tensors.items():
        block = _BLOCK.match(name)
        if block is not None and int(block.group(1)) >= layers:
            continue  # an MTP block
        if name.endswith(".ssm_a"):
            a = to_float32(t.data, t.kind).reshape(-1)
            with np.errstate(divide="ignore", invalid="ignore"):
                t = _f32(name, np.log(-a if order is None else -a[order]))
        elif name.endswith(".ssm_dt.bias") and order is not None:
            t = _f32(name, to_float32(t.data, t.kind).reshape(-1)[order])
        elif name.endswith(".ssm_conv1d.weight"):
            w = to_float32(t.data, t.kind).reshape(t.shape[-2], -1)  # (channels, width)
            if order is not None:
                w = w[np.concatenate([np.arange(2 * key_dim),
                                      2 * key_dim + _rows(order, head_v)])]
            t = _f32(name, w[:, :, None])
        tensors[name] = t
    return dataclasses.replace(f, tensors=tensors)


def row_orders(f: GgufFile, config: dict[str, Any]) -> dict[str, np.ndarray]:
    """The row order (gguf_weights.Undo) of each linear-attention projection whose value
    heads the converter moved, by GGUF name."""
    order, key_dim, head_v = _heads(config)
    if order is None:
        return {}
    v_rows = _rows(order, head_v)
    out = {}
    for name in f.tensors:
        if name.endswith(".attn_qkv.weight"):
            out[name] = np.concatenate([np.arange(2 * key_dim), 2 * key_dim + v_rows])
        elif name.endswith(".attn_gate.weight") and f.tensors[name].shape[0] == v_rows.size:
            out[name] = v_rows  # the linear attention's z (full layers have none)
        elif name.endswith((".ssm_alpha.weight", ".ssm_beta.weight")):
            out[name] = order
    return out


def column_orders(config: dict[str, Any]) -> tuple[re.Pattern[str], np.ndarray, int] | None:
    """The modules (a pattern of mlx-lm module paths) whose input columns the converter
    moved, the value heads' order and a head's width in columns (None: nothing moved)."""
    order, _, head_v = _heads(config)
    if order is None:
        return None
    return re.compile(r"\.linear_attn\.out_proj$"), order, head_v
