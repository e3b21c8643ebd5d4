"""Writes through the documents API: documents per second at several request sizes, and search latency while
writes run against search alone, in one run of one service.

The service starts on an index of the bundled sample corpus (built with the benchmark's model) and takes
abstracts of a BEIR corpus (SciFact) through `POST /v1/documents`, in requests of 1, 10 and 100 documents;
a size's rate counts from its first request to the last of its tasks succeeded (embedding, keyword index,
graph and the atomic publish of each version included). Then one client searches the corpus' queries alone,
and again while a stream of writes runs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from hybridrag.benchmarks.common import load_beir, machine, markdown_table, now, percentile
from hybridrag.benchmarks.loadgen import drive, running_service

WRITE_KEY = "bench-write-key"


def _abstracts(corpus: Path, count: int, skip: int = 0) -> list[dict[str, Any]]:
    docs = []
    with corpus.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i < skip:
                continue
            record = json.loads(line)
            docs.append(
                {"id": f"bench-{record['_id']}", "title": record.get("title", ""), "text": record["text"]}
            )
            if len(docs) >= count:
                break
    return docs


def _wait_all(http: httpx.Client, task_ids: Sequence[str], timeout: float = 3600) -> list[dict[str, Any]]:
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
        time.sleep(0.2)
    return [done[t] for t in task_ids]


def run_documents(
    dataset: Path,
    split: str,
    embedding_model: str,
    sizes: Sequence[int] = (1, 10, 100),
    documents_per_size: Sequence[int] = (10, 50, 200),
    searches: int = 100,
    search_seconds: float = 30.0,
) -> dict[str, Any]:
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder

    data = load_beir(dataset, split)
    queries = [{"text": q[:1000], "options": {"limit": 10}} for q in list(data.queries.values())[:searches]]
    sample = Path(__file__).resolve().parents[1] / "service" / "cli" / "sample_corpus"
    work = Path(tempfile.mkdtemp(prefix="bench-documents-"))
    try:
        index = work / "index"
        IndexBuilder(index, BuildConfig(embedding_model=embedding_model, encoder="auto")).build(sample)
        env = {"HYBRIDRAG_WRITE_API_KEY": WRITE_KEY, "HYBRIDRAG_RELOAD_INTERVAL_S": "0"}
        rows = []
        with running_service(index, embedding_model, env=env) as service:
            headers = {"Authorization": f"Bearer {WRITE_KEY}"}
            with httpx.Client(base_url=service.url, headers=headers, timeout=120) as http:
                offset = 0
                for size, count in zip(sizes, documents_per_size, strict=True):
                    docs = _abstracts(data.corpus, count, offset)
                    offset += count
                    t0 = time.perf_counter()
                    ids = []
                    for start in range(0, len(docs), size):
                        answer = http.post("/v1/documents", json={"documents": docs[start : start + size]})
                        answer.raise_for_status()
                        ids.append(answer.json()["taskId"])
                    tasks = _wait_all(http, ids)
                    seconds = time.perf_counter() - t0
                    statuses = [d["status"] for t in tasks for d in t["documents"]]
                    rows.append(
                        {
                            "documentsPerRequest": size,
                            "documents": len(docs),
                            "requests": len(ids),
                            "versions": len({t["indexVersion"] for t in tasks}),
                            "seconds": round(seconds, 2),
                            "documentsPerSecond": round(len(docs) / seconds, 2),
                            "added": statuses.count("added"),
                            "failed": sum(t["status"] != "succeeded" for t in tasks),
                        }
                    )
                # One client searching for `search_seconds`: alone, then while writes stream in.
                alone = drive(service.url, queries, clients=1, duration_s=search_seconds)
                # The same searches while writes stream in: batches of 10 abstracts, one after another.
                stop = threading.Event()
                written: list[str] = []

                def writer() -> None:
                    nonlocal offset
                    while not stop.is_set():
                        docs = _abstracts(data.corpus, 10, offset)
                        offset += 10
                        if not docs:  # the corpus is used up
                            return
                        answer = http.post("/v1/documents", json={"documents": docs})
                        written.append(answer.json()["taskId"])
                        _wait_all(http, written[-1:])

                thread = threading.Thread(target=writer, daemon=True)
                thread.start()
                time.sleep(1.0)
                during = drive(service.url, queries, clients=1, duration_s=search_seconds)
                stop.set()
                thread.join(timeout=600)
        return {
            "benchmark": "documents",
            "dataset": data.name,
            "date": now(),
            "machine": machine(),
            "config": {
                "embeddingModel": embedding_model,
                "queries": len(queries),
                "searchSeconds": search_seconds,
            },
            "writes": rows,
            "search": {
                "alone": {
                    "searches": alone.requests,
                    "p50ms": round(percentile(alone.latencies_ms, 50), 1),
                    "p95ms": round(percentile(alone.latencies_ms, 95), 1),
                    "failed": alone.failed,
                },
                "duringWrites": {
                    "searches": during.requests,
                    "p50ms": round(percentile(during.latencies_ms, 50), 1),
                    "p95ms": round(percentile(during.latencies_ms, 95), 1),
                    "failed": during.failed,
                    "writeTasks": len(written),
                },
            },
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def to_markdown(report: dict[str, Any]) -> str:
    rows = [
        [
            r["documentsPerRequest"],
            r["documents"],
            r["requests"],
            r["versions"],
            r["seconds"],
            r["documentsPerSecond"],
            r["failed"],
        ]
        for r in report["writes"]
    ]
    search = report["search"]
    table = markdown_table(
        [
            "documents per request",
            "documents",
            "requests",
            "versions",
            "seconds",
            "documents/s",
            "failed tasks",
        ],
        rows,
    )
    return (
        f"### Documents API — {report['dataset']} abstracts, {report['config']['embeddingModel']}, "
        f"{report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        + table
        + f"\nSearch (1 client, {report['config']['searchSeconds']} s each, hybrid, limit 10): alone p50 "
        f"{search['alone']['p50ms']} ms / p95 {search['alone']['p95ms']} ms; while writes run (batches of 10, "
        f"{search['duringWrites']['writeTasks']} tasks) p50 {search['duringWrites']['p50ms']} ms / p95 "
        f"{search['duringWrites']['p95ms']} ms; failed searches {search['alone']['failed']} / "
        f"{search['duringWrites']['failed']}.\n"
    )
