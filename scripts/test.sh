#!/usr/bin/env bash
# Sets everything up from nothing (scripts/setup.sh) and runs the checks and the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Tests never touch the network: models come from installed packages.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# The playground's browser tests drive Debian's Chromium; install it when missing and we may (CI runs as root).
# A Japanese font (IPA Gothic, 12 MB) lets its screenshots show Japanese rather than empty boxes.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
  && { ! command -v chromium >/dev/null 2>&1 || [ ! -d /usr/share/fonts/opentype/ipafont-gothic ]; }; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-ipafont-gothic >/dev/null
fi
# The container image test builds the Dockerfile with buildah (no Docker daemon) on a base made by mmdebstrap.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
  && { ! command -v buildah >/dev/null 2>&1 || ! command -v mmdebstrap >/dev/null 2>&1; }; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah mmdebstrap podman >/dev/null
fi
# The Zod contract check runs the seed's schemas with zod 3 under node (skipped, with the reason, without node).
if command -v npm >/dev/null 2>&1; then
  npm ci --prefix tests/zod --no-audit --no-fund --loglevel=error
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# Free disk, for the record: the image test needs ~5 GB while it runs, the suite's folders ~2 GB.
df -h . "${TMPDIR:-/tmp}" /var/lib/containers 2>/dev/null | awk 'NR == 1 || !seen[$1]++' || true
.venv/bin/python -m pytest -q "$@"
