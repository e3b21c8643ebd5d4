"""A synthetic corpus scaled to N chunks, built from a real embedded index, for latency and build cost at scale.

Each synthetic document is one chunk of a real base index (e.g. SciFact with e5), copied with a variant tag so
every copy has its own content hash. Copy `c` of base chunk `b` gets the base chunk's real embedding plus a
little seeded noise, so the vector store holds N realistically distributed vectors without re-running the
model N times (100k passages would take hours of CPU here). Queries are encoded by the real model at search
time, so search latency is measured in full; only the build's embed stage is not the model's real cost
(reported separately from the base index's manifest).
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import machine, markdown_table, now

NOISE = 0.01
TAG = "Variant {copy}."
SHARD_LINES = 100_000  # ~75 MB of SciFact-sized documents a file


class ReplayEmbedder:
    """Passages: the base chunk's stored vector plus noise (looked up by text). Queries: the real model."""

    def __init__(self, name: str, vectors: dict[str, np.ndarray], query_model: Any, seed: int = 7) -> None:
        self.name = name
        self.dim = int(next(iter(vectors.values())).shape[0])
        self._vectors = vectors
        self._query_model = query_model
        self._rng = np.random.default_rng(seed)
        self.misses = 0

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missed: list[int] = []
        for i, text in enumerate(texts):
            base = self._vectors.get(text)
            if base is None:  # not a base chunk's text (a community report, a cut not planned): the model's
                missed.append(i)
                continue
            v = base + self._rng.normal(0.0, NOISE, self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        if missed:  # in one call, as a build embeds them
            self.misses += len(missed)
            out[missed] = self._query_model.embed_passages([texts[i] for i in missed])
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._query_model.embed_queries(list(texts)), dtype=np.float32)


def write_corpus(base_index: Path, chunks: int, out: Path) -> dict[str, np.ndarray]:
    """Write `out/corpus/part-*.jsonl` with `chunks` one-chunk documents; returns embedding text -> vector."""
    from hybridrag.indexing.builds.build import embedding_text
    from hybridrag.indexing.stores.tables import CHUNKS, DOCUMENTS, read_version_table
    from hybridrag.indexing.stores.vectors import TABLE, _connect
    from hybridrag.indexing.stores.versions import current_version

    version = current_version(base_index).path
    titles = {r["doc_id"]: r["title"] or "" for r in read_version_table(version, DOCUMENTS).to_pylist()}
    rows = read_version_table(version, CHUNKS).select(["chunk_id", "doc_id", "text"]).to_pylist()
    table = _connect(version / "vectors").open_table(TABLE).to_arrow().select(["chunk_id", "vector"])
    stored = dict(
        zip(
            table.column("chunk_id").to_pylist(),
            np.asarray(table.column("vector").to_pylist(), dtype=np.float32),
            strict=True,
        )
    )
    rows = [r for r in rows if r["chunk_id"] in stored]
    folder = out / "corpus"
    folder.mkdir(parents=True, exist_ok=True)
    vectors: dict[str, np.ndarray] = {}
    # Shards of SHARD_LINES documents: a source file is read whole, and its size is bounded.
    for first in range(0, chunks, SHARD_LINES):
        with (folder / f"part-{first // SHARD_LINES:05d}.jsonl").open("w", encoding="utf-8") as fh:
            for i in range(first, min(chunks, first + SHARD_LINES)):
                base = rows[i % len(rows)]
                copy = i // len(rows)
                text = f"{' '.join(base['text'].split())} {TAG.format(copy=copy)}"
                title = titles.get(base["doc_id"], "")
                fh.write(
                    json.dumps({"_id": f"s{i}", "title": title, "text": text}, ensure_ascii=False) + "\n"
                )
                vectors[embedding_text(title, text)] = stored[base["chunk_id"]]
    return vectors


def build_synthetic(
    base_index: Path,
    chunks: int,
    out: Path,
    embedding_model: str = "e5-multilingual",
    name_typing: str = "typer",
) -> dict[str, Any]:
    """Generate and index the synthetic corpus into `out/index`; returns the build report.

    Names are typed by the typer alone by default (`BuildConfig.name_typing`): the corpus repeats the base's
    sentences, and the name tagger's pass over every cased sentence with a name would be most of a build
    whose vectors are replayed (hours at a million chunks on 2 cores), which is not what these corpora
    measure; #50's builds at scale are all measured this way."""
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder, tqdm_progress
    from hybridrag.indexing.models.embedders import load_embedder

    t0 = time.perf_counter()
    vectors = write_corpus(base_index, chunks, out)
    generate_s = time.perf_counter() - t0
    # What is not a base chunk (the community reports) is embedded as `index build` embeds it by default:
    # by the model's int8 export where one is installed (`--encoder auto`).
    model = load_embedder(embedding_model, encoder="auto")
    embedder = ReplayEmbedder(embedding_model, vectors, model)
    # A chunk size above the longest base chunk plus its tag keeps one chunk per synthetic document.
    config = BuildConfig(embedding_model=embedding_model, chunk_size=1200, name_typing=name_typing)
    t1 = time.perf_counter()
    summary = IndexBuilder(out / "index", config, embedder=embedder, progress=tqdm_progress()).build(
        out / "corpus"
    )
    wall_s = time.perf_counter() - t1
    docs = summary.documents
    return {
        "benchmark": "build-synthetic",
        "date": now(),
        "machine": machine(),
        "base": str(base_index),
        "config": {
            "embeddingModel": embedding_model,
            "chunkSize": config.chunk_size,
            "noise": NOISE,
            "nameTyping": name_typing,
            "missEncoder": getattr(model, "encoder", "torch"),
        },
        "documents": docs,
        "chunks": summary.chunks,
        "generateSeconds": round(generate_s, 2),
        "stages": {
            name: {"seconds": secs, "docsPerSecond": round(docs / secs, 1) if secs > 0 else None}
            for name, secs in summary.seconds.items()
        },
        # The stages' seconds added up; a large build writes the keyword index and the vector files beside
        # the graph (`builds.shards.Aside`), so its wall clock is less.
        "totalSeconds": round(sum(summary.seconds.values()), 2),
        "wallSeconds": round(wall_s, 2),
        "bytesOnDisk": summary.bytes_on_disk,
        "embedMisses": embedder.misses,
        # The process that built it (`bench scale` builds in a child) and its peak resident memory (the
        # shard children's apart).
        "process": {
            "pid": os.getpid(),
            "peakRssMB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        },
        "indexDir": str(out / "index"),
    }


def to_markdown(report: dict[str, Any]) -> str:
    rows = [[name, s["seconds"], s["docsPerSecond"]] for name, s in report["stages"].items()]
    total = report["totalSeconds"]
    rows.append(["stages added up", total, round(report["documents"] / total, 1) if total else None])
    wall = report.get("wallSeconds")
    if wall:
        rows.append(["wall clock", wall, round(report["documents"] / wall, 1)])
    return (
        f"### Build of a synthetic corpus — {report['documents']} documents, {report['chunks']} chunks, "
        f"{report['config']['embeddingModel']} (replayed passage vectors), "
        f"{report['bytesOnDisk'] / 1e6:.1f} MB on disk, {report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        + markdown_table(["stage", "seconds", "documents/s"], rows)
        + "\nThe embed stage replays stored vectors (see benchmarks/synthetic.py); the model's own passage "
        "throughput is in the SciFact build table. A large build writes the keyword index and the vector "
        "files beside the graph, so its wall clock is below the stages added up.\n"
    )
