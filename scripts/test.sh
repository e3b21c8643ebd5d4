#!/usr/bin/env bash
# Sets everything up from nothing (scripts/setup.sh) and runs the checks and the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Tests never touch the network: models come from installed packages.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# The Zod contract check runs the seed's schemas with zod 3 under node (skipped, with the reason, without node).
if command -v npm >/dev/null 2>&1; then
  npm ci --prefix tests/zod --no-audit --no-fund --silent
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
