"""Prometheus metrics, one registry per app (no process-global state): requests, latency per route and
per stage, candidates per strategy, rate-limited calls, and the index version being served."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from hybridrag.schemas.search import SearchResult

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0)
CANDIDATE_BUCKETS = (0, 1, 5, 10, 25, 50, 100, 250, 500, 1000)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "hybridrag_requests", "HTTP requests", ("method", "route", "status"), registry=self.registry
        )
        self.latency = Histogram(
            "hybridrag_request_seconds",
            "HTTP request latency",
            ("method", "route"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "hybridrag_requests_in_flight", "Requests being served", registry=self.registry
        )
        self.stage = Histogram(
            "hybridrag_stage_seconds",
            "Time per search stage (keyword, semantic, graph: retrieval; search: the whole engine call)",
            ("stage",),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.candidates = Histogram(
            "hybridrag_candidates",
            "Candidates returned per strategy per search",
            ("strategy",),
            buckets=CANDIDATE_BUCKETS,
            registry=self.registry,
        )
        self.stage_notes = Counter(
            "hybridrag_stage_notes",
            "Stages skipped, degraded or failed",
            ("stage", "status"),
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "hybridrag_rate_limited", "Requests refused by the rate limit", registry=self.registry
        )
        self.index_info = Gauge(
            "hybridrag_index_info",
            "The index version being served (value 1)",
            ("version",),
            registry=self.registry,
        )
        self.index_documents = Gauge(
            "hybridrag_index_documents", "Documents in the served index", registry=self.registry
        )
        self.index_chunks = Gauge(
            "hybridrag_index_chunks", "Chunks in the served index", registry=self.registry
        )

    def observe_search(self, result: SearchResult) -> None:
        self.stage.labels("search").observe(result.processing_time / 1000)
        for name in ("keyword", "semantic", "graph"):
            metric = getattr(result.strategies, name)
            if metric.enabled:
                self.stage.labels(name).observe(metric.processing_time / 1000)
                self.candidates.labels(name).observe(metric.result_count)
        for note in result.notes:
            self.stage_notes.labels(note.stage, note.status).inc()

    def set_index(self, version: str | None, documents: int, chunks: int) -> None:
        self.index_info.clear()
        if version is not None:
            self.index_info.labels(version).set(1)
        self.index_documents.set(documents)
        self.index_chunks.set(chunks)

    def render(self) -> bytes:
        return generate_latest(self.registry)
