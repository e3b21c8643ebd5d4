"""Writes through the documents API: how soon a write is searchable at several batch sizes, documents per
second, the background graph merge, and search latency while writes and merges run against search idle, in
one run of one service.

The service starts on an index (the bundled sample corpus, or a hard-linked copy of a synthetic corpus of
N chunks: `bench documents --chunks N`) and takes abstracts of a BEIR corpus (SciFact) through
`POST /v1/documents`, in batches of 1, 10 and 100 documents, one after another; each batch is timed from its
request to its task `succeeded` *and* a search finding its marked document (p50 / p95 over the batches).
Then the time until the graph has merged them all (`/readyz`), one client searching the corpus' queries
with the service idle, and again while batches of 10 stream in with pauses that let merges start.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from hybridrag.benchmarks.common import load_beir, machine, markdown_table, now, percentile
from hybridrag.benchmarks.loadgen import drive, running_service

WRITE_KEY = "bench-write-key"


def _read_corpus(corpus: Path) -> list[dict[str, Any]]:
    with corpus.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _abstracts(records: list[dict[str, Any]], count: int, skip: int = 0) -> list[dict[str, Any]]:
    """`count` abstracts from the `skip`-th on, starting over (with new ids) when the corpus runs out."""
    docs = []
    for at in range(skip, skip + count):
        record, round_ = records[at % len(records)], at // len(records)
        docs.append(
            {
                "id": f"bench-{record['_id']}" + (f"-{round_}" if round_ else ""),
                "title": record.get("title", ""),
                "text": record["text"],
            }
        )
    return docs


def _wait_all(
    http: httpx.Client, task_ids: Sequence[str], timeout: float = 3600, poll_s: float = 0.2
) -> list[dict[str, Any]]:
    deadline = time.time() + timeout
    done: dict[str, dict[str, Any]] = {}
    while len(done) < len(task_ids):
        for task_id in task_ids:
            if task_id not in done:
                task = http.get(f"/v1/tasks/{task_id}").json()
                if task["status"] in ("succeeded", "failed"):
                    done[task_id] = task
        if time.time() > deadline:
            raise RuntimeError("tasks did not finish in time")
        time.sleep(poll_s)
    return [done[t] for t in task_ids]


def _marked(docs: list[dict[str, Any]], batch: int) -> tuple[list[dict[str, Any]], str]:
    """The batch's documents, the first carrying a word found nowhere else (the search that must find it)."""
    marker = f"zq{batch:04d}{uuid.uuid4().hex[:8]}"
    first = {**docs[0], "text": f"{docs[0]['text']} Batch marker {marker}."}
    return [first, *docs[1:]], marker


def _visible(http: httpx.Client, docs: list[dict[str, Any]], marker: str, timeout: float = 600) -> float:
    """Seconds from the request to its task `succeeded` and a search finding the marked document."""
    t0 = time.perf_counter()
    answer = http.post("/v1/documents", json={"documents": docs})
    answer.raise_for_status()
    task = _wait_all(http, [answer.json()["taskId"]], timeout, poll_s=0.02)[0]
    if task["status"] != "succeeded":
        raise RuntimeError(f"write task failed: {task.get('error')}")
    body = {"text": marker, "options": {"limit": 5}, "filters": {"minRelevance": 0}}
    while time.perf_counter() - t0 < timeout:
        hits = http.post("/v1/search", json=body).json().get("results", [])
        if any(marker in h["content"]["text"] for h in hits):
            return time.perf_counter() - t0
        time.sleep(0.02)
    raise RuntimeError(f"the document with {marker} was not found within {timeout} s")


def _graph_caught_up(http: httpx.Client, timeout: float) -> float | None:
    """Seconds until /readyz says the graph holds every chunk (the background merge done); None: timed out."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        graph = http.get("/readyz").json().get("graph") or {}
        if not graph.get("chunksAhead") and not graph.get("chunksGone"):
            return time.perf_counter() - t0
        time.sleep(1.0)
    return None


def run_documents(
    dataset: Path,
    split: str,
    embedding_model: str,
    sizes: Sequence[int] = (1, 10, 100),
    batches: int = 20,
    searches: int = 100,
    search_seconds: float = 30.0,
    index: Path | None = None,
    merge_timeout_s: float = 1800.0,
) -> dict[str, Any]:
    """`index`: serve a hard-linked copy of this index (a synthetic corpus, `bench documents --chunks`);
    None: an index of the bundled sample corpus."""
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
    from hybridrag.indexing.stores import versions

    data = load_beir(dataset, split)
    records = _read_corpus(data.corpus)  # once: the bench's client shares the service's cores
    queries = [{"text": q[:1000], "options": {"limit": 10}} for q in list(data.queries.values())[:searches]]
    sample = Path(__file__).resolve().parents[1] / "service" / "cli" / "sample_corpus"
    work = Path(tempfile.mkdtemp(prefix="bench-documents-"))
    try:
        served = work / "index"
        if index is None:
            IndexBuilder(served, BuildConfig(embedding_model=embedding_model, encoder="auto")).build(sample)
        else:
            # Writes never change a file in place (new versions are hard-linked clones), so a linked copy
            # leaves the cached index as it was.
            shutil.copytree(index, served, copy_function=os.link, symlinks=True)
        chunks = int(versions.current_version(served).manifest["counts"]["chunks"])
        env = {"HYBRIDRAG_WRITE_API_KEY": WRITE_KEY, "HYBRIDRAG_RELOAD_INTERVAL_S": "0"}
        rows: list[dict[str, Any]] = []
        with running_service(served, embedding_model, env=env) as service:
            headers = {"Authorization": f"Bearer {WRITE_KEY}"}
            with httpx.Client(base_url=service.url, headers=headers, timeout=120) as http:
                offset, batch_no = 0, 0
                for size in sizes:
                    seconds: list[float] = []
                    for _ in range(batches):
                        docs, marker = _marked(_abstracts(records, size, offset), batch_no)
                        offset, batch_no = offset + size, batch_no + 1
                        seconds.append(_visible(http, docs, marker))
                    rows.append(
                        {
                            "documentsPerBatch": size,
                            "batches": len(seconds),
                            "visibleSeconds": {
                                "p50": round(percentile(seconds, 50), 2),
                                "p95": round(percentile(seconds, 95), 2),
                                "max": round(max(seconds), 2),
                            },
                            # Batches one after another: a batch's documents over its time to visible.
                            "documentsPerSecond": round(size * len(seconds) / sum(seconds), 2),
                        }
                    )
                merge_s = _graph_caught_up(http, merge_timeout_s)
                idle = drive(service.url, queries, clients=1, duration_s=search_seconds)
                # The same searches while batches of 10 stream in, a pause every few so merges start.
                stop = threading.Event()
                written: list[float] = []
                merging: list[bool] = []

                def writer() -> None:
                    nonlocal offset, batch_no
                    while not stop.is_set():
                        docs, marker = _marked(_abstracts(records, 10, offset), batch_no)
                        offset, batch_no = offset + 10, batch_no + 1
                        written.append(_visible(http, docs, marker))
                        if len(written) % 5 == 0:
                            stop.wait(3.0)  # past the writer's merge delay: a merge starts

                def watch() -> None:
                    while not stop.is_set():
                        merging.append(any(served.glob(".merge-*")))
                        stop.wait(0.5)

                threads = [threading.Thread(target=f, daemon=True) for f in (writer, watch)]
                for thread in threads:
                    thread.start()
                time.sleep(1.0)
                during = drive(service.url, queries, clients=1, duration_s=search_seconds)
                stop.set()
                for thread in threads:
                    thread.join(timeout=600)
        return {
            "benchmark": "documents",
            "dataset": data.name,
            "date": now(),
            "machine": machine(),
            "config": {
                "embeddingModel": embedding_model,
                "chunks": chunks,
                "index": "synthetic" if index is not None else "sample",
                "queries": len(queries),
                "searchSeconds": search_seconds,
            },
            "writes": rows,
            "visibleSeconds": {str(r["documentsPerBatch"]): r["visibleSeconds"] for r in rows},
            "mergeSeconds": None if merge_s is None else round(merge_s, 1),
            "searchIdle": _latency(idle),
            "searchDuringWrites": {
                **_latency(during),
                "writeBatches": len(written),
                "writeVisibleP50s": round(percentile(written, 50), 2) if written else None,
                "mergeRunningShare": round(sum(merging) / len(merging), 2) if merging else 0.0,
            },
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _latency(result: Any) -> dict[str, Any]:
    return {
        "searches": result.requests,
        "p50Ms": round(percentile(result.latencies_ms, 50), 1),
        "p95Ms": round(percentile(result.latencies_ms, 95), 1),
        "failed": result.failed,
    }


def to_markdown(report: dict[str, Any]) -> str:
    rows = [
        [
            r["documentsPerBatch"],
            r["batches"],
            r["visibleSeconds"]["p50"],
            r["visibleSeconds"]["p95"],
            r["visibleSeconds"]["max"],
            r["documentsPerSecond"],
        ]
        for r in report["writes"]
    ]
    table = markdown_table(
        ["documents a batch", "batches", "visible p50 s", "visible p95 s", "max s", "documents/s"], rows
    )
    idle, during, config = report["searchIdle"], report["searchDuringWrites"], report["config"]
    merge = report["mergeSeconds"]
    return (
        f"### Documents API — {config['chunks']:,} chunks ({config['index']}), {report['dataset']} abstracts "
        f"added, {config['embeddingModel']}, {report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        + table
        + "\nVisible: from the request to its task `succeeded` and a search finding the document. Graph "
        f"merge after the batches: {'not done in time' if merge is None else f'{merge} s'}. Search (1 client, "
        f"{config['searchSeconds']} s each, hybrid, limit 10): idle p50 {idle['p50Ms']} ms / p95 "
        f"{idle['p95Ms']} ms; while batches of 10 are written ({during['writeBatches']}, visible p50 "
        f"{during['writeVisibleP50s']} s) and merges run ({during['mergeRunningShare']:.0%} of the time) "
        f"p50 {during['p50Ms']} ms / p95 {during['p95Ms']} ms; failed searches {idle['failed']} / "
        f"{during['failed']}.\n"
    )
