"""Benchmark plumbing: metrics cross-checked by hand, and a tiny end-to-end quality and build run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks.quality import evaluate, run_quality, to_markdown


def test_metrics_match_a_hand_computed_case() -> None:
    qrels = {"q1": {"d1": 1, "d2": 1}, "q2": {"d9": 1}}
    run = {"q1": {"d1": 3.0, "d3": 2.0, "d2": 1.0}, "q2": {"d4": 2.0, "d9": 1.0}}
    got = evaluate(qrels, run)
    ndcg_q1 = (1 / math.log2(2) + 1 / math.log2(4)) / (1 / math.log2(2) + 1 / math.log2(3))
    ndcg_q2 = (1 / math.log2(3)) / 1.0
    assert got["ndcg@10"] == pytest.approx((ndcg_q1 + ndcg_q2) / 2, abs=1e-4)
    assert got["mrr@10"] == pytest.approx((1.0 + 0.5) / 2, abs=1e-4)
    assert got["recall@2"] == pytest.approx((0.5 + 1.0) / 2, abs=1e-4)
    assert got["recall@5"] == pytest.approx(1.0)
    # A query with no result at all counts as zero, not as missing.
    assert evaluate(qrels, {"q1": run["q1"]})["recall@5"] == pytest.approx(0.5)


def _tiny_beir(folder: Path) -> Path:
    docs = [
        ("d1", "Sony", "Masaru Ibuka and Akio Morita founded Sony in Tokyo in 1946."),
        ("d2", "Toyota", "Kiichiro Toyoda founded Toyota Motor in 1937 in Aichi."),
        ("d3", "Radium", "Marie Curie discovered radium and polonium in Paris."),
        ("d4", "Tower", "東京タワーは1958年に完成した電波塔である。"),
    ]
    queries = [
        ("q1", "who founded Sony"),
        ("q2", "discovery of radium"),
        ("q3", "東京タワーはいつ完成したか"),
    ]
    qrels = [("q1", "d1"), ("q2", "d3"), ("q3", "d4")]
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}, ensure_ascii=False) + "\n" for i, t, x in docs),
        "utf-8",
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in queries), "utf-8"
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels), "utf-8"
    )
    return folder


def test_quality_benchmark_end_to_end(tmp_path: Path) -> None:
    dataset = _tiny_beir(tmp_path / "tiny")
    report = run_quality(
        dataset,
        "test",
        ["keyword", "graph", "keyword+graph"],
        embedding_model="none",
        cache=tmp_path / "cache",
    )
    assert report["queries"] == 3 and report["build"]["documents"] == 4
    assert report["results"]["keyword"]["metrics"]["recall@5"] == pytest.approx(1.0)
    assert set(report["results"]) == {"keyword", "graph", "keyword+graph", "bm25s (reference)"}
    assert report["results"]["bm25s (reference)"]["metrics"]["mrr@10"] == pytest.approx(1.0)
    assert "| keyword |" in to_markdown(report)
    again = run_quality(
        dataset, "test", ["keyword"], embedding_model="none", cache=tmp_path / "cache", baseline=False
    )
    assert again["build"] is None  # the cached index was reused


def test_build_benchmark(tmp_path: Path) -> None:
    from benchmarks.build_cost import run_build

    dataset = _tiny_beir(tmp_path / "tiny")
    report = run_build(dataset / "corpus.jsonl", None)
    assert report["documents"] == 4 and report["stages"]["keyword"]["docsPerSecond"] > 0
    assert report["bytesOnDisk"] > 0
