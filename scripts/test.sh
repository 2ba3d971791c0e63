#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export QT_QPA_PLATFORM=offscreen
# Bytecode caches on where the environment turns them off (this machine's sets
# PYTHONDONTWRITEBYTECODE): else each xdist worker compiles every module of the tree and
# pytest rewrites every test module's asserts again, at every run, and so does each of the
# processes the tests start. A worker's collection: 19.6 -> 9.4 CPU-s once they are written
# (__pycache__/ is ignored by git).
unset PYTHONDONTWRITEBYTECODE
# Preload the system OpenBLAS for MLX's CPU backend (the app re-executes itself the same way).
blas="$(.venv/bin/python -c "from engine.blas import openblas_path; print(openblas_path() or '')")"
if [ -n "$blas" ]; then export LD_PRELOAD="$blas${LD_PRELOAD:+:$LD_PRELOAD}"; fi
# llama.cpp's test vocabularies and chat templates, from the llama-cpp-python sdist (test data)
.venv/bin/python -m tests.llama_cpp_data >/dev/null
.venv/bin/ruff check .
.venv/bin/lint-imports  # layer rules: [tool.importlinter] in pyproject.toml
# Three test processes (pytest-xdist): a test often waits (a subprocess, a socket, a Qt
# event), so three keep the 2-core CI machine busy: the whole suite in 6:52 against 7:17 with
# two and ~13 min in one (docs/architecture.md, "Tests"). BATCHCHAT_TEST_WORKERS=0: one.
exec .venv/bin/python -m pytest -q -n "${BATCHCHAT_TEST_WORKERS:-3}" --dist load "$@"
