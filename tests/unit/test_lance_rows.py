"""The serving files' rows read in place from the LanceDB table's data files (#50, disk): float16 rows (index
format 6) and the float32 rows of tables written before."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hybridrag.indexing.stores import lance_rows, quantized, vector_segments
from hybridrag.indexing.stores import vectors as vec

DIM = 384  # the models' width: Lance stores rows this wide as plain pages (narrow ones in mini-blocks)


def _rows(start: int, n: int, dim: int = DIM) -> tuple[dict[str, list], np.ndarray]:
    rng = np.random.default_rng(start)
    # Not unit length: the norms file must bring them back to what the codes were made from.
    data = (rng.normal(size=(n, dim)) * rng.uniform(0.5, 2.0, size=(n, 1))).astype(np.float32)
    ids = range(start, start + n)
    columns = {
        "chunk_id": [f"c{i}" for i in ids],
        "doc_id": [f"d{i}" for i in ids],
        "file_id": [f"f{i % 3}.md" for i in ids],
        "date": [None] * n,
        "entity_types": [["place"] if i % 2 else [] for i in ids],
    }
    return columns, data


def _write(
    path: Path, batches: int = 3, n: int = 300, dim: int = DIM, value_type: pa.DataType = vec.VECTOR_TYPE
) -> np.ndarray:
    """A table of `batches` fragments (one per add, not compacted) and its serving files."""
    writer = vec.VectorIndexWriter(path, dim, create=True, value_type=value_type)
    parts = []
    for b in range(batches):
        columns, data = _rows(b * n, n, dim)
        writer.add(columns, data)
        parts.append(data)
    writer.finish()
    return np.concatenate(parts)


def _unit(data: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(data, axis=1, keepdims=True)
    return data / np.where(norms > 0, norms, 1.0)


@pytest.mark.parametrize(("value_type", "bits"), [(pa.float16(), 16), (pa.float32(), 32)])
def test_the_base_reads_its_rows_from_the_tables_data_files_with_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value_type: pa.DataType, bits: int
) -> None:
    data = _write(tmp_path / "lance", value_type=value_type)
    folder = tmp_path / "lance"
    assert lance_rows.present(folder) and quantized.present(folder)
    assert not (folder / quantized.VECTORS).exists()  # no second copy of the vectors
    pages = lance_rows.read_pages(folder)
    assert len(pages) == 3 and {p.bits for p in pages} == {bits}  # one page in each fragment's data file
    assert vec.half_width(folder) == (bits == 16)
    # The same table served from a .npy (the layout refused): the same rows, bit for bit, and results.
    monkeypatch.setattr(lance_rows, "table_pages", lambda *a: None)
    _write(tmp_path / "npy", value_type=value_type)
    monkeypatch.undo()
    assert (tmp_path / "npy" / quantized.VECTORS).is_file() and not lance_rows.present(tmp_path / "npy")
    mapped = quantized.QuantizedVectors.open(folder, DIM)
    copied = quantized.QuantizedVectors.open(tmp_path / "npy", DIM)
    assert isinstance(mapped.matrix, lance_rows.LanceRows)
    np.testing.assert_array_equal(mapped.matrix.all(), copied.matrix.all())
    # The stored values, widened to float32 and divided by their norm (float16: the input rounded).
    stored = data.astype(value_type.to_pandas_dtype()).astype(np.float32)
    np.testing.assert_allclose(mapped.matrix.all(), _unit(stored), atol=1e-6)
    assert bits == 32 or np.abs(mapped.matrix.all() - _unit(data)).max() < 1e-3
    # Any order, repeats, runs across the fragments' pages.
    for at in ([0], [899], [298, 299, 300, 301, 600, 5, 5, 0], list(range(900))[::-1], []):
        rows = np.array(at, dtype=np.int64)
        np.testing.assert_array_equal(mapped.matrix.take(rows), copied.matrix.take(rows))
    with pytest.raises(IndexError):
        mapped.matrix.take(np.array([900]))
    rng = np.random.default_rng(1)
    for q in range(20):
        unit = _unit((data[q * 41] + rng.normal(size=DIM).astype(np.float32))[None])[0]
        mask = np.arange(900) % 7 == 0 if q % 2 else None
        got, want = mapped.search(unit, 10, mask), copied.search(unit, 10, mask)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    hits, total = vec.VectorIndex(folder, DIM).search(data[7], 3)
    assert total == 900 and hits[0].chunk_id == "c7"


def test_a_layout_that_is_not_plain_rows_keeps_the_npy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Narrow rows: Lance packs them in mini-blocks, which are not rows to read in place.
    _write(tmp_path / "narrow", batches=1, dim=32)
    assert (tmp_path / "narrow" / quantized.VECTORS).is_file()
    assert not lance_rows.present(tmp_path / "narrow")
    # Pages that point a few bytes off: the writer compares every row, so the .npy is written.
    real = lance_rows.table_pages

    def shifted(folder: Path, table: object, dim: int) -> list[lance_rows.Page] | None:
        pages = real(folder, table, dim)
        assert pages
        return [lance_rows.Page(p.file, p.offset + 4, p.rows) for p in pages]

    monkeypatch.setattr(lance_rows, "table_pages", shifted)
    data = _write(tmp_path / "off", batches=1)
    assert (tmp_path / "off" / quantized.VECTORS).is_file()
    assert not lance_rows.present(tmp_path / "off")
    hits, _total = vec.VectorIndex(tmp_path / "off", DIM).search(data[3], 1)
    assert hits[0].chunk_id == "c3"


def test_a_truncated_data_file_is_refused_when_the_version_opens(tmp_path: Path) -> None:
    _write(tmp_path / "v", batches=1)
    page = lance_rows.read_pages(tmp_path / "v")[0]
    path = tmp_path / "v" / page.file
    os.truncate(path, page.offset + 10)
    with pytest.raises(ValueError, match="shorter than the serving pages say"):
        quantized.QuantizedVectors.open(tmp_path / "v", DIM)


def test_writes_keep_the_base_in_place_and_a_merge_maps_the_compacted_table(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    data = _write(v1)
    before = {p.name: p.read_bytes() for p in v1.iterdir() if p.is_file()}
    pages = lance_rows.read_pages(v1)
    # A write's staging copy hard-links the served version's files; it deletes a document and adds one.
    shutil.copytree(v1, v2, copy_function=os.link)
    writer = vec.VectorIndexWriter(v2, DIM, create=False)
    writer.delete_documents(["d5"], ["c5"])
    columns, added = _rows(5000, 1)
    writer.add(columns, added)
    writer.finish(segment="20261128T000000000000-abcdef")
    assert lance_rows.read_pages(v2) == pages  # the base is still read where it was
    assert vector_segments.segment_names(v2) == ["20261128T000000000000-abcdef"]
    served = vec.VectorIndex(v2, DIM)
    assert served.search(added[0], 1)[0][0].chunk_id == "c5000"
    hits, total = served.search(data[5], 3)
    assert total == 900 and "c5" not in {h.chunk_id for h in hits}
    # The merge compacts the table (new data files, the old ones dropped from its copy) and serves from those.
    table = vec.vector_table(v2)
    vec.compact_table(table)
    assert vector_segments.compact(v2, table, DIM)
    after = lance_rows.read_pages(v2)
    assert after != pages and not vector_segments.segment_names(v2)
    assert all((v2 / p.file).is_file() for p in after)
    merged = vec.VectorIndex(v2, DIM)
    assert merged.search(added[0], 1)[0][0].chunk_id == "c5000"
    assert merged.search(data[6], 1)[0][0].chunk_id == "c6"
    assert merged.vectors(["c5"]) == {}
    # The version the copy was made from is untouched and still reads its own pages.
    assert {p.name: p.read_bytes() for p in v1.iterdir() if p.is_file()} == before
    assert vec.VectorIndex(v1, DIM).search(data[5], 1)[0][0].chunk_id == "c5"
    # Nothing to fold and the table as the pages say: the merge leaves the serving files alone.
    assert not vector_segments.compact(v2, vec.vector_table(v2), DIM)


def test_a_write_whose_table_lost_a_page_file_writes_the_serving_files_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Were a table operation in a write's copy to unlink a data file the base's pages name (Lance's own
    # cleanup of files its newest manifest no longer names), the write rewrites the serving files from the
    # table instead of publishing pages it cannot read.
    monkeypatch.setattr(vector_segments, "DEAD_SHARE", 0.5)  # a third dead would be tombstoned
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    data = _write(v1)
    shutil.copytree(v1, v2, copy_function=os.link)
    writer = vec.VectorIndexWriter(v2, DIM, create=False)
    writer.delete_documents([f"d{i}" for i in range(300)], [f"c{i}" for i in range(300)])  # the first batch
    (v2 / lance_rows.read_pages(v2)[0].file).unlink()
    writer.finish(segment="20261128T000000000000-abcdef")
    assert not (v2 / vector_segments.DELETED).exists()  # written anew, not tombstoned
    assert not lance_rows.present(v2) or lance_rows.pages_readable(v2)
    hits, total = vec.VectorIndex(v2, DIM).search(data[400], 1)
    assert total == 600 and hits[0].chunk_id == "c400"
    assert vec.VectorIndex(v1, DIM).search(data[0], 1)[0][0].chunk_id == "c0"  # the served version is whole
