"""LFM2's short-convolution kernels as llama.cpp's converter wrote them, put back in the
form mlx-lm's ``lfm2`` module takes.

conversion/lfm2.py LFM2Model.modify_tensors squeezes each ``conv.conv`` kernel from
Hugging Face's (channels, 1, width) to (channels, width) ("conv op requires 2d tensor");
mlx-lm's depthwise Conv1d holds it as (channels, width, 1). The converter and
llama-quantize keep it float (MODEL_TENSOR.SHORTCONV_CONV), so it is read as float32.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gguf import GGMLQuantizationType

from .ggml_types import to_float32
from .gguf_file import GgufFile, GgufTensor

KERNEL = ".shortconv.conv.weight"


def unsqueeze_kernels(f: GgufFile) -> GgufFile:
    """The file with every short-convolution kernel as (channels, width, 1)."""
    tensors = dict(f.tensors)
    for name, t in f.tensors.items():
        if name.endswith(KERNEL):
            w = to_float32(t.data, t.kind).reshape(t.shape[-2], -1)  # (channels, width)
            w = np.ascontiguousarray(w[:, :, None], dtype=np.float32)
            tensors[name] = GgufTensor(name, GGMLQuantizationType.F32, tuple(w.shape), w)
    return dataclasses.replace(f, tensors=tensors)
