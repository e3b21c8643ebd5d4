"""Chunking, entity extraction and embedding on a Ray cluster (Ray Data with an actor pool: one model per actor).

An optional extra (`pip install 'hybridrag[ray]'`); the service never imports this module. The driver reads the
documents, Ray chunks them (`make_chunks`, the local code) and extracts their entities, and actors that each
load the model once embed the chunks. For a new version of an index on object storage the actors write the
vector table straight to the bucket (LanceDB/Lance fragments under the version's ``vectors/``, read back and
checksummed by the worker that wrote them) and the driver commits it once; otherwise the vectors come back to
the driver. Either way the build goes on as a local one (keyword index, graph, publish), so a Ray build and a
local build of the same documents give the same chunk ids, the same graph, and vectors equal up to float
tolerance.

Every node must have hybridrag and the model installed (the same image everywhere); Ray binds every network
interface, so run it on a private network (tests run it in a network namespace with loopback alone). The
driver's AWS_* variables travel to the actors (Ray's runtime_env) so they reach the same bucket.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.indexing.analysis.entities import Mention, chunk_types
from hybridrag.indexing.builds.build import (
    BuildConfig,
    Passages,
    WrittenVectors,
    embedding_text,
    make_chunks,
)
from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.models.embedders import DEVICES, Embedder, ModelUnavailable, load_embedder
from hybridrag.indexing.stores.filters import parse_date
from hybridrag.indexing.stores.tables import Chunk
from hybridrag.indexing.stores.vectors import TABLE

DEFAULT_BATCH_SIZE = 64
# Rows per fragment an actor writes to the bucket: few, large files (a Lance fragment per embedding batch would
# leave hundreds of small ones to list, download and scan).
DEFAULT_WRITE_ROWS = 4096
DATASET = f"vectors/{TABLE}.lance"  # the vector table inside a version
AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
)


class _EmbedActor:
    """One per Ray actor: loads the model once, embeds batches of chunk texts (`batch_size` per model call).

    With `store_url` and `version` it writes each batch's vector rows to that version's table on the bucket
    as a Lance fragment, reads its files back for their checksums, and returns the fragment instead of the
    vectors (in the batch's first row).
    """

    def __init__(
        self,
        model: str,
        batch_size: int,
        store_url: str | None = None,
        version: str | None = None,
        encoder: str = "torch",
        device: str = "cpu",
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # One intra-op thread per actor: the actor pool, not the model, spreads work over the cores (or over
        # the GPUs: one actor per GPU).
        self._embedder = load_embedder(model, encoder, threads=1, device=device)
        self._batch_size = batch_size
        self._remote: Any = None
        self._version = version
        if store_url is not None and version is not None:
            from hybridrag.indexing.stores.remote import RemoteIndex, lancedb_storage_options

            self._remote = RemoteIndex.open(store_url)
            self._uri = f"{self._remote.url}/versions/{version}/{DATASET}"
            self._options = lancedb_storage_options()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["embed_text"]]
        parts = [
            self._embedder.embed_passages(texts[i : i + self._batch_size])
            for i in range(0, len(texts), self._batch_size)
        ]
        vectors = np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 1), np.float32)
        if self._remote is None:
            return {**batch, "vector": vectors}
        record = json.dumps(self._write(batch, vectors))
        out = {k: v for k, v in batch.items() if k != "embed_text"}
        out["written"] = np.array([record] + [""] * (len(texts) - 1), dtype=object)
        return out

    def _write(self, batch: dict[str, np.ndarray], vectors: np.ndarray) -> dict[str, Any]:
        from lance.fragment import write_fragments

        from hybridrag.indexing.stores.vectors import vector_rows

        table = vector_rows(
            {
                "chunk_id": [str(x) for x in batch["chunk_id"]],
                "doc_id": [str(x) for x in batch["doc_id"]],
                "file_id": [str(x) for x in batch["file_id"]],
                "date": [parse_date(str(x) or None) for x in batch["date"]],
                "entity_types": [json.loads(str(x)) for x in batch["entity_types"]],
            },
            vectors,
        )
        fragments = write_fragments(table, self._uri, schema=table.schema, storage_options=self._options)
        metadata = [f.to_json() for f in fragments]
        files = {}
        for fragment in metadata:
            for data_file in fragment["files"]:
                rel = f"{DATASET}/data/{data_file['path']}"
                files[rel] = self._remote.digest(self._remote.path("versions", str(self._version), rel))
        return {"fragments": metadata, "files": files, "rows": len(vectors), "dim": int(vectors.shape[1])}


def _chunk_rows(config: dict[str, Any]) -> Any:
    build_config = BuildConfig(**config)
    extractors: list[Any] = []  # made once per task, on first use (the Sudachi dictionary is large)

    def mentions_of(doc: Document, chunks: list[Chunk]) -> list[list[Mention]]:
        if not build_config.graph:
            return [[] for _ in chunks]
        if not extractors:
            from hybridrag.indexing.analysis.analyzers import Analyzer
            from hybridrag.indexing.analysis.entities import EntityExtractor

            extractors.append(
                EntityExtractor(
                    Analyzer(build_config.sudachi_mode), tagger_types=build_config.name_typing == "tagger"
                )
            )
        title = extractors[0].extract_title(doc.title)
        return [title + extractors[0].extract(c.text) for c in chunks]

    def chunk(row: dict[str, Any]) -> list[dict[str, Any]]:
        doc = Document(**json.loads(row["doc"]))
        chunks = make_chunks(doc, build_config)
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
                "date": doc.date or "",
                "mentions": json.dumps([asdict(m) for m in found]),
                "entity_types": json.dumps(chunk_types(found)),
                "embed_text": embedding_text(doc.title, c.text),
            }
            for c, found in zip(chunks, mentions_of(doc, chunks), strict=True)
        ]

    return chunk


def _aws_env() -> dict[str, str]:
    return {k: os.environ[k] for k in AWS_ENV if os.environ.get(k)}


class RayPassages:
    """A `PassageEngine` on Ray: `address` of a running cluster (None: $RAY_ADDRESS, else Ray starts a
    local one, which binds every interface: only inside a private network).

    `store_url` is the index's object-storage URL when it has one: a new version's vector table is then
    written there by the actors (at most `write_rows` rows per fragment, at least four fragments per actor
    while batches stay `batch_size` or more), not sent back to the driver.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        actors: int | None = None,
        store_url: str | None = None,
        write_rows: int = DEFAULT_WRITE_ROWS,
        device: str = "auto",
    ) -> None:
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if actors is not None and actors < 1:
            raise ValueError("actors must be at least 1")
        if write_rows < 1:
            raise ValueError("write_rows must be at least 1")
        self.address = address
        self.batch_size = batch_size
        self.actors = actors
        self.store_url = store_url
        self.write_rows = write_rows
        self.device = device

    def chunk_and_embed(
        self,
        docs: Sequence[Document],
        config: BuildConfig,
        embedder: Embedder | None,
        version: str | None = None,
    ) -> Passages:
        direct = embedder is not None and self.store_url is not None and version is not None
        rows = self._rows(docs, config, embedder is not None, version if direct else None)
        # Ordered by document, then position: the order of a local build. Batches are consecutive runs of
        # that order (preserve_order), so the fragments, taken in the order of their first rows, are too.
        rows.sort(key=lambda r: (r["doc_index"], r["position"]))
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
        mentions = (
            {r["chunk_id"]: [Mention(**m) for m in json.loads(r["mentions"])] for r in rows}
            if config.graph
            else None
        )
        if embedder is None:
            return Passages(chunks, mentions=mentions)
        if direct:
            records = [json.loads(r["written"]) for r in rows if r["written"]]
            return Passages(
                chunks, mentions=mentions, written=self._commit(records, embedder.dim, str(version))
            )
        vectors = np.stack([np.asarray(r["vector"], dtype=np.float32) for r in rows]) if rows else None
        if vectors is not None and vectors.shape[1] != embedder.dim:
            raise ValueError(
                f"the cluster's model gives {vectors.shape[1]} dimensions, the index {embedder.dim}"
            )
        return Passages(chunks, vectors, mentions)

    def _rows(
        self, docs: Sequence[Document], config: BuildConfig, embed: bool, version: str | None
    ) -> list[dict[str, Any]]:
        """Chunk rows (with their mentions) and, with `embed`, vectors or (given `version`) the fragments the
        actors wrote for it; any order."""
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, log_to_driver=False)
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        resources = ray.cluster_resources()
        gpus = self.gpus(resources)
        actors = self.actors or max(1, gpus or int(resources.get("CPU", 1)))
        # Documents travel as JSON: their metadata differ in shape from one to the next, Arrow columns cannot.
        items = [{"doc_index": i, "doc": json.dumps(asdict(d))} for i, d in enumerate(docs)]
        dataset: Any = ray.data.from_items(items, override_num_blocks=max(1, min(len(items), 4 * actors)))
        # Chunking finishes before the actors start: with every CPU held by an embedding actor, chunk tasks
        # queued behind them would never be scheduled (seen with 2 one-CPU workers and 2 actors).
        dataset = dataset.flat_map(_chunk_rows(asdict(config))).materialize()
        if embed:
            env = _aws_env() if version is not None else {}
            batch = self.batch_size
            if version is not None:
                # One fragment per batch: large, but at least four batches per actor so that every actor
                # gets work and a slow one does not hold the rest.
                spread = -(-int(dataset.count()) // (4 * actors))
                batch = min(self.write_rows, max(self.batch_size, spread))
            dataset = dataset.map_batches(
                _EmbedActor,
                fn_constructor_kwargs=self.actor_kwargs(config, version, gpus > 0),
                batch_size=batch,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=actors),
                num_cpus=1,
                num_gpus=1 if gpus else 0,
                runtime_env={"env_vars": env} if env else None,
            )
        return list(dataset.take_all())

    def gpus(self, resources: dict[str, Any]) -> int:
        """How many GPUs the embedding actors ask for (one each): the cluster's with `cuda` or `auto`, none
        with `cpu`; `cuda` on a cluster without a GPU is an error, not a silent CPU build."""
        gpus = int(resources.get("GPU", 0))
        if self.device == "cuda" and not gpus:
            raise ModelUnavailable("--device cuda: the Ray cluster has no GPU")
        return 0 if self.device == "cpu" else gpus

    def actor_kwargs(self, config: BuildConfig, version: str | None, gpu: bool = False) -> dict[str, Any]:
        """What each embedding actor is made with (`version`: it writes that version's vector table; `gpu`:
        it embeds on its GPU)."""
        return {
            "model": config.embedding_model,
            "encoder": "torch" if gpu else config.encoder,
            "device": "cuda" if gpu else "cpu",
            "batch_size": self.batch_size,
            "store_url": self.store_url if version is not None else None,
            "version": version,
        }

    def _commit(self, records: list[dict[str, Any]], dim: int, version: str) -> WrittenVectors:
        """Commit the fragments the actors wrote as the version's vector table (one Lance commit)."""
        import lance
        from lance.fragment import FragmentMetadata

        from hybridrag.indexing.stores.remote import RemoteIndex, RemoteUnavailable, lancedb_storage_options
        from hybridrag.indexing.stores.vectors import vector_schema

        for record in records:
            if record["dim"] != dim:
                raise ValueError(f"the cluster's model gives {record['dim']} dimensions, the index {dim}")
        assert self.store_url is not None
        remote = RemoteIndex.open(self.store_url)
        fragments = [FragmentMetadata.from_json(json.dumps(f)) for r in records for f in r["fragments"]]
        for number, fragment in enumerate(fragments):
            fragment.id = number  # each actor numbered its own from 0
        try:
            lance.LanceDataset.commit(
                f"{remote.url}/versions/{version}/{DATASET}",
                lance.LanceOperation.Overwrite(vector_schema(dim), fragments),
                storage_options=lancedb_storage_options(),
            )
        except OSError as exc:  # the object store, not the data: the index is left as it was
            raise RemoteUnavailable(f"{remote.url}: committing the vector table of {version}: {exc}") from exc
        expected = {rel: digest for r in records for rel, digest in r["files"].items()}

        def fetch(dest: Path) -> dict[str, dict[str, Any]]:
            # A data file no committed fragment names (an actor retried by Ray wrote its batch again) stays
            # behind on the bucket, unread.
            data = f"{DATASET}/data/"
            return remote.fetch_tree(
                version,
                "vectors",
                dest,
                expected,
                keep=lambda rel: not rel.startswith(data) or rel in expected,
            )

        return WrittenVectors(rows=sum(int(r["rows"]) for r in records), fetch=fetch)
