"""Chunking and embedding on a Ray cluster (Ray Data with an actor pool: one model per actor).

An optional extra (`pip install 'hybridrag[ray]'`); the service never imports this module. The driver reads the
documents, Ray chunks them (`make_chunks`, the local code) and embeds the chunks in batches on actors that
each load the model once; the driver gets the rows back in document order and the build goes on as a local
one (entities, keyword index, vector table, graph, publish). So a Ray build and a local build of the same
documents give the same chunk ids, the same graph, and vectors equal up to float tolerance.

Every node must have hybridrag and the model installed (the same image everywhere); Ray binds every network
interface, so run it on a private network (tests run it in a network namespace with loopback alone).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from hybridrag.indexing.build import BuildConfig, embedding_text, make_chunks
from hybridrag.indexing.embedders import Embedder, load_embedder
from hybridrag.indexing.sources import Document
from hybridrag.indexing.tables import Chunk

DEFAULT_BATCH_SIZE = 64


class _EmbedActor:
    """One per Ray actor: loads the model once, embeds batches of chunk texts."""

    def __init__(self, model: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # One intra-op thread per actor: the actor pool, not the model, spreads work over the cores.
        self._embedder = load_embedder(model, "torch", threads=1)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self._embedder.embed_passages([str(t) for t in batch["embed_text"]])
        return {**batch, "vector": np.asarray(vectors, dtype=np.float32)}


def _chunk_rows(config: dict[str, Any]) -> Any:
    build_config = BuildConfig(**config)

    def chunk(row: dict[str, Any]) -> list[dict[str, Any]]:
        doc = Document(**json.loads(row["doc"]))
        return [
            {
                "doc_index": row["doc_index"],
                "chunk_id": c.chunk_id,
                "doc_id": c.doc_id,
                "file_id": c.file_id,
                "position": c.position,
                "start": c.start,
                "end": c.end,
                "text": c.text,
                "language": c.language,
                "pages": json.dumps(c.pages),  # a string: blocks whose lists are all empty have no list type
                "embed_text": embedding_text(doc.title, c.text),
            }
            for c in make_chunks(doc, build_config)
        ]

    return chunk


class RayPassages:
    """A `PassageEngine` on Ray: `address` of a running cluster (None: $RAY_ADDRESS, else Ray starts a
    local one, which binds every interface: only inside a private network)."""

    name = "ray"

    def __init__(
        self, address: str | None = None, batch_size: int = DEFAULT_BATCH_SIZE, actors: int | None = None
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if actors is not None and actors < 1:
            raise ValueError("actors must be at least 1")
        self.address = address
        self.batch_size = batch_size
        self.actors = actors

    def chunk_and_embed(
        self, docs: Sequence[Document], config: BuildConfig, embedder: Embedder | None
    ) -> tuple[list[Chunk], np.ndarray | None]:
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, log_to_driver=False)
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        actors = self.actors or max(1, int(ray.cluster_resources().get("CPU", 1)))
        # Documents travel as JSON: their metadata differ in shape from one to the next, Arrow columns cannot.
        items = [{"doc_index": i, "doc": json.dumps(asdict(d))} for i, d in enumerate(docs)]
        dataset: Any = ray.data.from_items(items, override_num_blocks=max(1, min(len(items), 4 * actors)))
        # Chunking finishes before the actors start: with every CPU held by an embedding actor, chunk tasks
        # queued behind them would never be scheduled (seen with 2 one-CPU workers and 2 actors).
        dataset = dataset.flat_map(_chunk_rows(asdict(config))).materialize()
        if embedder is not None:
            dataset = dataset.map_batches(
                _EmbedActor,
                fn_constructor_kwargs={"model": config.embedding_model},
                batch_size=self.batch_size,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=actors),
                num_cpus=1,
            )
        rows = sorted(dataset.take_all(), key=lambda r: (r["doc_index"], r["position"]))
        chunks = [
            Chunk(
                chunk_id=r["chunk_id"],
                doc_id=r["doc_id"],
                file_id=r["file_id"],
                position=int(r["position"]),
                start=int(r["start"]),
                end=int(r["end"]),
                text=r["text"],
                language=r["language"],
                pages=[int(p) for p in json.loads(r["pages"])],
            )
            for r in rows
        ]
        if embedder is None:
            return chunks, None
        vectors = np.stack([np.asarray(r["vector"], dtype=np.float32) for r in rows]) if rows else None
        if vectors is not None and vectors.shape[1] != embedder.dim:
            raise ValueError(
                f"the cluster's model gives {vectors.shape[1]} dimensions, the index {embedder.dim}"
            )
        return chunks, vectors
