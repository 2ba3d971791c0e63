#!/usr/bin/env bash
# Idempotent setup on a fresh machine: system libraries (when root), a virtualenv with
# BatchChat and its test tools, and the bundled model. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(uname -s)" = "Linux" ] && command -v apt-get >/dev/null 2>&1; then
  # OpenBLAS makes MLX's CPU matmuls ~40x faster; the rest is what Qt needs to open a
  # window (or render offscreen) and Xvfb for screenshots.
  pkgs="libopenblas0-pthread libgl1 libegl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1
        libdbus-1-3 libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0
        libxcb-xinerama0 libxcb-randr0 libxcb-render-util0 libxcb-image0 xvfb xauth
        cmake g++"  # cmake + g++: the native CPU kernels (engine/native, docs/kernels.md)
  missing=""
  for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = "0" ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
      echo "warning: missing system packages:$missing (run: sudo apt-get install$missing)" >&2
    fi
  fi
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
.venv/bin/python -m engine.loader fetch
# The native CPU kernels (the CPU default; BATCHCHAT_NATIVE_QMV=0 turns them off). A failed
# build is not fatal: the engine then uses MLX's own ops and says why once.
if [ "$(uname -s)" = "Linux" ]; then
  .venv/bin/python -m engine.native build || echo "warning: native CPU kernels not built" >&2
fi
