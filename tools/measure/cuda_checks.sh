#!/usr/bin/env bash
# The checks a lent CUDA machine runs (docs/performance.md, "On CUDA"), as one command from
# the repository root. The machine reaches no package index: the bundle (MLX with its CUDA
# backend and headers, mlx-lm, mlx-vlm, llguidance, gguf, the bundled GGUF) is unpacked
# under /tmp first, so PYTHONPATH puts it before the image's own packages.
# Each step runs under its own time limit, so one slow step cannot eat the others' time;
# the log says which were cut off. Writes ${OUT:-/tmp}/cuda.log.
set -u
export PYTHONPATH=/tmp/site:$PWD BATCHCHAT_MODEL_DIR=/tmp/b/models HF_HUB_OFFLINE=1 \
    PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
LOG=${OUT:-/tmp}/cuda.log
PY=${PY:-python3}

step() {
    local limit=$1
    shift
    echo "+ $* (${limit} s limit, $(date -u +%H:%M:%S))" | tee -a "$LOG"
    timeout "$limit" "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 124 ] && echo "(cut off by its ${limit} s limit)" | tee -a "$LOG"
    echo "rc=$rc" | tee -a "$LOG"
}

{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), tree $(git rev-parse --short HEAD 2>/dev/null)"
    nvidia-smi -L 2>&1
    $PY -c "import sys, mlx.core as mx, mlx_lm; print(sys.version.split()[0], 'mlx', mx.__version__, 'mlx-lm', mlx_lm.__version__, mx.default_device())"
} 2>&1 | tee -a "$LOG"

# The engine's answers against mlx-lm's on a real model, alone and batched (the first run
# of a fresh machine also pays MLX's CUDA kernel compiles).
step "${EXACT_S:-100}" $PY -m bench.exactness --requests 4 --new-tokens 32
# Tests that build tiny models for each architecture the loader takes, the quantized KV's
# plain path (the one Metal and CUDA take), images beside text, and the same-answer tests.
step "${TESTS_S:-150}" $PY -m pytest -q -p no:randomly -p no:cacheprovider \
    -o addopts= \
    tests/engine/test_gguf_architectures.py tests/engine/test_kv_bits_plain_path.py \
    tests/engine/test_vision.py tests/engine/test_same_answer.py
# A grammar's cost with the batch running ahead, the current mask path against the one
# before (left open by the sixth lease, whose clock's waits undid the run-ahead).
step "${CONSTRAINED_S:-90}" $PY -m bench.constrained --repeats 3 --mask ab
# Speculation on a GPU: n-gram drafts on code and on stories, against none.
step "${SPEC_S:-110}" $PY -m bench.speculative --repeats 2 --scenarios code,story \
    --code-prompts 3 --story-prompts 3
