"""Benchmark plumbing: metrics cross-checked by hand, and a tiny end-to-end quality and build run."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from hybridrag.benchmarks.quality import evaluate, run_quality, to_markdown


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
    assert "hybrid+rerank" in report["skipped"]  # no cross-encoder on this machine: said, not silent
    assert "Not run: hybrid+rerank" in to_markdown(report)


def test_quality_benchmark_with_a_reranker(tmp_path: Path, tiny_cross_encoder: Path) -> None:
    dataset = _tiny_beir(tmp_path / "tiny")
    run_quality(dataset, "test", ["keyword"], embedding_model="none", cache=tmp_path / "cache", rerank=False)
    again = run_quality(
        dataset,
        "test",
        ["keyword"],
        embedding_model="none",
        cache=tmp_path / "cache",
        baseline=False,
        rerank_model=str(tiny_cross_encoder),
    )
    assert again["build"] is None  # the cached index was reused
    assert set(again["results"]) == {"keyword", "hybrid+rerank"} and again["skipped"] == {}
    assert 0 <= again["results"]["hybrid+rerank"]["metrics"]["ndcg@10"] <= 1


@pytest.mark.slow
def test_quality_benchmark_compares_an_index_built_by_another_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hybridrag.benchmarks import report as report_module
    from hybridrag.benchmarks.common import write_results
    from hybridrag.indexing.models.embedders import MODEL_REGISTRY
    from hybridrag.indexing.models.onnx_encoder import export_onnx

    monkeypatch.setenv("HYBRIDRAG_MODELS_DIR", str(tmp_path / "models"))
    export_onnx(MODEL_REGISTRY["minilm"])
    dataset = _tiny_beir(tmp_path / "tiny")
    report = run_quality(
        dataset,
        "test",
        ["semantic", "hybrid"],
        embedding_model="minilm",
        cache=tmp_path / "cache",
        baseline=False,
        rerank=False,
        build_encoders=["onnx"],
    )
    assert set(report["results"]) == {"semantic", "hybrid", "semantic[built:onnx]", "hybrid[built:onnx]"}
    assert report["otherBuilds"]["onnx"]["documents"] == 4
    cache = tmp_path / "cache"
    assert sorted(p.name for p in cache.iterdir()) == ["tiny-minilm-800", "tiny-minilm-800-onnx"]
    built = json.loads((cache / "tiny-minilm-800-onnx" / "current" / "manifest.json").read_text())
    assert built["embedding"]["encoder"] == "onnx-fp32"
    # The MiniLM export is fp32: the same ranking as torch on this corpus.
    for system in ("semantic", "hybrid"):
        assert report["results"][f"{system}[built:onnx]"]["metrics"] == report["results"][system]["metrics"]
    monkeypatch.setattr(report_module, "RESULTS", tmp_path / "results")
    write_results(tmp_path / "results" / "build-encoder" / "quality-tiny-minilm.json", report, "")
    table = report_module.build_encoder_comparison()
    assert "| tiny (test, 3 queries) | semantic | onnx |" in table and table.count("| onnx |") == 2


def test_build_benchmark(tmp_path: Path) -> None:
    from hybridrag.benchmarks.build_cost import run_build

    dataset = _tiny_beir(tmp_path / "tiny")
    report = run_build(dataset / "corpus.jsonl", None)
    assert report["documents"] == 4 and report["stages"]["keyword"]["docsPerSecond"] > 0
    assert report["bytesOnDisk"] > 0


def test_deferred_benchmark_holds_back_documents_and_searches_three_states(tmp_path: Path) -> None:
    from hybridrag.benchmarks.deferred import SYSTEMS, run_deferred
    from hybridrag.benchmarks.deferred import to_markdown as deferred_markdown

    dataset = _tiny_beir(tmp_path / "tiny")
    report = run_deferred(dataset, "test", "minilm", share=0.5, batch=1)
    # Half of the three judged documents and of the one other, rounded: two held back, written one a batch.
    assert report["config"]["heldBackDocuments"] == 2
    states = ("before the merge, linked", "before the merge, not linked", "after the merge")
    assert set(report["results"]) == {f"{name} ({state})" for name in SYSTEMS for state in states}
    assert {"build", "writes", "merge"} <= set(report["seconds"])
    # Every document is searchable by keyword before the merge: keyword+semantic finds all three.
    for state in states:
        assert report["results"][f"keyword+semantic ({state})"]["metrics"]["recall@5"] == pytest.approx(1.0)
    assert deferred_markdown(report).count("| hybrid |") == 3


@pytest.mark.slow
def test_latency_and_load_runs_against_the_real_service(sample_index: Path, tmp_path: Path) -> None:
    import shutil

    from hybridrag.benchmarks.latency import plot, run_latency
    from hybridrag.benchmarks.latency import to_markdown as latency_markdown
    from hybridrag.benchmarks.soak import run_load, to_markdown

    index_dir = tmp_path / "index"
    shutil.copytree(sample_index, index_dir, symlinks=True)
    queries = ["Who founded Sony?", "新幹線の開業", "Marie Curie radioactivity"]
    report = run_latency(
        index_dir, queries, "minilm", levels=(1, 2), strategies=("keyword", "hybrid"), requests=6
    )
    rows = report["results"]
    assert [(r["strategy"], r["clients"]) for r in rows] == [
        ("keyword", 1),
        ("keyword", 2),
        ("hybrid", 1),
        ("hybrid", 2),
    ]
    assert all(
        r["requests"] == 6 and r["errors"] == 0 and 0 < r["p50ms"] <= r["p95ms"] <= r["p99ms"] for r in rows
    )
    assert report["memory"]["peakMB"] >= report["memory"]["idleMB"] > 50
    assert "| hybrid | 2 | 6 | 0 |" in latency_markdown(report)
    plot([report], tmp_path / "latency.png")
    assert (tmp_path / "latency.png").read_bytes()[:4] == b"\x89PNG"
    load = run_load(index_dir, queries, "minilm", clients=2, duration_s=3)
    assert load["errors"] == 0 and load["requests"] > 3 and load["rss"]["samples"]
    assert len(load["versions"]) == 1 and "| load | 2 |" in to_markdown([load])


@pytest.mark.slow
def test_latency_against_a_baseline_tree_alternates_two_services(sample_index: Path, tmp_path: Path) -> None:
    import os
    import shutil

    from hybridrag.benchmarks.latency import run_latency, to_markdown
    from hybridrag.benchmarks.loadgen import running_service

    index_dir = tmp_path / "index"
    shutil.copytree(sample_index, index_dir, symlinks=True)
    # A source tree of its own (here the same code, through a link): the service must run from it.
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "hybridrag").symlink_to(
        Path(__file__).resolve().parents[2] / "hybridrag", target_is_directory=True
    )
    with (
        pytest.raises(ValueError, match="not a hybridrag source tree"),
        running_service(index_dir, "minilm", source=tmp_path),
    ):
        pass
    with running_service(index_dir, "minilm", source=tree) as service:
        assert Path(f"/proc/{service.pid}/cwd").resolve() == tree.resolve()
        environ = Path(f"/proc/{service.pid}/environ").read_bytes().split(b"\0")
        assert f"PYTHONPATH={tree}".encode() in [e.split(os.pathsep.encode())[0] for e in environ]
    report = run_latency(
        index_dir,
        ["Who founded Sony?", "Marie Curie"],
        "minilm",
        levels=(1,),
        strategies=("keyword",),
        requests=8,
        baseline=tree,
    )
    (row,) = report["results"]
    assert row["requests"] == 8 and row["errors"] == 0
    assert row["baseline"]["requests"] == 8 and row["baseline"]["errors"] == 0
    assert row["p50Ratio"] == round(row["p50ms"] / row["baseline"]["p50ms"], 2) and row["qpsRatio"] > 0
    assert report["config"]["baseline"]["dir"] == str(tree) and report["config"]["rounds"] == 4
    table = to_markdown(report)
    assert "| baseline p50 ms | baseline p95 ms | baseline req/s | x p50 | x p95 | x req/s |" in table
    assert "alternating rounds" in table
    cells = next(line for line in table.splitlines() if line.startswith("| keyword |")).split("|")
    assert float(cells[-3]) == round(row["p95ms"] / row["baseline"]["p95ms"], 2)


def test_rss_slope() -> None:
    from hybridrag.benchmarks.soak import rss_slope_mb_per_min

    flat = [(float(t), 500 * 2**20) for t in range(0, 600, 10)]
    assert rss_slope_mb_per_min(flat) == pytest.approx(0.0)
    growing = [(float(t), int((500 + t / 60) * 2**20)) for t in range(0, 600, 10)]  # 1 MB per minute
    assert rss_slope_mb_per_min(growing) == pytest.approx(1.0, abs=1e-3)
    assert rss_slope_mb_per_min([]) is None


@pytest.mark.slow
def test_synthetic_corpus_replays_real_vectors(
    sample_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hybridrag.benchmarks import synthetic
    from hybridrag.indexing.stores.versions import current_version

    monkeypatch.setattr(synthetic, "SHARD_LINES", 100)  # 150 documents: two shards
    report = synthetic.build_synthetic(sample_index, 150, tmp_path / "syn", embedding_model="minilm")
    assert report["documents"] == report["chunks"] == 150
    manifest = current_version(tmp_path / "syn" / "index").manifest
    assert manifest["counts"]["chunks"] == 150
    # The typer alone types the names (no tagger pass over the repeated sentences), and the manifest says so.
    assert report["config"]["nameTyping"] == manifest["config"]["name_typing"] == "typer"
    assert report["wallSeconds"] > 0
    assert "| wall clock |" in synthetic.to_markdown(report)
    shards = sorted((tmp_path / "syn" / "corpus").glob("*.jsonl"))
    assert [p.name for p in shards] == ["part-00000.jsonl", "part-00001.jsonl"]
    lines = [line for p in shards for line in p.read_text("utf-8").splitlines()]
    assert len(lines) == 150 and len({json.loads(line)["text"] for line in lines}) == 150
    # Only the community reports (not chunks) needed the model: every chunk vector was replayed.
    graph = current_version(tmp_path / "syn" / "index").manifest["graph"]
    assert report["embedMisses"] == graph["communities"]


@pytest.mark.slow
def test_swap_under_load_benchmark_sees_both_versions(sample_index: Path, tmp_path: Path) -> None:
    import shutil

    from hybridrag.benchmarks.soak import run_load

    index_dir = tmp_path / "index"
    shutil.copytree(sample_index, index_dir, symlinks=True)
    corpus = tmp_path / "corpus"
    shutil.copytree(Path(__file__).resolve().parents[2] / "service" / "cli" / "sample_corpus", corpus)
    (corpus / "late.md").write_text("# Late\n\nA document that arrives with the new version.\n", "utf-8")
    report = run_load(index_dir, ["Sony", "新幹線"], "minilm", clients=2, duration_s=2, swap_source=corpus)
    assert report["swap"]["exitCode"] == 0, report["swap"]
    assert report["errors"] == 0 and len(report["versions"]) == 2, report["versions"]
    assert report["config"]["durationS"] >= report["swap"]["finishedAtS"]


def test_cached_index_survives_a_new_build_option_and_regraphs_an_old_graph(tmp_path: Path) -> None:
    """A stamp written before a build option existed still matches (the option reads as its default), and an
    index whose graph predates the current format gets only its graph rebuilt, not a whole new build."""
    from hybridrag.benchmarks.common import cached_index, load_beir
    from hybridrag.indexing.builds.build import BuildConfig
    from hybridrag.indexing.stores import versions

    dataset = load_beir(_tiny_beir(tmp_path / "tiny"), "test")
    config = BuildConfig(embedding_model=None)
    index_dir, built = cached_index(dataset, config, tmp_path / "cache")
    assert built is not None
    stamp_file = index_dir / "bench-stamp.json"
    stamp = json.loads(stamp_file.read_text("utf-8"))
    del stamp["config"]["graph_synonyms"]  # as written by a release without the options
    del stamp["config"]["encoder"]
    stamp_file.write_text(json.dumps(stamp), "utf-8")
    # ... and a graph of the older format.
    version = versions.current_version(index_dir)
    manifest = json.loads((version.path / "manifest.json").read_text("utf-8"))
    del manifest["graph"]["format"]
    (version.path / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    again, rebuilt = cached_index(dataset, config, tmp_path / "cache")
    assert again == index_dir and rebuilt is None
    newer = versions.current_version(index_dir)
    assert newer.version != version.version and newer.manifest["graph"]["format"] >= 2
    assert set(newer.manifest["stageSeconds"]) >= {"graph"} and "read" not in newer.manifest["stageSeconds"]
    # A different setting is still a different index.
    _, other = cached_index(dataset, BuildConfig(embedding_model=None, chunk_size=300), tmp_path / "cache")
    assert other is not None


def test_a_cached_synthetic_index_with_older_graph_arrays_is_regraphed(tmp_path: Path) -> None:
    """`bench latency/scale/swap` reuse a cached synthetic index; graph arrays of an older format would be
    derived in memory at every load (and measured so), so they are rewritten first, and only then."""
    from hybridrag.benchmarks.common import cached_index, load_beir, regraph_if_older
    from hybridrag.indexing.builds.build import BuildConfig
    from hybridrag.indexing.stores import versions
    from hybridrag.indexing.stores.graph_arrays import FOLDER, GraphArrays

    dataset = load_beir(_tiny_beir(tmp_path / "tiny"), "test")
    index_dir, _ = cached_index(dataset, BuildConfig(embedding_model=None), tmp_path / "cache")
    version = versions.current_version(index_dir)
    assert not regraph_if_older(index_dir)  # current arrays: nothing to do
    assert versions.current_version(index_dir).version == version.version
    meta = version.path / "graph" / FOLDER / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text("utf-8")), "format": 2}), "utf-8")
    assert not GraphArrays.present(meta.parent)
    assert regraph_if_older(index_dir)
    newer = versions.current_version(index_dir)
    assert newer.version != version.version and GraphArrays.present(newer.path / "graph" / FOLDER)


def test_a_cached_synthetic_index_reports_its_own_build_only(tmp_path: Path) -> None:
    """`bench scale` shows a cached synthetic index's build seconds from the report kept beside it, never
    from a results file of another build of that size (a cache built before it kept one: none)."""
    from hybridrag.cli.bench import BUILD_REPORT, synthetic_build

    index_dir = tmp_path / "synthetic-x-minilm-1000" / "index"
    index_dir.mkdir(parents=True)
    (tmp_path / "build-synthetic-1000.json").write_text(json.dumps({"wallSeconds": 2963.9}), "utf-8")
    assert synthetic_build(index_dir) is None
    (index_dir.parent / BUILD_REPORT).write_text(json.dumps({"wallSeconds": 10.5}), "utf-8")
    assert synthetic_build(index_dir) == {"wallSeconds": 10.5}


def test_a_synthetic_index_is_built_in_a_child_process(
    sample_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench scale` measures each size after building it; built in its own process, the build's heap
    (~12 GB after 3M chunks) is gone before the measurement. Its report (and the cache's copy) says which
    process built it; a second call reuses the cache."""
    import hybridrag.benchmarks.common as common
    from hybridrag.cli.bench import BUILD_REPORT, synthetic_build, synthetic_index

    monkeypatch.setattr(common, "CACHE", tmp_path / "cache")
    target = tmp_path / "results" / "scale.json"
    index_dir = synthetic_index("sample", sample_index, 120, "minilm", target)
    report = synthetic_build(index_dir)
    assert report is not None and report["chunks"] == 120
    assert report["process"]["pid"] != os.getpid() and report["process"]["peakRssMB"] > 0
    assert json.loads(target.with_name("build-synthetic-120.json").read_text("utf-8"))["chunks"] == 120
    assert (index_dir.parent / BUILD_REPORT).is_file()
    assert synthetic_index("sample", sample_index, 120, "minilm", target) == index_dir


def test_graph_cost_benchmark(sample_index: Path) -> None:
    from hybridrag.benchmarks.graph_cost import run_graph_cost, to_markdown

    report = run_graph_cost([("sample", sample_index)], ["Who founded Sony?", "ソニーの創業者は？"], "minilm")
    (row,) = report["reports"]
    assert row["chunks"] > 0 and row["entities"] > 0 and row["edges"] > 0 and row["matrixBytes"] > 0
    assert row["queries"] == 2 and row["stageP50ms"] > 0 and row["neighbourhoodP50"] > 0
    assert "| sample |" in to_markdown(report)


def test_profile_benchmark_splits_a_search_into_stages(sample_index: Path) -> None:
    from hybridrag.benchmarks.profile import STAGES, run_profile, to_markdown

    report = run_profile([("sample", sample_index)], ["Who founded Sony?", "トヨタの創業者"], "minilm")
    (row,) = report["reports"]
    assert set(row["p50ms"]) == set(STAGES) and row["queries"] == 2
    assert row["p50ms"]["embed"] > 0 and row["p50ms"]["keyword"] > 0 and row["p50ms"]["graph"] > 0
    parts = sum(row["p50ms"][s] for s in ("classify", "embed", "semantic", "graph", "fusion+cut", "response"))
    assert row["p50ms"]["total"] <= parts * 1.5 + 5  # the stages account for the whole
    assert "| sample (" in to_markdown(report)


def test_bench_entities_scores_conll_and_jsonl(tmp_path: Path) -> None:
    """F1 from the gold spans of both formats, per casing: the rules find the capitalised names of the
    English sentence (and type 'Marie Curie' a person) and nothing once it is lower-cased."""
    from typer.testing import CliRunner

    from hybridrag.benchmarks.entities import read_conll, read_jsonl
    from hybridrag.cli.bench import app

    conll = tmp_path / "en.conll"
    rows = [
        ("Yesterday", "O"),
        ("Marie", "B-PER"),
        ("Curie", "I-PER"),
        ("visited", "O"),
        ("Warsaw", "B-LOC"),
        (".", "O"),
    ]
    conll.write_text("\n".join(f"{i}\t{t}\t{tag}" for i, (t, tag) in enumerate(rows)) + "\n\n", "utf-8")
    sentence = read_conll(conll)[0]
    assert sentence.text == "Yesterday Marie Curie visited Warsaw ."
    assert sentence.spans == ((10, 21, "person"), (30, 36, "place"))
    jsonl = tmp_path / "ja.jsonl"
    record = {
        "text": "湯川秀樹は京都大学の教授だった。",
        "entities": [
            {"name": "湯川秀樹", "span": [0, 4], "type": "人名"},
            {"name": "京都大学", "span": [5, 9], "type": "その他の組織名"},
        ],
    }
    jsonl.write_text(json.dumps(record, ensure_ascii=False) + "\n", "utf-8")
    assert read_jsonl(jsonl)[0].spans == ((0, 4, "person"), (5, 9, "organization"))
    out = tmp_path / "entities.json"
    result = CliRunner().invoke(app, ["bench", "entities", "--dataset", str(conll), "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text("utf-8"))["results"]
    assert report["original"]["untyped"]["recall"] == 1.0
    assert report["original"]["perType"]["person"]["f1"] == 1.0
    # Without capitals the name tagger still finds the person and the city.
    assert report["lower"]["untyped"]["f1"] >= 0.5 and report["lower"]["sentences"] == 1
    assert "| upper |" in out.with_suffix(".md").read_text("utf-8")
    result = CliRunner().invoke(
        app, ["bench", "entities", "--dataset", str(jsonl), "--casings", "original", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text("utf-8"))["results"]["original"]["perType"]["person"]["f1"] == 1.0


def test_recased_copies_of_a_dataset(tmp_path: Path) -> None:
    """`bench quality --casing`: the corpus and queries lower- or upper-cased, the judgements unchanged; the
    keyword retriever (case-folded) finds the same documents there, the capitalisation rules no entity."""
    from hybridrag.benchmarks.common import load_beir, recased

    dataset = _tiny_beir(tmp_path / "tiny")
    lower = recased(dataset, "lower", tmp_path / "cache")
    upper = recased(dataset, "upper", tmp_path / "cache")
    assert recased(dataset, "lower", tmp_path / "cache") == lower  # made once
    original, low = load_beir(dataset, "test"), load_beir(lower, "test")
    assert low.qrels == original.qrels and low.name == "tiny-lower"
    assert all(q == original.queries[i].lower() for i, q in low.queries.items())
    rows = [json.loads(line) for line in (dataset / "corpus.jsonl").read_text("utf-8").splitlines() if line]
    shouted = [json.loads(line) for line in (upper / "corpus.jsonl").read_text("utf-8").splitlines() if line]
    assert [(r["_id"], r["text"].upper()) for r in rows] == [(r["_id"], r["text"]) for r in shouted]
    report = run_quality(
        lower, "test", ["keyword", "graph"], embedding_model="none", cache=tmp_path / "cache"
    )
    assert report["dataset"] == "tiny-lower"
    assert report["results"]["keyword"]["metrics"]["recall@5"] == pytest.approx(1.0)


@pytest.mark.slow
def test_documents_benchmark_writes_through_the_api(tmp_path: Path) -> None:
    """Batches timed until found, the merge awaited, search idle and during writes; the index it was
    given (served through a hard-linked copy) is left as it was."""
    import hashlib

    from hybridrag.benchmarks.documents import run_documents, to_markdown
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder

    dataset = _tiny_beir(tmp_path / "tiny")
    index = tmp_path / "index"
    IndexBuilder(index, BuildConfig(embedding_model="minilm")).build(dataset / "corpus.jsonl")

    def digests() -> dict[str, str]:
        files = sorted(p for p in index.rglob("*") if p.is_file())
        return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}

    before = digests()
    report = run_documents(
        dataset, "test", "minilm", sizes=(1, 2), batches=2, searches=3, search_seconds=2.0, index=index
    )
    assert digests() == before
    assert [(w["documentsPerBatch"], w["batches"]) for w in report["writes"]] == [(1, 2), (2, 2)]
    for w in report["writes"]:
        assert 0 < w["visibleSeconds"]["p50"] <= w["visibleSeconds"]["p95"] and w["documentsPerSecond"] > 0
    assert set(report["visibleSeconds"]) == {"1", "2"}
    assert report["mergeSeconds"] is not None
    assert report["searchIdle"]["searches"] > 0 and report["searchIdle"]["failed"] == 0
    assert report["searchDuringWrites"]["writeBatches"] > 0 and report["searchDuringWrites"]["failed"] == 0
    assert "| 2 | 2 |" in to_markdown(report)


def test_rss_split_counts_anonymous_and_file_backed_memory() -> None:
    import os

    from hybridrag.benchmarks.loadgen import rss_split

    split = rss_split(os.getpid())
    assert split["anon"] > 10 * 2**20 and split["file"] > 0


def test_scale_extrapolation_follows_the_measured_growth_of_each_strategy() -> None:
    from hybridrag.benchmarks.scale import STRATEGIES, extrapolate

    def point(chunks: int, p50: dict[str, float]) -> dict[str, Any]:
        return {
            "chunks": chunks,
            "latency": {s: {"p50ms": p50[s]} for s in STRATEGIES},
            "disk": {"bytesPerChunk": 3000.0},
            "memoryMB": {"afterSearches": {"anon": 1024.0}},
            "anonBytesPerChunk": 200,
        }

    empty = point(1_000, {"hybrid": 8.0, "keyword": 5.0, "semantic": 6.0, "graph": 9.0})
    small = point(100_000, {"hybrid": 10.0, "keyword": 5.0, "semantic": 8.0, "graph": 12.0})
    # What hybrid adds to the near-empty index's 8 ms doubles for 10x the chunks (exponent log10(2)),
    # keyword's stays nothing, semantic's grows linearly, graph's not at all.
    large = point(1_000_000, {"hybrid": 12.0, "keyword": 5.0, "semantic": 26.0, "graph": 12.0})
    assert extrapolate([large], [10_000_000]) is None
    assert extrapolate([empty, small, large], []) is None
    out = extrapolate([empty, small, large], [10_000_000])
    assert out is not None and out["from"] == [1_000, 100_000, 1_000_000]
    assert out["growth"]["hybrid"] == {"measuredRatio": 1.2, "fixedMs": 8.0, "exponent": 0.301}
    assert out["growth"]["keyword"]["exponent"] == 0.0
    at = out["points"][0]
    assert at["p50ms"]["hybrid"] == pytest.approx(16.0, abs=0.1)
    assert at["p50ms"]["keyword"] == 5.0 and at["p50ms"]["semantic"] == 206.0 and at["p50ms"]["graph"] == 12.0
    assert at["diskGB"] == 30.0
    assert at["anonGB"] == pytest.approx((1024 * 2**20 + 200 * 9_000_000) / 2**30, abs=0.01)
    # Two sizes only: the fixed part is taken as nothing, a power law through both.
    two = extrapolate([small, large], [10_000_000])
    assert two is not None and two["from"] == [100_000, 1_000_000]
    assert two["growth"]["hybrid"]["exponent"] == 0.079 and two["points"][0]["p50ms"]["hybrid"] == 14.4


@pytest.mark.slow
def test_scale_benchmark_measures_every_size(sample_index: Path, tmp_path: Path) -> None:
    from hybridrag.benchmarks import synthetic
    from hybridrag.benchmarks.scale import plot, run_scale, to_markdown

    def index_for(n: int) -> tuple[Path, dict[str, Any] | None]:
        built = synthetic.build_synthetic(sample_index, n, tmp_path / f"syn-{n}", embedding_model="minilm")
        return tmp_path / f"syn-{n}" / "index", built

    queries = ["Who founded Sony?", "When was the analytical engine designed?", "ソニーの創業者"]
    report = run_scale([120, 40], index_for, queries, "minilm", searches=8)
    points = report["points"]
    assert [p["chunks"] for p in points] == [40, 120]  # ascending, whatever the order asked
    for p in points:
        assert p["errors"] == 0 and p["searches"] == 8 and p["vectorSearch"] == "sq8-rescored"
        assert p["recallAt10"] == 1.0 and p["loadSeconds"] > 0 and p["buildSeconds"] > 0
        assert set(p["latency"]) == {"hybrid", "keyword", "semantic", "graph"}
        assert p["memoryMB"]["afterSearches"]["anon"] > 100 and p["memoryMB"]["afterSearches"]["file"] > 0
    assert points[0]["anonBytesPerChunk"] is None and isinstance(points[1]["anonBytesPerChunk"], int)
    for p in points:
        # 1% of 40 or 120 chunks is one chunk: the exact and the served search both find it.
        assert p["filtered"]["chunks"] == 1 and p["filtered"]["recallAt10"] == 1.0
        disk = p["disk"]
        assert sum(disk["parts"].values()) == pytest.approx(
            disk["bytesPerChunk"], abs=len(disk["parts"]) * 0.1
        )
        assert 0 < disk["textBytesPerChunk"] < disk["bytesPerChunk"]
        assert disk["beyondTextBytesPerChunk"] == pytest.approx(
            disk["bytesPerChunk"] - disk["textBytesPerChunk"], abs=0.2
        )
        assert "chunks.arrow" in disk["parts"] and any(name.startswith("vectors/") for name in disk["parts"])
    assert [e["chunks"] for e in report["extrapolated"]["points"]] == [10_000_000]
    # The floor under every semantic and graph search: one query's encoding, with the service's encoder.
    encoding = report["queryEncoding"]
    assert encoding["queries"] == len(queries) and 0 < encoding["p50ms"] <= encoding["p95ms"]
    markdown = to_markdown(report)
    assert markdown.count("\n| 40 |") == 1 and "| 120 |" in markdown
    assert f"p50 / p95 {encoding['p50ms']} / {encoding['p95ms']} ms" in markdown
    assert "Disk by part" in markdown and "| 10,000,000 |" in markdown
    plot(report, tmp_path / "scale.png")
    assert (tmp_path / "scale.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize("second_version", ["copy", "documents"])
def test_hot_swap_benchmark_serves_both_versions_without_a_failure(
    sample_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second_version: str
) -> None:
    from hybridrag.benchmarks import swap
    from hybridrag.indexing.stores.versions import current_version

    monkeypatch.setattr(swap, "WRITE_AT_S", 1.0)
    monkeypatch.setattr(swap, "SETTLE_S", 2.0)
    before = current_version(sample_index).version
    report = swap.run_swap(sample_index, ["Who founded Sony?", "ソニーの創業者"], "minilm", 2, second_version)
    assert report["write"]["status"] == "succeeded", report["write"]
    assert report["failed"] == 0 and report["requests"] > 0
    assert set(report["versions"]) == {before, report["secondVersion"]}, report["versions"]
    assert report["writeToServedS"] is not None and report["latency"]["after"]["requests"] > 0
    assert (
        current_version(sample_index).version == before
    )  # served from a linked copy: the index is untouched
    markdown = swap.to_markdown(report)
    assert "| 0 |" in markdown and report["secondVersion"] in markdown


def test_vector_scale_benchmark_compares_flat_codes_with_the_inverted_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from hybridrag.benchmarks import vector_scale
    from hybridrag.indexing.stores import quantized

    monkeypatch.setattr(quantized, "IVF_LISTS_PER_SQRT", 1)
    monkeypatch.setattr(quantized, "IVF_PROBES", 8)
    rng = np.random.default_rng(0)
    base = rng.normal(size=(300, 32)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    queries = base[:20] + 0.3 * rng.normal(size=(20, 32)).astype(np.float32)
    report = vector_scale.run_vector_scale(base, [1500, 4000], queries, 2000, tmp_path)
    small, large = report["points"]
    assert (small["rows"], large["rows"]) == (1500, 4000) and "ivf" not in small
    assert small["flat"]["kind"] == "sq8-rescored" and large["ivf"]["kind"] == "ivf-pq4-rescored"
    assert large["ivf"]["lists"] == round(4000**0.5) and large["flat"]["lists"] is None
    for m in (small["flat"], large["flat"], large["ivf"]):
        for label in ("none", "filter0.01", "filter0.1"):
            assert 0.0 <= m[label]["recallAt10"] <= 1.0 and m[label]["p50ms"] > 0
    # 8-bit codes: a byte a dimension; product-quantized ones 4 bits for two dimensions, and the row's id.
    assert small["flat"]["codeBytesPerRow"] >= 32 and 8 + 8 <= large["ivf"]["codeBytesPerRow"] < 32
    # Flat codes rescored exactly find the exact top ten; the filters' pages too.
    assert large["flat"]["none"]["recallAt10"] == 1.0 and large["flat"]["filter0.1"]["recallAt10"] == 1.0
    assert large["ivf"]["filter0.01"]["recallAt10"] == 1.0  # ~40 rows pass: answered exactly over them
    assert list(tmp_path.iterdir()) == []  # the serving files are removed
    assert "| 4,000 | ivf-pq4-rescored |" in vector_scale.to_markdown(report)
    # The exact reference: a filtered top ten holds only rows the filter passes, best first.
    mask = rng.random(4000) < 0.1
    matrix = vector_scale.synthetic_table(base, 4000).column("vector").combine_chunks()
    flat = matrix.values.to_numpy().reshape(4000, 32)
    top = vector_scale.exact_top(flat, queries[:3], mask)
    for q, rows in zip(queries[:3], top, strict=True):
        assert mask[rows].all()
        sims = flat[rows] @ q
        assert list(sims) == sorted(sims, reverse=True)
        assert sims[-1] >= np.max(np.where(mask, flat @ q, -np.inf)[~np.isin(np.arange(4000), rows)])


def test_keyword_scale_benchmark_times_a_search_a_count_and_a_bounded_count(tmp_path: Path) -> None:
    """Copies of a small corpus at two sizes, read by the service's `KeywordIndex`: the bounded count agrees
    with the count (checked inside), a query whose term every copy holds needs no pass, and the indexes
    are removed."""
    from conftest import jsonl_corpus

    from hybridrag.benchmarks import keyword_scale

    rows = [{"_id": f"d{i}", "title": f"Title {i}", "text": f"granite {i} basalt river"} for i in range(40)]
    corpus = jsonl_corpus(tmp_path / "c", rows) / "d.jsonl"
    work = tmp_path / "work"
    work.mkdir()
    report = keyword_scale.run_keyword_scale(
        corpus, ["granite", "basalt 7", "nothing here"], [200, 800], work
    )
    small, large = report["points"]
    assert (small["chunks"], large["chunks"], report["basePassages"]) == (200, 800, 40)
    assert large["matchesP50"] == 800  # "basalt 7": every copy holds "basalt"
    # 800 chunks hold "granite" and "basalt" (>= 500: no pass); 200 do not reach the bound, nor does a
    # query of words in no chunk (no query at all, so no pass either).
    assert large["bounded"]["withoutPass"] == 1.0 and small["bounded"]["withoutPass"] == pytest.approx(
        1 / 3, abs=1e-3
    )
    for point in (small, large):
        for part in ("search", "count", "bounded", "oneTerm"):
            assert point[part]["p50ms"] > 0, part
    assert list(work.iterdir()) == []
    assert "| 800 |" in keyword_scale.to_markdown(report)


def test_keyword_scale_benchmark_times_lances_inverted_index_beside_tantivy(tmp_path: Path) -> None:
    """With the lance engine each size is also written as a Lance table with its inverted index, timed,
    and compared with tantivy's top 100 in base passages; both indexes are removed."""
    from conftest import jsonl_corpus

    from hybridrag.benchmarks import keyword_scale
    from hybridrag.benchmarks.common import BeirDataset

    rows = [{"_id": f"d{i}", "title": f"Title {i}", "text": f"granite {i} basalt river"} for i in range(40)]
    corpus = jsonl_corpus(tmp_path / "c", rows) / "d.jsonl"
    work = tmp_path / "work"
    work.mkdir()
    queries = ["basalt 7", "granite 12 river", "nothing here"]
    data = BeirDataset(
        "c", corpus, {"q1": "basalt 7", "q2": "granite 12 river"}, {"q1": {"d7": 1}, "q2": {"d12": 1}}, "test"
    )
    report = keyword_scale.run_keyword_scale(corpus, queries, [200], work, ("tantivy", "lance"), judged=data)
    lance = report["points"][0]["lance"]
    # One passage holds "7" ("12"): both engines rank its copies first, and every passage holds "basalt"
    # ("granite", "river"), so the top 100 of both are copies of all 40; "nothing here" matches nothing.
    assert lance["agreement"] == {"basesAt100": 1.0, "firstBase": 1.0}
    assert lance["buildSeconds"] >= 0 and lance["bytesPerChunk"] > 0
    assert lance["search"]["p50ms"] > 0 and lance["oneTerm"]["p50ms"] > 0
    assert list(work.iterdir()) == []
    assert "tantivy beside Lance" in keyword_scale.to_markdown(report)
    # Each engine's BM25 over the passages themselves, judged: the passage holding "7" answers "basalt 7".
    quality = report["quality"]
    assert quality["tantivy"]["ndcg@10"] == quality["lance"]["ndcg@10"] == 1.0
    assert report["split"] == "test"  # the judgements' split, named in the table
    assert "(test queries)" in keyword_scale.to_markdown(
        report
    ) and "| lance | 1.000 |" in keyword_scale.to_markdown(report)
    # Without lance there is no second engine to judge.
    alone = keyword_scale.run_keyword_scale(corpus, queries, [200], work, ("tantivy",), judged=data)
    assert "quality" not in alone and "lance" not in alone["points"][0]
    with pytest.raises(ValueError, match="engines"):
        keyword_scale.run_keyword_scale(corpus, queries, [200], work, ("lance",))


def test_keyword_scale_command_refuses_an_unknown_engine_before_reading_the_dataset(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from hybridrag.cli.bench import app

    for engines in ("tantivy,elastic", "lance", ","):
        result = CliRunner().invoke(
            app, ["bench", "keyword-scale", "--dataset", str(tmp_path / "none"), "--engines", engines]
        )
        assert result.exit_code == 2, result.output
        assert "--engines" in result.output and "engines are tantivy" in result.output


def test_report_refreshes_only_the_marked_blocks_and_skips_files_that_are_not_quality_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hybridrag.benchmarks import report

    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(report, "RESULTS", results)
    metrics = {"ndcg@10": 0.5, "recall@5": 0.25, "recall@100": 0.75}
    run = {
        "benchmark": "quality",
        "dataset": "tiny",
        "split": "dev",
        "queries": 3,
        "config": {"embeddingModel": "e5-multilingual"},
        "results": {"keyword": {"metrics": metrics, "p50ms": 1.5}},
    }
    (results / "quality-tiny-e5-multilingual.json").write_text(json.dumps(run), "utf-8")
    # A before/after comparison written by hand under the same prefix: not a run, no `results`.
    comparison = {"benchmark": "quality-before-after", "sets": []}
    (results / "quality-name-typing-e5-multilingual.json").write_text(json.dumps(comparison), "utf-8")
    (results / "build-tiny.md").write_text(
        "### Build of tiny\n\n| stage | seconds |\n|---|---|\n| read | 1 |\n"
    )
    prose_head = "# Benchmark results\n\nWritten by hand: kept as it is.\n\n## Summary\n\n"
    prose_tail = "\n\n## Notes\n\nA measured paragraph (2026-12-07), kept as it is.\n"
    readme, tables_page = tmp_path / "README.md", tmp_path / "tables.md"
    readme.write_text(
        prose_head + "<!-- summary:begin -->\nstale\n<!-- summary:end -->" + prose_tail, "utf-8"
    )
    tables_head = "# Result tables\n\nGenerated below.\n\n"
    tables_page.write_text(tables_head + "<!-- tables:begin -->\nstale\n<!-- tables:end -->\n", "utf-8")

    report.update_benchmarks_pages(readme, tables_page)
    text, tables = readme.read_text("utf-8"), tables_page.read_text("utf-8")
    assert text.startswith(prose_head + "<!-- summary:begin -->") and text.endswith(prose_tail)
    assert "stale" not in text and "stale" not in tables
    summary = text[text.index("<!-- summary:begin -->") : text.index("<!-- summary:end -->")]
    assert "| tiny (dev) | e5-multilingual | keyword | 0.500 | 0.250 | 0.750 | 1.500 |" in summary
    assert "quality-before-after" not in text and "name-typing" not in text
    assert tables.startswith(tables_head + "<!-- tables:begin -->") and tables.endswith(
        "<!-- tables:end -->\n"
    )
    assert "### Build of tiny" in tables and "| read | 1 |" in tables
    report.update_benchmarks_pages(readme, tables_page)
    assert (readme.read_text("utf-8"), tables_page.read_text("utf-8")) == (
        text,
        tables,
    )  # same results, same files

    # A page without its block is refused by name, not left with stale figures and no word said.
    tables_page.write_text("# Result tables\n\nThe markers were lost.\n", "utf-8")
    with pytest.raises(ValueError, match=r"tables\.md: expected one <!-- tables:begin -->"):
        report.update_benchmarks_pages(readme, tables_page)

    # The project README's quality block comes from the same runs.
    project = tmp_path / "PROJECT.md"
    others = "".join(
        f"<!-- {name}:begin -->x<!-- {name}:end -->\n" for name in ("image", "torchfree", "documents")
    )
    project.write_text("intro\n<!-- quality:begin -->\nold\n<!-- quality:end -->\noutro\n" + others, "utf-8")
    report.update_readme(project)
    block = project.read_text("utf-8")
    assert block.startswith("intro\n<!-- quality:begin -->\n") and block.endswith(
        "<!-- quality:end -->\noutro\n" + others  # no image, torch-free or documents results: as they were
    )
    assert "| tiny (dev, 3 q) | 0.500 / 0.250 |" in block and "old" not in block
