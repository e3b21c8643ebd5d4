#!/usr/bin/env bash
# Builds the container image from the repository's Dockerfile with buildah (no Docker daemon needed), starts
# it, waits for /readyz, answers a search from the host and from inside the container, and reports the
# image's size and build time (JSON to $IMAGE_REPORT, default benchmarks/results/image.json).
#
# Where no registry can be reached (as on this project's machines), the Dockerfile's base image
# python:3.11-slim is replaced by a local stand-in, built once and cached: a Debian bookworm root file
# system made by mmdebstrap from Debian's packages, with Python 3.11 in a virtual environment at /usr/local
# so that `python` and `pip` work system-wide as in the official image. Only the base is a stand-in: the
# Dockerfile's own steps are what is built and run. pip inside the build reaches the package index the way
# pip on this machine does: its configuration (`pip config list`) is written to a file mounted read-only
# into the build, with the local folders and CA bundle it names.
#
# Every image and layer the build makes is removed when the script ends (the base stand-in stays): an image is
# 1.5 GB and its builder stage 3.4 GB, and a disk that kept one per run filled up. KEEP_IMAGE=1 keeps them.
#
# Needs root, buildah and mmdebstrap (Debian: apt-get install buildah mmdebstrap). Servers bind 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
IMAGE=${IMAGE:-localhost/hybridrag:test}
BASE=${BASE_IMAGE:-docker.io/library/python:3.11-slim}
CACHE=${IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hybridrag/image}
REPORT=${IMAGE_REPORT:-$ROOT/benchmarks/results/image-${VARIANT:-server-onnx}.json}
# Empty: torch comes from pip's configured index (this machine's mirror holds the CPU build); set it to
# https://download.pytorch.org/whl/cpu (the Dockerfile's default) where that index is reachable.
TORCH_INDEX_URL=${TORCH_INDEX_URL-}
# server-onnx (the Dockerfile's default: no torch) or server (with torch).
VARIANT=${VARIANT:-server-onnx}
ISOLATION=(--isolation=chroot)
for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "image-test: $tool is not installed (apt-get install buildah mmdebstrap)" >&2; exit 3; }
done
mkdir -p "$CACHE"
work=$(mktemp -d)
container=""
server=""
images_before=""
cleanup() {
  if [ -n "$server" ]; then kill -TERM -- "-$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  if [ -n "$container" ]; then buildah rm "$container" >/dev/null 2>&1 || true; fi
  if [ -n "$images_before" ] && [ "${KEEP_IMAGE:-}" != 1 ]; then
    # What this build added; a pass can leave an image another one was made from, so up to three passes.
    for _ in 1 2 3; do
      buildah images --all --quiet --no-trunc | sort -u >"$work/images.after" || true
      comm -13 "$work/images.before" "$work/images.after" >"$work/images.new"
      [ -s "$work/images.new" ] || break
      xargs -r buildah rmi --force <"$work/images.new" >/dev/null 2>&1 || true
    done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# 1. The base stand-in, unless an image of that name is already here (a real pull, or the cached stand-in).
if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  rootfs="$CACHE/bookworm-python3.11.tar"
  if [ ! -s "$rootfs" ]; then
    echo "image-test: making the base stand-in with mmdebstrap (once)" >&2
    mmdebstrap --variant=minbase \
      --include=python3.11,python3.11-venv,ca-certificates,passwd,netbase,tzdata \
      --customize-hook='chroot "$1" python3.11 -m venv /usr/local' \
      --customize-hook='chroot "$1" ln -sf python3.11 /usr/local/bin/python3' \
      bookworm "$rootfs.tmp"
    mv "$rootfs.tmp" "$rootfs"
  fi
  c=$(buildah from scratch)
  buildah add "$c" "$rootfs" / >/dev/null
  buildah config --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd python3 --label org.opencontainers.image.description="local stand-in for python:3.11-slim" "$c"
  buildah commit --rm "$c" "$BASE" >/dev/null
fi

# 2. pip's configuration for the build, and what it names on this machine (mounted read-only at the same paths).
mounts=()
{
  echo "[global]"
  pip config list 2>/dev/null | sed -E "s/^(:env:|global)\.([a-z-]+)='(.*)'$/\2 = \3/" | grep -E '^[a-z-]+ = ' | sort -u -t= -k1,1
} >"$work/pip.conf"
mounts+=(-v "$work/pip.conf:/etc/pip.conf:ro")
for path in $(grep -oE '(file://)?/[^ ]+' "$work/pip.conf" | sed -e 's#^file://##' -e 's#/simple/*$##' | sort -u); do
  # A file:// index URL names its simple/ folder: the folder above it holds the files its pages link to.
  if [ -e "$path" ]; then mounts+=(-v "$path:$path:ro"); fi
done

# 3. Build the repository's Dockerfile.
echo "image-test: building $IMAGE" >&2
# An image of that name from an earlier run (kept, or left by a run that was killed) goes first, so that
# the build's images are all new ones.
buildah rmi --force "$IMAGE" >/dev/null 2>&1 || true
buildah images --all --quiet --no-trunc | sort -u >"$work/images.before"
images_before=yes
start=$(date +%s)
# A kernel that is busy can refuse, for a moment, the sealing of the in-memory copy of itself that a RUN
# step's runtime makes ("sealing memfd copy: Device or resource busy": the pages are still pinned), and a
# CI run failed on that once. Such a refusal, and only such, is tried again: up to three builds, the later
# ones starting at the failed step from the layers already made (--layers).
transient='sealing memfd copy|Text file busy|resource temporarily unavailable'
for attempt in 1 2 3; do
  if buildah bud "${ISOLATION[@]}" --format docker --pull=never --layers --force-rm \
    --build-arg TORCH_INDEX_URL="$TORCH_INDEX_URL" --build-arg PYTHON_IMAGE="$BASE" --build-arg VARIANT="$VARIANT" \
    "${mounts[@]}" -t "$IMAGE" -f Dockerfile . >"$work/build.log" 2>&1; then
    break
  fi
  refusal=$(tail -20 "$work/build.log" | grep -iE "$transient" | head -1 || true)
  if [ "$attempt" -lt 3 ] && [ -n "$refusal" ]; then
    echo "image-test: build $attempt met a transient error, building again: $refusal" >&2
    sleep 10
    continue
  fi
  tail -50 "$work/build.log" >&2
  exit 1
done
build_seconds=$(( $(date +%s) - start ))

# 4. Run it: the image's own command, on a free loopback port (chroot isolation shares the host's network).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
container=$(buildah from --pull=never "$IMAGE")
buildah inspect --type image "$IMAGE" >"$work/inspect.json"
field() { python3 -c "import json,sys; d = json.load(open('$work/inspect.json')); print($1)"; }
cmd=$(field '" ".join(d["OCIv1"]["config"]["Cmd"])')
start=$(date +%s)
setsid buildah run "${ISOLATION[@]}" --env HYBRIDRAG_HOST=127.0.0.1 --env HYBRIDRAG_PORT="$port" \
  "$container" -- $cmd >"$work/serve.log" 2>&1 &
server=$!
ready=""
for _ in $(seq 1 300); do
  if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=yes; break; fi
  kill -0 "$server" 2>/dev/null || break
  sleep 1
done
if [ -z "$ready" ]; then
  echo "image-test: the container never became ready" >&2
  tail -40 "$work/serve.log" >&2
  exit 1
fi
ready_seconds=$(( $(date +%s) - start ))
answer=$(curl -fsS -X POST "http://127.0.0.1:$port/v1/search" -H 'Content-Type: application/json' \
  -d '{"text": "Who founded Sony?", "options": {"limit": 3}}')
title=$(printf '%s' "$answer" | python3 -c 'import json,sys; r = json.load(sys.stdin)["results"]; print(r[0]["metadata"]["title"] if r else "")')
case "$title" in *Sony*) ;; *) echo "image-test: unexpected top hit: $title" >&2; exit 1 ;; esac
# From inside the container too: its own HEALTHCHECK command, then a search with the image's Python.
health=$(field 'd["Docker"]["config"].get("Healthcheck", {}).get("Test")')
case "$health" in *readyz*) ;; *) echo "image-test: no HEALTHCHECK on /readyz in the image: $health" >&2; exit 1 ;; esac
buildah run "${ISOLATION[@]}" --env HYBRIDRAG_PORT="$port" "$container" -- python -c \
  "import os,urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ['HYBRIDRAG_PORT'], timeout=4).status == 200 else 1)"
inside=$(buildah run "${ISOLATION[@]}" "$container" -- python -c "
import json, urllib.request
req = urllib.request.Request('http://127.0.0.1:$port/v1/search', data=json.dumps({'text': 'トヨタ自動車を設立したのは誰ですか', 'options': {'limit': 1}}).encode(), headers={'Content-Type': 'application/json'})
print(json.load(urllib.request.urlopen(req, timeout=30))['results'][0]['metadata']['title'])")
# The English name taggers run on their ONNX exports (no torch in the default variant): the case-less one finds
# case-less names, the other reads cased ones.
tagger=$(buildah run "${ISOLATION[@]}" "$container" -- python -c "
from hybridrag.indexing.analysis.name_tagger import packaged_caseless_tagger, packaged_tagger
for t, text in ((packaged_caseless_tagger(), 'sakichi toyoda founded toyoda automatic loom works in kariya .'), (packaged_tagger(), 'Sakichi Toyoda founded Toyoda Automatic Loom Works in Kariya.')):
    print(t.runtime if t else 'none', len(t.tag([text])[0]) if t else 0, end=' ')")
case "$tagger" in "onnx "[1-9]*" onnx "[1-9]*) ;; *) echo "image-test: the name taggers do not run on their ONNX exports: $tagger" >&2; exit 1 ;; esac
user=$(field 'd["OCIv1"]["config"].get("User", "")')
[ -n "$user" ] && [ "$user" != root ] && [ "$user" != 0 ] || { echo "image-test: the image runs as root" >&2; exit 1; }

# 5. Report.
size=$(podman image inspect --format '{{.Size}}' "$IMAGE" 2>/dev/null || echo 0)
base_size=$(podman image inspect --format '{{.Size}}' "$BASE" 2>/dev/null || echo 0)
base_id=$(buildah images --quiet --no-trunc "$BASE" 2>/dev/null | head -1 || true)
mkdir -p "$(dirname "$REPORT")"
python3 - "$REPORT" <<EOF
import json, platform, sys
report = {
    "benchmark": "image",
    "image": "$IMAGE",
    "variant": "$VARIANT",
    "base": "$BASE",
    "baseImageId": "$base_id",
    "buildSeconds": $build_seconds,
    "layersCached": $([ "$(grep -c 'Using cache' "$work/build.log" || true)" -gt 0 ] && echo True || echo False),
    "readySeconds": $ready_seconds,
    "sizeBytes": int("$size" or 0),
    "baseSizeBytes": int("$base_size" or 0),
    "user": "$user",
    "labels": json.load(open("$work/inspect.json"))["OCIv1"]["config"].get("Labels", {}),
    "topHit": "$title",
    "topHitFromInside": """$inside""".strip(),
    "machine": platform.machine(),
}
open(sys.argv[1], "w").write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
print(json.dumps(report, ensure_ascii=False))
EOF
