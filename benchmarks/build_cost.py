"""Build cost: seconds and documents/s for each build stage, and the index size on disk."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import machine, markdown_table, now


def run_build(source: Path, embedding_model: str | None, chunk_size: int = 800) -> dict[str, Any]:
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder, tqdm_progress

    config = BuildConfig(embedding_model=embedding_model, chunk_size=chunk_size)
    with tempfile.TemporaryDirectory() as tmp:
        summary = IndexBuilder(Path(tmp) / "index", config, progress=tqdm_progress()).build(source)
    docs = summary.documents
    stages = {
        name: {"seconds": secs, "docsPerSecond": round(docs / secs, 1) if secs > 0 else None}
        for name, secs in summary.seconds.items()
    }
    total = sum(summary.seconds.values())
    return {
        "benchmark": "build",
        "source": str(source),
        "date": now(),
        "machine": machine(),
        "config": {"embeddingModel": embedding_model or "none", "chunkSize": chunk_size},
        "documents": docs,
        "chunks": summary.chunks,
        "skipped": len(summary.skipped),
        "stages": stages,
        "totalSeconds": round(total, 2),
        "docsPerSecond": round(docs / total, 1) if total > 0 else None,
        "bytesOnDisk": summary.bytes_on_disk,
    }


def to_markdown(report: dict[str, Any]) -> str:
    rows = [[name, s["seconds"], s["docsPerSecond"]] for name, s in report["stages"].items()]
    rows.append(["total", report["totalSeconds"], report["docsPerSecond"]])
    return (
        f"### Build of {Path(report['source']).parent.name or report['source']} — {report['documents']} documents, "
        f"{report['chunks']} chunks, {report['config']['embeddingModel']}, "
        f"{report['bytesOnDisk'] / 1e6:.1f} MB on disk, {report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        + markdown_table(["stage", "seconds", "documents/s"], rows)
    )
