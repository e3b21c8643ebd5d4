"""The vector store: int8 codes scanned and float32 vectors rescored from the serving files; the older paths
(exact or projected in memory, LanceDB with SQL prefilters and its ANN index) for versions without them."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hybridrag.indexing.stores import quantized
from hybridrag.indexing.stores import vectors as vec
from hybridrag.indexing.stores.filters import ChunkFilters


def _stored(data: np.ndarray, value_type: pa.DataType = vec.VECTOR_TYPE) -> np.ndarray:
    """The unit vectors a table's rows (float16 in a new one, `VECTOR_TYPE`) read back as: what searches score."""
    stored = data.astype(value_type.to_pandas_dtype()).astype(np.float32)
    return stored / np.linalg.norm(stored, axis=1, keepdims=True)


def _same_up_to_ties(a: list, b: list, tol: float = 2e-4) -> None:
    """LanceDB's ranking (`b`) against ours (`a`): LanceDB computes a float16 column's distances in float16,
    so equal lengths, each row's similarity within `tol` of ours, and rows missing from ours only at its
    cut-off (near-ties swapped across the page's end)."""
    assert len(a) == len(b)
    ours = {h.chunk_id: h.similarity for h in a}
    for hit in b:
        if hit.chunk_id in ours:
            assert hit.similarity == pytest.approx(ours[hit.chunk_id], abs=tol)
        else:
            assert hit.similarity <= a[-1].similarity + tol
    assert [h.similarity for h in a] == pytest.approx([h.similarity for h in b], abs=tol)


def _fill(path: Path, n: int, dim: int = 32, ann: bool = False) -> np.ndarray:
    rng = np.random.default_rng(7)
    data = rng.normal(size=(n, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    writer = vec.VectorIndexWriter(path, dim, create=True)
    writer.add(
        {
            "chunk_id": [f"c{i}" for i in range(n)],
            "doc_id": [f"d{i // 2}" for i in range(n)],
            "file_id": [f"f{i % 5}.md" for i in range(n)],
            "date": [datetime(2000 + i % 20, 1, 1) if i % 3 else None for i in range(n)],
            "entity_types": [["person"] if i % 4 == 0 else [] for i in range(n)],
        },
        data,
    )
    built = writer.finish(ann=ann)
    assert built["rows"] == n and built["serving"] == "sq8-rescored"
    return _stored(data)


def test_exact_search_and_prefilters(tmp_path: Path) -> None:
    data = _fill(tmp_path / "v", 300)
    index = vec.VectorIndex(tmp_path / "v", 32)
    hits, total = index.search(data[10], 5)
    assert hits[0].chunk_id == "c10" and hits[0].similarity == pytest.approx(1.0, abs=1e-5) and total == 300
    hits, total = index.search(data[10], 50, ChunkFilters(file_ids=["f1.md"]))
    assert hits and all(int(h.chunk_id[1:]) % 5 == 1 for h in hits) and total == 60
    hits, _ = index.search(
        data[0], 50, ChunkFilters(entity_types=["person"], date_start=datetime(2010, 1, 1))
    )
    for h in hits:
        i = int(h.chunk_id[1:])
        assert i % 4 == 0 and i % 3 and 2000 + i % 20 >= 2010
    assert index.search(data[0], 5, ChunkFilters(file_ids=[]))[0] == []
    with pytest.raises(ValueError, match="dimensions"):
        index.search(np.zeros(8), 5)


def test_in_memory_search_equals_lancedb_exact_search(tmp_path: Path) -> None:
    data = _fill(tmp_path / "v", 400)
    serving = vec.VectorIndex(tmp_path / "v", 32)
    memory = vec.VectorIndex(tmp_path / "v", 32, quantized=False)
    lance = vec.VectorIndex(tmp_path / "v", 32, in_memory_max_rows=0, quantized=False)
    assert (serving.kind, memory.kind, lance.kind) == ("sq8-rescored", "exact", "lancedb")
    for q in (0, 17, 399):
        for limit in (1, 10, 400, 1000):
            a, total_a = memory.search(data[q] * 3.0, limit)  # an unnormalised query is fine
            b, total_b = lance.search(data[q] * 3.0, limit)
            assert total_a == total_b == 400
            _same_up_to_ties(a, b)
            c, total_c = serving.search(data[q] * 3.0, limit)
            assert [h.chunk_id for h in c] == [h.chunk_id for h in a] and total_c == 400
            assert [h.similarity for h in c] == pytest.approx([h.similarity for h in a], abs=1e-5)
    # Stored vectors by id, from the serving files, memory or LanceDB alike; unknown ids are left out.
    from_memory, from_lance = memory.vectors(["c3", "c7", "nope"]), lance.vectors(["c3", "c7", "nope"])
    from_serving = serving.vectors(["c3", "c7", "nope"])
    assert set(from_memory) == set(from_lance) == set(from_serving) == {"c3", "c7"}
    for cid in from_memory:
        assert from_memory[cid] == pytest.approx(from_lance[cid], abs=1e-6)
        assert from_serving[cid] == pytest.approx(from_lance[cid], abs=1e-6)
        assert from_memory[cid] == pytest.approx(data[int(cid[1:])], abs=1e-6)
    # Filtered searches are answered in memory with LanceDB's SQL prefilter's answers: same rows, same totals.
    cases = [
        ChunkFilters(file_ids=["f2.md"]),
        ChunkFilters(file_ids=["f1.md", "f3.md", "nope.md"], entity_types=["person"]),
        ChunkFilters(entity_types=["person", "org"], date_start=datetime(2005, 1, 1)),
        ChunkFilters(date_start=datetime(2003, 1, 1), date_end=datetime(2007, 6, 1)),
        ChunkFilters(date_end=datetime(2001, 1, 1)),
        ChunkFilters(chunk_ids=["c3", "c8", "c399", "x"], file_ids=["f3.md", "f4.md"]),
        ChunkFilters(file_ids=[]),
        ChunkFilters(entity_types=[]),
        ChunkFilters(file_ids=["x' OR '1'='1"]),
    ]
    for f in cases:
        for q, limit in ((2, 20), (250, 400)):
            a, total_a = memory.search(data[q], limit, f)
            b, total_b = lance.search(data[q], limit, f)
            assert total_a == total_b, f
            _same_up_to_ties(a, b)
            c, total_c = serving.search(data[q], limit, f)
            assert [h.chunk_id for h in c] == [h.chunk_id for h in a] and total_c == total_a, f
    assert memory.search(data[0], 5, ChunkFilters(file_ids=["f1.md"]))[1] == 80


def test_filter_values_are_escaped(tmp_path: Path) -> None:
    _fill(tmp_path / "v", 50)
    index = vec.VectorIndex(tmp_path / "v", 32)
    hits, total = index.search(np.ones(32), 5, ChunkFilters(file_ids=["x' OR '1'='1"]))
    assert hits == [] and total == 0


def test_ann_index_above_threshold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vec, "ANN_THRESHOLD", 1000)
    data = _fill(tmp_path / "v", 2000, ann=True)
    # Exercise LanceDB's ANN path (a version written before the serving files).
    index = vec.VectorIndex(tmp_path / "v", 32, in_memory_max_rows=0, quantized=False)
    assert index._ann
    indices = index._table.list_indices()
    types = {i.index_type for i in indices}
    assert {"IvfHnswSq", "BTree", "LabelList"} <= types
    recall = []
    for q in range(20):
        exact = set(np.argsort(-(data @ data[q]))[:10])
        got = {int(h.chunk_id[1:]) for h in index.search(data[q], 10)[0]}
        recall.append(len(exact & got) / 10)
    assert np.mean(recall) >= 0.9
    # Deep fetches (the engine over-fetches 100-1000) must work too, not only top-10.
    for depth in (100, 300, 1000):
        deep, _ = index.search(data[5], depth)
        assert len(deep) == depth and deep[0].chunk_id == "c5"
    filtered, _ = index.search(data[3], 10, ChunkFilters(file_ids=["f3.md"]))
    assert filtered and all(int(h.chunk_id[1:]) % 5 == 3 for h in filtered)


def test_two_stage_search_rescores_exactly_and_finds_the_exact_top_hits(tmp_path: Path) -> None:
    # Clustered 128-d vectors, as embeddings are (a few directions hold most of the variance).
    rng = np.random.default_rng(3)
    n, dim = 12000, 128
    centres = rng.normal(size=(40, dim))
    data = centres[rng.integers(0, 40, n)] + 0.35 * rng.normal(size=(n, dim))
    data = (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)
    writer = vec.VectorIndexWriter(tmp_path / "v", dim, create=True)
    writer.add(
        {
            "chunk_id": [f"c{i}" for i in range(n)],
            "doc_id": [f"d{i}" for i in range(n)],
            "file_id": ["f.md"] * n,
            "date": [None] * n,
            "entity_types": [[]] * n,
        },
        data,
    )
    writer.finish()
    data = _stored(data)
    exact = vec.VectorIndex(tmp_path / "v", dim, quantized=False)
    two = vec.VectorIndex(tmp_path / "v", dim, projected_min_rows=1, quantized=False)
    assert two.two_stage and not exact.two_stage
    found = 0
    for q in range(50):
        query = data[q * 97] + 0.5 * rng.normal(size=dim).astype(np.float32)
        want, total = exact.search(query, 10)
        got, total_two = two.search(query, 10)
        assert total == total_two == n
        # Every similarity returned is the exact one, best first, and the page is full.
        assert len(got) == 10 and [h.similarity for h in got] == sorted(
            (h.similarity for h in got), reverse=True
        )
        unit = query / np.linalg.norm(query)
        for hit in got:
            assert hit.similarity == pytest.approx(float(data[int(hit.chunk_id[1:])] @ unit), abs=1e-5)
        found += len({h.chunk_id for h in want} & {h.chunk_id for h in got})
        assert two.search(query, 10)[0] == got  # deterministic
    assert found / 500 >= 0.97
    # A page deeper than half the index scores every vector: the same as exact.
    deep = data[5] * 2.0
    assert [h.chunk_id for h in two.search(deep, 2600)[0]] == [
        h.chunk_id for h in exact.search(deep, 2600)[0]
    ]


def _clustered(n: int, dim: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, dim))
    data = centres[rng.integers(0, 40, n)] + 0.35 * rng.normal(size=(n, dim))
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


def _small_ivf(monkeypatch: pytest.MonkeyPatch, sq8: bool = False) -> None:
    """Inverted files from 1,000 rows, sqrt(rows) lists, 8 of them probed, 300 candidates rescored: the
    large-corpus path at test size. `sq8`: of 8-bit codes (as dimensions no sub-quantizer divides get, and
    as versions before product quantization hold)."""
    monkeypatch.setattr(quantized, "IVF_MIN_ROWS", 1000)
    monkeypatch.setattr(quantized, "IVF_LISTS_PER_SQRT", 1)
    monkeypatch.setattr(quantized, "IVF_PROBES", 8)
    monkeypatch.setattr(quantized, "PQ_RESCORE_MIN", 300)
    monkeypatch.setattr(quantized, "PQ_RESCORE_PER_RESULT", 30)
    if sq8:
        monkeypatch.setattr(quantized, "PQ_DIMS", 3)


def _write_clustered(path: Path, n: int, dim: int, value_type: pa.DataType = vec.VECTOR_TYPE) -> np.ndarray:
    data = _clustered(n, dim)
    writer = vec.VectorIndexWriter(path, dim, create=True, value_type=value_type)
    writer.add(
        {
            "chunk_id": [f"c{i}" for i in range(n)],
            "doc_id": [f"d{i}" for i in range(n)],
            "file_id": [f"f{i % 3}.md" for i in range(n)],
            "date": [None] * n,
            "entity_types": [["place"] if i % 2 else [] for i in range(n)],
        },
        data,
    )
    built = writer.finish()
    assert built["serving"] == quantized.codes_kind(path)
    return _stored(data, value_type)


@pytest.mark.parametrize("kind", ["sq8-rescored", "ivf-pq4-rescored", "ivf-sq8-rescored"])
def test_quantized_scan_rescores_exactly_and_matches_exact_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    n, dim = 6000, 64
    if kind != "sq8-rescored":
        _small_ivf(monkeypatch, sq8=kind == "ivf-sq8-rescored")
    data = _write_clustered(tmp_path / "v", n, dim)
    assert quantized.present(tmp_path / "v")
    # Filters broad enough to go through the code scan with a bitmap of the rows they pass.
    monkeypatch.setattr(quantized, "EXACT_FILTERED_MAX", 100)
    serving = vec.VectorIndex(tmp_path / "v", dim)
    exact = vec.VectorIndex(tmp_path / "v", dim, quantized=False)
    assert serving.kind == kind and serving.two_stage
    rng = np.random.default_rng(5)
    found = 0
    for q in range(40):
        query = data[q * 131] + 0.5 * rng.normal(size=dim).astype(np.float32)
        want, _ = exact.search(query, 10)
        got, total = serving.search(query, 10)
        assert total == n and len(got) == 10
        unit = query / np.linalg.norm(query)
        for hit in got:  # every similarity is the exact one
            assert hit.similarity == pytest.approx(float(data[int(hit.chunk_id[1:])] @ unit), abs=1e-5)
        assert [h.similarity for h in got] == sorted((h.similarity for h in got), reverse=True)
        found += len({h.chunk_id for h in want} & {h.chunk_id for h in got})
        filters = ChunkFilters(entity_types=["place"])
        fgot, ftotal = serving.search(query, 10, filters)
        fwant, fexact = exact.search(query, 10, filters)
        assert ftotal == fexact == n // 2
        assert all(int(h.chunk_id[1:]) % 2 == 1 for h in fgot)
        found += len({h.chunk_id for h in fwant} & {h.chunk_id for h in fgot})
    assert found / 800 >= 0.99


def test_refine_codes_rank_the_inverted_files_candidates_so_only_the_best_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside the product-quantized inverted file, 8-bit codes (mapped) rank its candidates and only the
    best `rescored(FLAT_KIND, k)` are read and rescored exactly: the same recall as reading all of them; a
    version without the codes reads all of them; a rewrite as flat codes leaves none behind."""
    import shutil

    from hybridrag.indexing.stores.memory_maps import Mappings

    _small_ivf(monkeypatch)
    n, dim = 6000, 64
    data = _write_clustered(tmp_path / "v", n, dim)
    folder = tmp_path / "v"
    assert all((folder / name).is_file() for name in quantized.REFINE_FILES)
    maps = Mappings()
    q = quantized.QuantizedVectors.open(folder, dim, maps)
    assert q.kind == "ivf-pq4-rescored" and q.refine is not None and q.refine_width is not None
    assert q.refine.shape == (n, dim) and q.refine.dtype == np.uint8 and not q.refine.flags.owndata
    # The codes decode to the rows within a step of their dimension's range.
    low, width = np.load(folder / quantized.REFINE_RANGE)
    decoded = low + (q.refine.astype(np.float32) + 0.5) / 255 * width
    assert np.abs(decoded - data).max() <= width.max() / 255 + 1e-6
    shutil.copytree(folder, tmp_path / "old")
    for name in quantized.REFINE_FILES:  # a version written before the refine codes
        (tmp_path / "old" / name).unlink()
    old = quantized.QuantizedVectors.open(tmp_path / "old", dim)
    assert old.refine is None

    def reads(store: quantized.QuantizedVectors) -> list[int]:
        counts: list[int] = []
        take = store.matrix.take

        def counted(rows: np.ndarray) -> np.ndarray:
            counts.append(len(rows))
            return take(rows)

        monkeypatch.setattr(store.matrix, "take", counted)
        return counts

    new_reads, old_reads = reads(q), reads(old)
    rng = np.random.default_rng(11)
    found = {"refined": 0, "all read": 0}
    for i in range(40):
        query = data[i * 131] + 0.5 * rng.normal(size=dim).astype(np.float32)
        unit = query / np.linalg.norm(query)
        best = set(np.argsort(-(data @ unit), kind="stable")[:10].tolist())
        for name, store in (("refined", q), ("all read", old)):
            rows, sims, eligible = store.search(unit, 10)
            assert eligible == n and len(rows) == 10
            np.testing.assert_allclose(sims, data[rows] @ unit, atol=1e-5)  # exact similarities
            found[name] += len(best & set(rows.tolist()))
        # The refine step keeps the candidates whose decoded rows score best.
        candidates = q._scan(unit, 300, None, 1.0)
        kept = q._refined(candidates, unit, 50)
        by_decoded = candidates[np.argsort(-(decoded[candidates] @ unit), kind="stable")]
        assert len(set(kept.tolist()) ^ set(by_decoded[:50].tolist())) <= 2  # float32 sums in another order
    assert new_reads == [quantized.rescored(quantized.FLAT_KIND, 10)] * 40
    assert (
        len(old_reads) == 40 and min(old_reads) > 200 and max(old_reads) == 300
    )  # what the probed lists held
    assert found["refined"] >= found["all read"] - 2 and found["refined"] / 400 >= 0.98
    # Under a selective filter the page is still full and exact.
    keep = np.zeros(n, dtype=bool)
    keep[::50] = True
    rows, _sims, eligible = q.search(data[0], 10, keep)
    assert eligible == 120 and keep[rows].all()
    assert sorted(rows.tolist()) == sorted(np.flatnonzero(keep)[np.argsort(-(data[keep] @ data[0]))[:10]])
    # Written again as flat codes: no refine codes are left to misread.
    table = vec.vector_table(folder)
    assert quantized.write_serving_files(folder, table, dim, ivf_min_rows=10**9) == "sq8-rescored"
    assert not any((folder / name).exists() for name in quantized.REFINE_FILES)
    assert quantized.QuantizedVectors.open(folder, dim).refine is None


def test_the_served_filter_masks_agree_with_the_predicate(tmp_path: Path) -> None:
    """The vector store's masks come from its columns encoded once (file codes, a boolean array a type):
    on random filters they are `filter_mask`'s, for the base alone and for a base with a write's segment
    and a tombstone."""
    import random

    from test_filters import _columns, _random_filters

    from hybridrag.indexing.stores.filters import filter_mask
    from hybridrag.indexing.stores.vector_segments import ServingVectors

    table = _columns()
    n, dim = table.num_rows, 16
    data = _clustered(n, dim)
    rows = {name: table.column(name).to_pylist() for name in ("chunk_id", "file_id", "date", "entity_types")}
    rows["doc_id"] = rows["chunk_id"]
    cut = n - 40
    writer = vec.VectorIndexWriter(tmp_path / "v", dim, create=True)
    writer.add({k: v[:cut] for k, v in rows.items()}, data[:cut])
    writer.finish()
    base = ServingVectors.open(tmp_path / "v", dim)
    assert isinstance(base, quantized.QuantizedVectors)
    writer = vec.VectorIndexWriter(tmp_path / "v", dim, create=False)
    writer.add({k: v[cut:] for k, v in rows.items()}, data[cut:])
    writer.delete_documents([rows["doc_id"][3]], [rows["chunk_id"][3]])
    writer.finish(segment="20261202T000000000000-abcdef")
    parts = ServingVectors.open(tmp_path / "v", dim)
    assert isinstance(parts, ServingVectors) and len(parts.parts) == 2
    rng = random.Random(5)
    for _ in range(150):
        filters = _random_filters(rng)
        for store in (base, parts):
            assert store.filter_mask(filters).tolist() == filter_mask(store.columns, filters).tolist(), (
                filters
            )


def test_an_inverted_file_probes_more_lists_under_a_selective_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One row in 50 passes: the 8 lists nearest the query hold a handful of them; the probes grow with
    # 1 / share (here to every list), so the page is full and the same as an exact search over those rows.
    _small_ivf(monkeypatch)
    monkeypatch.setattr(quantized, "EXACT_FILTERED_MAX", 10)
    monkeypatch.setattr(quantized, "PQ_RESCORE_MIN", 50)  # fewer than half the 120 rows: scanned, not exact
    n, dim = 6000, 64
    data = _write_clustered(tmp_path / "v", n, dim)
    q = quantized.QuantizedVectors.open(tmp_path / "v", dim)
    assert q.kind == "ivf-pq4-rescored"
    keep = [f"c{i}" for i in range(0, n, 50)]
    mask = np.isin(np.asarray(q.columns.column("chunk_id").to_pylist()), keep)
    for i in range(40):
        unit = data[i * 37] / np.linalg.norm(data[i * 37])
        rows, _sims, eligible = q.search(unit, 10, mask)
        assert eligible == len(keep) and len(rows) == 10 and mask[rows].all()
        best = np.flatnonzero(mask)[np.argsort(-(data[mask] @ unit), kind="stable")[:10]]
        assert sorted(rows.tolist()) == sorted(best.tolist())
    # Probes: the configured number without a filter, every list under this one.
    assert quantized.ivf_probes(q.codes.nlist, 1.0) == 8
    assert quantized.ivf_probes(q.codes.nlist, len(keep) / n) == q.codes.nlist


def test_an_update_keeps_the_inverted_files_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import faiss

    _small_ivf(monkeypatch)
    n, dim = 3000, 64
    data = _write_clustered(tmp_path / "v1", n, dim)
    shutil.copytree(tmp_path / "v1", tmp_path / "v2")
    writer = vec.VectorIndexWriter(tmp_path / "v2", dim, create=False)
    writer.delete_documents(["d0", "d1", "d2"])
    writer.finish()
    old = faiss.read_index(str(tmp_path / "v1" / quantized.CODES))
    new = faiss.read_index(str(tmp_path / "v2" / quantized.CODES))
    assert new.ntotal == n - 3 and new.nlist == old.nlist
    # The same centroids: an update adds its rows to the trained lists and runs no k-means.
    centroids = [faiss.downcast_index(ix.quantizer).reconstruct_n(0, ix.nlist) for ix in (old, new)]
    np.testing.assert_array_equal(centroids[0], centroids[1])
    hits, total = vec.VectorIndex(tmp_path / "v2", dim).search(data[5], 3)
    assert total == n - 3 and hits[0].chunk_id == "c5" and "c0" not in {h.chunk_id for h in hits}
    # Two builds of the same rows write the same codes (a fixed sample and k-means seed).
    _write_clustered(tmp_path / "v3", n, dim)
    assert (tmp_path / "v3" / quantized.CODES).read_bytes() == (
        tmp_path / "v1" / quantized.CODES
    ).read_bytes()


def test_an_update_rewrites_the_serving_files_and_leaves_the_linked_version_alone(tmp_path: Path) -> None:
    import os
    import shutil

    data = _fill(tmp_path / "v1", 300)
    # An update's staging copy hard-links the files of the served version (store.clone_into_staging).
    shutil.copytree(tmp_path / "v1", tmp_path / "v2", copy_function=os.link)
    before = {name: (tmp_path / "v1" / name).read_bytes() for name in quantized.FILES}
    writer = vec.VectorIndexWriter(tmp_path / "v2", 32, create=False)
    writer.delete_documents(["d0", "d1"])
    writer.finish()
    assert {name: (tmp_path / "v1" / name).read_bytes() for name in quantized.FILES} == before
    old, new = vec.VectorIndex(tmp_path / "v1", 32), vec.VectorIndex(tmp_path / "v2", 32)
    assert old.search(data[0], 1)[0][0].chunk_id == "c0"
    hits, total = new.search(data[0], 5)
    assert total == 296 and "c0" not in {h.chunk_id for h in hits}
    assert new.vectors(["c0", "c5"]).keys() == {"c5"}


def test_row_file_reads_the_rows_asked_for(tmp_path: Path) -> None:
    # Rescoring reads candidate rows with positional reads (no mapping): any order, runs, repeats.
    matrix = np.random.default_rng(0).standard_normal((50, 7)).astype(np.float32)
    np.save(tmp_path / "m.npy", matrix)
    rows = quantized.RowFile(tmp_path / "m.npy")
    assert rows.shape == (50, 7)
    for at in ([0], [49], [3, 4, 5, 9, 10, 2, 2, 0], list(range(50)), []):
        np.testing.assert_array_equal(rows.take(np.array(at, dtype=np.int64)), matrix[at])
    np.testing.assert_array_equal(rows.all(), matrix)
    with pytest.raises(IndexError):
        rows.take(np.array([50]))
    np.save(tmp_path / "v.npy", np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="row-major matrix"):
        quantized.RowFile(tmp_path / "v.npy")


@pytest.mark.parametrize("threads", [1, 2])
def test_retriever_threads_scan_with_the_configured_openmp_threads(tmp_path: Path, threads: int) -> None:
    """The scan runs in the retriever threads, and libgomp keeps its thread count per thread: each of them
    takes the setting, not only the thread that started the service."""
    faiss = pytest.importorskip("faiss")
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    engine = SearchEngine(
        Settings(
            index_dir=tmp_path, scan_threads=threads, search_threads=3, load_embedder=False, _env_file=None
        )  # type: ignore[call-arg]
    )
    try:
        counts = {engine._pool.submit(faiss.omp_get_max_threads).result() for _ in range(6)}
    finally:
        engine.close()
    assert counts == {threads}


def test_an_inverted_file_of_8_bit_codes_still_serves_and_a_rewrite_makes_it_product_quantized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Versions written before product quantization hold 8-bit inverted files: they serve as they are
    (with their own, smaller candidate count), and the first rewrite of their serving files trains the
    product-quantized kind instead of reusing their lists."""
    import shutil

    _small_ivf(monkeypatch, sq8=True)
    n, dim = 3000, 64
    data = _write_clustered(tmp_path / "v1", n, dim)
    monkeypatch.setattr(quantized, "PQ_DIMS", 2)  # this release
    old = quantized.QuantizedVectors.open(tmp_path / "v1", dim)
    assert old.kind == quantized.codes_kind(tmp_path / "v1") == "ivf-sq8-rescored"
    assert quantized.rescored(old.kind, 10) == quantized.RESCORE_MIN
    hits, total = vec.VectorIndex(tmp_path / "v1", dim).search(data[7], 3)
    assert total == n and hits[0].chunk_id == "c7"
    shutil.copytree(tmp_path / "v1", tmp_path / "v2")
    writer = vec.VectorIndexWriter(tmp_path / "v2", dim, create=False)
    writer.delete_documents(["d0"])
    assert writer.finish()["serving"] == "ivf-pq4-rescored"
    new = quantized.QuantizedVectors.open(tmp_path / "v2", dim)
    assert new.kind == "ivf-pq4-rescored" and quantized.rescored(new.kind, 10) == 300
    hits, total = vec.VectorIndex(tmp_path / "v2", dim).search(data[7], 3)
    assert total == n - 1 and hits[0].chunk_id == "c7"


@pytest.mark.parametrize(("sq8", "fmt"), [(True, 1), (False, 6)])
def test_a_version_with_product_quantized_codes_says_format_6(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sq8: bool, fmt: int
) -> None:
    """A release before format 6 would rescore 50 candidates of product-quantized codes (recall falls): such a
    version says format 6 even with a float32 table; 8-bit codes in a float32 table need nothing new."""
    from hybridrag.indexing.stores import versions

    _small_ivf(monkeypatch, sq8=sq8)
    _write_clustered(tmp_path / "v" / "vectors", 2000, 64, pa.float32())
    kind = quantized.codes_kind(tmp_path / "v" / "vectors")
    assert kind == ("ivf-sq8-rescored" if sq8 else "ivf-pq4-rescored")
    assert not vec.half_width(tmp_path / "v" / "vectors")
    assert versions.format_of(tmp_path / "v") == fmt


@pytest.mark.parametrize("sq8", [False, True])
def test_an_inverted_files_lists_are_trained_in_the_set_iterations(
    monkeypatch: pytest.MonkeyPatch, sq8: bool
) -> None:
    """The lists' k-means runs `IVF_TRAIN_ITERATIONS` iterations (faiss' IVF default is twice as many): the
    training compares every sampled row with every list each time (benchmarks/README.md, "Constants")."""
    _small_ivf(monkeypatch, sq8=sq8)
    n, dim = 2000, 50 if sq8 else 48  # 50: no sub-quantizer of 3 dimensions divides it (8-bit codes)
    index = quantized._new_codes(_clustered(n, dim), n, dim, quantized.serving_kind(n))
    assert index.cp.niter == quantized.IVF_TRAIN_ITERATIONS == 5
    assert index.is_trained and index.quantizer.ntotal == index.nlist == quantized.ivf_lists(n)
    assert quantized._kind_of(index) == ("ivf-sq8-rescored" if sq8 else "ivf-pq4-rescored")
