"""The ONNX encoder (same vectors, faster) and micro-batched query encoding."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from hybridrag.indexing.models.embedders import (
    MODEL_REGISTRY,
    ModelUnavailable,
    SentenceTransformerEmbedder,
    load_embedder,
)
from hybridrag.pipeline.batching import BatchingEmbedder

TEXTS = [
    "Who invented the automatic loom?",
    "Masaru Ibuka and Akio Morita founded Tokyo Tsushin Kogyo in 1946.",
    "The Shinkansen connects Tokyo and Osaka.",
    "湯川秀樹は中間子を予言した。",
    "radium polonium Nobel prize",
]


@pytest.mark.slow
def test_onnx_export_keeps_the_vectors_and_searches_a_torch_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Any, client: TestClient
) -> None:
    from hybridrag.indexing.models.onnx_encoder import OnnxEmbedder, export_onnx, onnx_dir

    monkeypatch.setenv("HYBRIDRAG_MODELS_DIR", str(tmp_path))
    with pytest.raises(ModelUnavailable, match="models install minilm"):
        load_embedder("minilm", "onnx")
    assert isinstance(load_embedder("minilm", "auto"), SentenceTransformerEmbedder)  # no export yet: torch
    info = export_onnx(MODEL_REGISTRY["minilm"])
    # MiniLM's int8 export moves vectors too far (cosine ~0.98), so the exact fp32 export is kept.
    assert info["precision"] == "fp32" and info["minCosineVsTorch"] >= 0.99
    # Every layer's attention runs as one fused kernel (recipe 3), and the fused graph is still exact.
    assert info["fused"]["Attention"] == 6 and info["fused"]["SkipLayerNormalization"] == 12
    assert info["minCosineVsTorch"] >= 0.9999
    assert (onnx_dir("minilm") / "model.onnx").is_file() and (onnx_dir("minilm") / "export.json").is_file()
    fast = load_embedder("minilm", "auto")
    assert isinstance(fast, OnnxEmbedder) and fast.encoder == "onnx-fp32" and fast.dim == embedder.dim
    agreement = (fast.embed_queries(TEXTS) * embedder.embed_queries(TEXTS)).sum(axis=1)
    assert agreement.min() >= 0.999
    assert fast.embed_queries([]).shape == (0, embedder.dim)
    # A worker's share of the cores (HYBRIDRAG_MODEL_THREADS) reaches onnxruntime's pool.
    capped = load_embedder("minilm", "onnx", threads=1)
    assert isinstance(capped, OnnxEmbedder)
    assert capped._session.get_session_options().intra_op_num_threads == 1
    # A query encoded by the fast path searches the index the torch path built, with the same answer.
    for text in ("Who founded Sony?", "automatic loom Toyoda"):
        vector = fast.embed_queries([text])[0].tolist()
        body = {"text": text, "options": {"strategies": ["semantic"], "limit": 5}}
        torch_ids = [r["id"] for r in client.post("/v1/search", json=body).json()["results"]]
        onnx_ids = [
            r["id"] for r in client.post("/v1/search", json={**body, "embedding": vector}).json()["results"]
        ]
        assert onnx_ids == torch_ids and torch_ids


@pytest.mark.slow
def test_e5_int8_export_agrees_with_torch() -> None:
    from hybridrag.indexing.models.onnx_encoder import OnnxEmbedder, onnx_dir
    from hybridrag.indexing.models.registry import available_cores

    try:
        torch_e5 = load_embedder("e5-multilingual")
    except ModelUnavailable as exc:
        pytest.skip(f"e5-multilingual not installed: {exc}")
    if not (onnx_dir("e5-multilingual") / "model.onnx").is_file():
        pytest.skip("no ONNX export of e5-multilingual (hybridrag models install e5-multilingual)")
    fast = OnnxEmbedder(MODEL_REGISTRY["e5-multilingual"])
    assert fast.encoder == "onnx-int8"
    _assert_fused_int8(onnx_dir("e5-multilingual"), layers=12)
    # A list's texts run side by side, one thread each, where the process has cores for it; the same vectors
    # on one (a worker per call or not: each call's arithmetic is its own).
    one = OnnxEmbedder(MODEL_REGISTRY["e5-multilingual"], threads=1)
    assert one._workers == 1 and fast._workers == min(available_cores(), 4)
    assert np.array_equal(one.embed_passages(TEXTS), fast.embed_passages(TEXTS))
    for encode in ("embed_queries", "embed_passages"):
        together = getattr(fast, encode)(TEXTS)
        cosines = (together * getattr(torch_e5, encode)(TEXTS)).sum(axis=1)
        assert cosines.min() >= 0.99, (encode, cosines)
        # A text's vector does not depend on the texts encoded with it (int8 scales are per call).
        for i, text in enumerate(TEXTS):
            assert np.array_equal(getattr(fast, encode)([text])[0], together[i]), (encode, text)


@pytest.mark.slow
def test_a_build_embeds_passages_with_the_chosen_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Any, sample_index: Path
) -> None:
    """`index build` embeds passages with the export when there is one (`--encoder auto`, the default),
    records it, and `add` keeps it; `--encoder onnx` without an export is refused."""
    from typer.testing import CliRunner

    from hybridrag.cli.bench import app
    from hybridrag.cli.commands import SAMPLE_CORPUS
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
    from hybridrag.indexing.models.onnx_encoder import export_onnx
    from hybridrag.indexing.stores.vectors import VectorIndex
    from hybridrag.indexing.stores.versions import current_version

    monkeypatch.setenv("HYBRIDRAG_MODELS_DIR", str(tmp_path / "models"))
    runner = CliRunner()
    out = tmp_path / "i"
    build = ["index", "build", str(SAMPLE_CORPUS), "--out", str(out), "--embedding-model", "minilm"]
    refused = runner.invoke(app, [*build, "--encoder", "onnx"])  # no export on this machine yet
    assert refused.exit_code == 2 and "models install minilm" in refused.output
    assert not (out / "current").exists()
    wrong = runner.invoke(app, [*build, "--encoder", "gpu"])
    assert wrong.exit_code == 2 and "--encoder" in wrong.output
    export_onnx(MODEL_REGISTRY["minilm"])
    assert runner.invoke(app, build).exit_code == 0
    manifest = current_version(out).manifest
    assert manifest["config"]["encoder"] == "auto"
    assert manifest["embedding"]["encoder"] == "onnx-fp32"
    # Same chunks (content-hashed ids) as the torch-built sample index, and vectors that agree with its.
    fast = VectorIndex(current_version(out).path / "vectors", embedder.dim, quantized=False)
    slow = VectorIndex(current_version(sample_index).path / "vectors", embedder.dim, quantized=False)
    assert fast._ids is not None and slow._ids is not None and set(fast._ids) == set(slow._ids)
    ids = list(fast._ids)
    theirs, ours = slow.vectors(ids), fast.vectors(ids)
    assert min(float(ours[i] @ theirs[i]) for i in ids) >= 0.999
    added = tmp_path / "more"
    added.mkdir()
    (added / "loom.md").write_text("# Looms\n\nThe automatic loom was invented by Sakichi Toyoda.\n", "utf-8")
    IndexBuilder(out, BuildConfig(embedding_model="minilm")).add(added)
    assert current_version(out).manifest["embedding"]["encoder"] == "onnx-fp32"


def _assert_fused_int8(folder: Path, layers: int) -> None:
    """The export's graph runs each layer's attention as one quantized kernel and keeps the word
    embeddings in float (recipe 3: fused, then the matrix products and attention quantized)."""
    import json
    from collections import Counter

    import onnx

    from hybridrag.indexing.models.onnx_encoder import EXPORT_RECIPE, export_is_current

    info = json.loads((folder / "export.json").read_text("utf-8"))
    if not export_is_current(folder):
        pytest.skip(f"the export at {folder} is recipe {info.get('recipe')}: run `hybridrag models install`")
    assert info["recipe"] == EXPORT_RECIPE and info["fused"]["Attention"] == layers
    ops = Counter(node.op_type for node in onnx.load(str(folder / "model.onnx")).graph.node)
    assert ops["QAttention"] == layers and ops["Attention"] == 0
    assert ops["EmbedLayerNormalization"] == 1 and ops["QEmbedLayerNormalization"] == 0
    assert ops["SkipLayerNormalization"] == 2 * layers and ops["MatMulInteger"] == 3 * layers


def test_an_export_of_an_older_recipe_is_redone(tmp_path: Path) -> None:
    import json

    from hybridrag.indexing.models.onnx_encoder import EXPORT_RECIPE, export_is_current

    assert not export_is_current(tmp_path)  # nothing there
    (tmp_path / "model.onnx").write_bytes(b"")
    assert not export_is_current(tmp_path)  # no export.json
    (tmp_path / "export.json").write_text(json.dumps({"precision": "int8"}))  # before recipes were recorded
    assert not export_is_current(tmp_path)
    (tmp_path / "export.json").write_text(json.dumps({"recipe": EXPORT_RECIPE - 1}))
    assert not export_is_current(tmp_path)
    (tmp_path / "export.json").write_text(json.dumps({"recipe": EXPORT_RECIPE}))
    assert export_is_current(tmp_path)


def test_concurrent_queries_share_encoder_calls(embedder: Any) -> None:
    batching = BatchingEmbedder(embedder, max_batch=64)
    try:
        expected = embedder.embed_queries(TEXTS * 4)
        results: dict[int, np.ndarray] = {}
        start = threading.Barrier(20)

        def ask(i: int) -> None:
            start.wait()
            results[i] = batching.embed_queries([(TEXTS * 4)[i]])

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(results) == 20
        for i, vector in results.items():  # each caller gets its own row, whatever batch it rode in
            assert np.allclose(vector[0], expected[i], atol=1e-5)
        assert batching.calls < 20, "queries that arrived while the encoder was busy were encoded together"
        # A failure reaches the callers of the batch and the worker keeps serving.
        with pytest.raises(TypeError):
            batching.embed_queries([None])  # type: ignore[list-item]
        # Submitted, the vectors come as a future (a search goes on meanwhile); none asked, none made.
        submitted = batching.submit_queries(TEXTS[:2])
        assert np.allclose(submitted.result(timeout=60), expected[:2], atol=1e-5)
        assert batching.submit_queries([]).result().shape == (0, embedder.dim)
        assert batching.embed_queries(["still alive"]).shape == (1, embedder.dim)
    finally:
        batching.close()


def test_batch_endpoint_encodes_its_sub_queries_in_one_call(client: TestClient) -> None:
    engine = client.app.state.engine  # type: ignore[attr-defined]
    batching = engine._embedder
    assert isinstance(batching, BatchingEmbedder)
    before = batching.calls
    queries = [{"text": t, "options": {"strategies": ["semantic"], "limit": 3}} for t in TEXTS]
    queries.append({"text": "keyword only", "options": {"strategies": ["keyword"]}})
    response = client.post("/v1/search/batch", json={"queries": queries})
    assert response.status_code == 200
    assert batching.calls - before == 1
    single = client.post("/v1/search", json=queries[0]).json()
    batched = response.json()["results"][0]["result"]
    assert [r["id"] for r in batched["results"]] == [r["id"] for r in single["results"]]


def test_encoder_benchmark_reports_torch_and_the_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hybridrag.benchmarks.encoders import run_encoders, to_markdown

    monkeypatch.setenv("HYBRIDRAG_MODELS_DIR", str(tmp_path / "models"))  # no export here: a skipped row
    data = tmp_path / "beir"
    data.mkdir()
    (data / "queries.jsonl").write_text(
        "\n".join(f'{{"_id": "q{i}", "text": "query {i}"}}' for i in range(4))
    )
    (data / "corpus.jsonl").write_text(
        "\n".join(f'{{"_id": "d{i}", "title": "t", "text": "passage {i}"}}' for i in range(8))
    )
    report = run_encoders([data], ["minilm"], queries=4, passages=8)
    torch_row, onnx_row = report["rows"]
    assert torch_row["encoder"] == "torch" and torch_row["queryP50ms"] > 0 and torch_row["passagesPerS"] > 0
    assert torch_row["minCosineVsTorch"] == pytest.approx(1.0, abs=1e-4) and torch_row["querySpeedup"] == 1.0
    assert "models install minilm" in onnx_row["skipped"]
    assert "minilm" in to_markdown(report)
    # The arithmetic: real tokens counted with the model's tokenizer, a GEMM reference measured here.
    arithmetic = report["arithmetic"]
    assert 3 <= arithmetic["minilm"]["tokensPerPassage"] <= 12  # "t\npassage N" plus [CLS]/[SEP]
    assert torch_row["passageGflops"] > 0 and arithmetic["gemm"]["gflops"] > 0
    assert arithmetic["gemm"]["shape"][1:] == [384, 1536]
    assert "GFLOP/s on these cores" in to_markdown(report)


def test_model_flops_counts_the_matrix_products() -> None:
    from hybridrag.benchmarks.encoders import model_flops

    config = {"hidden_size": 4, "num_hidden_layers": 2, "intermediate_size": 8}
    # per token per layer: 4*4*4 projections + 2*4*8 feed-forward + 2*3*4 attention = 64 + 64 + 24 = 152 MACs
    assert model_flops(config, 3) == 2 * 2 * 3 * 152
    # attention grows with the square of the length, the rest linearly
    assert model_flops(config, 6) - 2 * model_flops(config, 3) == 2 * 2 * (2 * 6 * 6 * 4 - 2 * 2 * 3 * 3 * 4)


def test_the_device_is_resolved_and_cuda_runs_the_torch_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--device`: cpu stays on the CPU; auto takes CUDA only when torch sees it; cuda without one, or the
    int8 ONNX export on CUDA, is a clear error, never a silent CPU build."""
    from hybridrag.indexing.builds.build import BuildConfig
    from hybridrag.indexing.builds.distributed import RayPassages
    from hybridrag.indexing.models import embedders

    monkeypatch.setattr(embedders, "cuda_available", lambda: False)
    assert embedders.resolve_device("cpu") == embedders.resolve_device("auto") == "cpu"
    with pytest.raises(ModelUnavailable, match="no CUDA device"):
        embedders.resolve_device("cuda")
    with pytest.raises(ModelUnavailable, match="unknown device"):
        embedders.resolve_device("tpu")
    with pytest.raises(ModelUnavailable, match="no CUDA device"):
        load_embedder("minilm", "auto", device="cuda")

    made: list[dict[str, Any]] = []

    class FakeTorchEmbedder:
        def __init__(self, spec: Any, **kwargs: Any) -> None:
            made.append({"name": spec.name, **kwargs})

    monkeypatch.setattr(embedders, "cuda_available", lambda: True)
    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", FakeTorchEmbedder)
    assert embedders.resolve_device("auto") == embedders.resolve_device("cuda") == "cuda"
    assert embedders.resolve_device("cpu") == "cpu"
    load_embedder("minilm", "auto", device="auto")
    load_embedder("minilm", "torch", device="cuda", batch_size=8)
    assert made == [
        {"name": "minilm", "device": "cuda", "batch_size": 128},
        {"name": "minilm", "device": "cuda", "batch_size": 8},
    ]
    with pytest.raises(ModelUnavailable, match="int8 graph for CPUs"):
        load_embedder("minilm", "onnx", device="cuda")

    # Ray: the actors ask for the cluster's GPUs (one each) with cuda or auto, none with cpu.
    config = BuildConfig(embedding_model="minilm", encoder="auto")
    assert RayPassages(device="auto").gpus({"CPU": 8, "GPU": 2}) == 2
    assert RayPassages(device="auto").gpus({"CPU": 8}) == 0
    assert RayPassages(device="cpu").gpus({"CPU": 8, "GPU": 2}) == 0
    with pytest.raises(ModelUnavailable, match="no GPU"):
        RayPassages(device="cuda").gpus({"CPU": 8})
    on_gpu = RayPassages(device="cuda").actor_kwargs(config, None, gpu=True)
    assert (on_gpu["device"], on_gpu["encoder"]) == ("cuda", "torch")
    on_cpu = RayPassages(device="auto").actor_kwargs(config, None)
    assert (on_cpu["device"], on_cpu["encoder"]) == ("cpu", "auto")
    with pytest.raises(ValueError, match="device"):
        RayPassages(device="gpu")


def test_text_in_capitals_is_read_in_lower_case_and_other_text_as_written() -> None:
    from hybridrag.indexing.models.registry import encoder_casing

    capitals = "PATIENTS RECEIVED 5 mg/kg OF THE DRUG DAILY FOR TWELVE WEEKS."
    assert encoder_casing(capitals) == capitals.lower()  # a stray unit in lower case does not stop it
    assert (
        encoder_casing("THE EFFECT OF VITAMIN D ON BONE DENSITY") == "the effect of vitamin d on bone density"
    )
    for kept in (
        "The IL-6 and TNF-alpha levels in COPD patients rose after ACE inhibitors.",  # acronyms in normal text
        "The Effect Of Vitamin D On Bone Density In Adults",  # title case
        "lower case text is read as it is",
        "WHO",  # a short query keeps its capitals: "who" is another word
        "NASA CEO SPEAKS",
        # Japanese with acronyms in capitals (21 ASCII letters, all capitals, a minority of the text).
        "NHKとJRとNTTとJALとANAとKDDIとIBMは日本でよく知られている組織の略称で、ニュースで毎日見かける。",
        "",
    ):
        assert encoder_casing(kept) == kept, kept
    spec = MODEL_REGISTRY["e5-multilingual"]
    assert spec.passage_input(capitals) == "passage: " + capitals.lower()
    assert spec.query_input("HOW DOES VITAMIN D AFFECT BONES?") == "query: how does vitamin d affect bones?"
    assert spec.query_input("Who founded Sony?") == "query: Who founded Sony?"


@pytest.mark.slow
def test_both_e5_encoders_read_capitals_as_lower_case() -> None:
    """e5 is cased (a sentence's vector moves with its capitals), and text in capitals reaches it folded:
    the same vector as the text in lower case, from torch and from the int8 export alike."""
    from hybridrag.indexing.models.onnx_encoder import OnnxEmbedder, onnx_dir

    try:
        encoders: list[Any] = [load_embedder("e5-multilingual")]
    except ModelUnavailable as exc:
        pytest.skip(f"e5-multilingual not installed: {exc}")
    if (onnx_dir("e5-multilingual") / "model.onnx").is_file():
        encoders.append(OnnxEmbedder(MODEL_REGISTRY["e5-multilingual"]))
    text = "Vitamin D supplementation increases bone mineral density in older adults."
    for encoder in encoders:
        for encode in (encoder.embed_passages, encoder.embed_queries):
            upper, lower, written = encode([text.upper(), text.lower(), text])
            assert np.array_equal(upper, lower), encoder
            assert float(written @ lower) < 0.9999, encoder  # mixed case is read as written


def test_a_session_takes_the_process_share_of_the_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cpu_session` with no thread count runs the runtime's default, or the process' share of the cores
    where it has one (a build's shard process); a count given wins."""
    import onnx
    from onnx import TensorProto, helper

    from hybridrag.indexing.models import registry
    from hybridrag.indexing.models.onnx_encoder import cpu_session

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    monkeypatch.delenv(registry.CORES_ENV, raising=False)
    assert cpu_session(model).get_session_options().intra_op_num_threads == 0  # the runtime's default
    assert cpu_session(model, 2).get_session_options().intra_op_num_threads == 2
    monkeypatch.setenv(registry.CORES_ENV, "1")
    assert cpu_session(model).get_session_options().intra_op_num_threads == 1
    assert cpu_session(model, 2).get_session_options().intra_op_num_threads == 2
    assert cpu_session(model).run(None, {"x": np.array([-1.0], dtype=np.float32)})[0].tolist() == [0.0]
