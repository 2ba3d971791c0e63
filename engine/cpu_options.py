"""The CPU backend's switches as one typed value, read from the environment in one place.

`CpuOptions.from_env()` parses every `BATCHCHAT_*` switch of the CPU backend (the names,
defaults and meanings of docs/environment.md); `EngineConfig.cpu` holds the result, made
once when the config is made at an entry point (app, serve, CLI, simulator, benchmarks),
and the loader (keep weights quantized?) and the model runner (which kernels?) both decide
from that one value. Two switches stay read by the C++ kernels themselves (their
process-wide thread pool and instruction set): BATCHCHAT_QMV_THREADS, BATCHCHAT_NATIVE_AVX512.
No MLX here: entry points import this before the BLAS re-exec (engine/blas.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

# The quantized linears' row limits when BATCHCHAT_INVARIANT=0 (docs/kernels.md): the
# crossover with float32 BLAS is 32..48 rows; with int8 activations the kernel still beat
# it at 64 (321 vs 370 ms).
DEFAULT_MAX_ROWS = 32
INT8_MAX_ROWS = 64
# Batch invariance (engine/determinism.py): every row count on the kernel, so a row's output
# never depends on how many rows share the call.
ALL_ROWS = 1 << 40


class CpuOptionsError(ValueError):
    """A BATCHCHAT_* variable holds a value it does not take."""


@dataclass(frozen=True, slots=True)
class CpuOptions:
    """What the engine does on MLX's CPU backend (no effect on Metal/CUDA)."""

    native: bool = True  # the native extension (engine/native) when built; BATCHCHAT_NO_NATIVE=1
    # quantized linears on the native kernel, and the loader keeps weights quantized for it
    # (off: float32 weights and BLAS); BATCHCHAT_NATIVE_QMV=0
    qmv: bool = True
    # at most this many rows on the kernel (None: every row count when invariant, else
    # DEFAULT_MAX_ROWS / INT8_MAX_ROWS); BATCHCHAT_NATIVE_QMV=N
    qmv_max_rows: int | None = None
    int8: bool = True  # int8 activations in the kernel; BATCHCHAT_NATIVE_INT8=0
    float32_copies: bool = False  # float32 weight copies for big passes; BATCHCHAT_NATIVE_QMV_F32=1
    scalar: bool = False  # the portable kernels, not AVX2/FMA; BATCHCHAT_QMV_SCALAR=1
    rowwise: bool = True  # native SiLU x up, RoPE, RMSNorm; BATCHCHAT_NATIVE_ROWWISE=0
    attention: bool = True  # the native attention kernel; BATCHCHAT_NATIVE_ATTENTION=0
    sampler: bool = True  # batched native / one-graph sampler; BATCHCHAT_NATIVE_SAMPLER=0
    invariant: bool = True  # batch-invariant kernels (docs/determinism.md); BATCHCHAT_INVARIANT=0
    malloc_tuning: bool = True  # glibc keeps freed memory; BATCHCHAT_NO_MALLOC_TUNING=1
    # the decode batch's rows as ranges of one KV arena per layer; BATCHCHAT_KV_ARENA=1
    kv_arena: bool = False

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if name == "qmv_max_rows":
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                          or value < 1):
                    raise CpuOptionsError("CpuOptions.qmv_max_rows must be None or a whole "
                                          f"number >= 1, got {value!r}")
            elif not isinstance(value, bool):
                raise CpuOptionsError(f"CpuOptions.{name} must be True or False, got {value!r}")

    def qmv_rows(self) -> int:
        """The most rows a quantized linear runs on the native kernel (0: never)."""
        if not (self.native and self.qmv):
            return 0
        if self.qmv_max_rows is not None:
            return self.qmv_max_rows
        if self.invariant:
            return ALL_ROWS
        return INT8_MAX_ROWS if self.int8 else DEFAULT_MAX_ROWS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CpuOptions:
        """The options the BATCHCHAT_* variables of `environ` (default: os.environ) ask for;
        unset or empty variables keep the defaults. Raises CpuOptionsError naming the
        variable for a value it does not take."""
        env = os.environ if environ is None else environ
        qmv, rows = _qmv(env)
        return cls(
            native=not _flag(env, "BATCHCHAT_NO_NATIVE", False),
            qmv=qmv,
            qmv_max_rows=rows,
            int8=_flag(env, "BATCHCHAT_NATIVE_INT8", True),
            float32_copies=_flag(env, "BATCHCHAT_NATIVE_QMV_F32", False),
            scalar=_flag(env, "BATCHCHAT_QMV_SCALAR", False),
            rowwise=_flag(env, "BATCHCHAT_NATIVE_ROWWISE", True),
            attention=_flag(env, "BATCHCHAT_NATIVE_ATTENTION", True),
            sampler=_flag(env, "BATCHCHAT_NATIVE_SAMPLER", True),
            invariant=_flag(env, "BATCHCHAT_INVARIANT", True),
            malloc_tuning=not _flag(env, "BATCHCHAT_NO_MALLOC_TUNING", False),
            kv_arena=_flag(env, "BATCHCHAT_KV_ARENA", False),
        )


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise CpuOptionsError(f"{name}={env[name]!r}: use 1 or 0 (docs/environment.md)")


def _qmv(env: Mapping[str, str]) -> tuple[bool, int | None]:
    """BATCHCHAT_NATIVE_QMV: "0" off; unset or "1" on with the default row limit; N >= 2 on
    for at most N rows."""
    value = env.get("BATCHCHAT_NATIVE_QMV", "").strip()
    if value in ("", "1"):
        return True, None
    if value == "0":
        return False, None
    if value.isdigit():
        return True, int(value)
    raise CpuOptionsError(f"BATCHCHAT_NATIVE_QMV={value!r}: use 0 (off), 1 (on) or a row "
                          "limit such as 32 (docs/environment.md)")
