"""Helpers shared by the GGUF and mlx-lm directory loaders."""

from __future__ import annotations

from collections.abc import Iterable

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map

from ..cpu_options import CpuOptions

# End-of-turn markers of common chat templates. A model's tokenizer config often
# names only one eos id, but the template may close a turn with another token;
# generation must stop on either.
END_OF_TURN_TOKENS = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
    "</s>",
)


def on_cpu() -> bool:
    return mx.default_device() == mx.cpu


def device_name() -> str:
    return "cpu" if on_cpu() else "gpu"


def resolve_quantized(quantized: bool | None, cpu: CpuOptions | None = None) -> bool:
    """None = auto: quantized on Metal/CUDA; on the CPU quantized when the engine will run
    the quantized linears on its native matvec kernel (engine/native, issue #19: 2-3x the
    float32 path's decode speed), else float32 (MLX's own CPU quantized kernels are ~10x
    slower than fp32 GEMM with OpenBLAS). `cpu`: the engine's CPU switches (None: from the
    environment), the same value ModelRunner installs the kernels from."""
    if quantized is None and on_cpu():
        return native_qmv_usable(cpu if cpu is not None else CpuOptions.from_env())
    return (not on_cpu()) if quantized is None else quantized


def widen_floats(quantized: bool | None) -> bool:
    """fp16/bf16 weights become float32 on the CPU (its half-precision matmuls are slow)
    unless quantized=True asks to keep the file's weights as they are."""
    return on_cpu() and quantized is not True


def native_qmv_usable(cpu: CpuOptions) -> bool:
    """The engine will run quantized linears on the native kernel: the options want it
    (`CpuOptions.qmv_rows`, as engine.native.layers.install decides) and it is built and
    loads."""
    if cpu.qmv_rows() == 0:
        return False
    from .. import native

    return native.available()


def packs_weights(cpu: CpuOptions | None) -> bool:
    """The engine will run quantized linears on the native packed kernel (the default on
    the CPU: batch-invariant with int8 activations, engine/native/layers.py), so the loader
    may decode them straight into its layout (packed_form.py)."""
    options = cpu if cpu is not None else CpuOptions.from_env()
    return options.invariant and options.int8 and native_qmv_usable(options)


def end_token_ids(eos_ids: Iterable[int | None], vocab: dict[str, int],
                  special_tokens: Iterable[str]) -> frozenset[int]:
    """eos ids plus every special end-of-turn marker the vocabulary has."""
    ids = {int(i) for i in eos_ids if i is not None and int(i) >= 0}
    special = set(special_tokens)
    for tok in END_OF_TURN_TOKENS:
        if tok in special and tok in vocab:
            ids.add(vocab[tok])
    return frozenset(ids)


def cast_floats_to_float32(model: nn.Module) -> None:
    """fp16/bf16 matmuls are slow on MLX's CPU backend: keep float params in fp32."""
    def cast(x: mx.array) -> mx.array:
        if x.dtype in (mx.float16, mx.bfloat16):
            return x.astype(mx.float32)
        return x
    model.update(tree_map(cast, model.parameters()))


def weights_description(model: nn.Module) -> str:
    """'float32', 'float16' or e.g. '4/8-bit quantized' from the model's parameters."""
    bits = sorted({m.bits for _, m in model.named_modules() if hasattr(m, "bits")})
    if bits:
        return "/".join(str(b) for b in bits) + "-bit quantized"
    dtypes = {v.dtype for _, v in tree_flatten(model.parameters())
              if mx.issubdtype(v.dtype, mx.floating)}
    names = sorted(str(d).removeprefix("mlx.core.") for d in dtypes)
    return "/".join(names) or "unknown dtype"
