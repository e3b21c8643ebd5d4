#!/usr/bin/env bash
# Sets everything up from nothing, builds the bundled sample corpus (English + Japanese) into an embedded
# index under .data/, and serves it on http://127.0.0.1:${PORT:-8000}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec .venv/bin/hybridrag serve --sample --index-dir "${HYBRIDRAG_INDEX_DIR:-.data/sample-index}" \
  --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}"
