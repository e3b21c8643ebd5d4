"""The documents and chunks tables as the service reads them: memory-mapped rows, flat id lookups."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.stores import mapped
from hybridrag.indexing.stores.keys import KeyIndex
from hybridrag.indexing.stores.mapped import (
    ChunkTable,
    DocumentTable,
    keys_path,
    take,
    take_pylist,
    write_keys,
)
from hybridrag.indexing.stores.tables import (
    CHUNK_SCHEMA,
    DOCUMENT_SCHEMA,
    Chunk,
    chunk_row,
    document_row,
    write_table,
)


def _chunks() -> list[Chunk]:
    # Two documents whose chunks are interleaved and out of order in the table, as an update leaves them.
    return [
        Chunk("c-b1", "b", "f2.md", 1, 10, 20, "second of b", "en", ["person"]),
        Chunk("c-a0", "a", "f1.md", 0, 0, 9, "first of a", "en", []),
        Chunk("c-b0", "b", "f2.md", 0, 0, 9, "first of b", "en", [], [2]),
        Chunk("c-a1", "a", "f1.md", 1, 10, 19, "second of a", "en", ["place"]),
    ]


def _write(folder: Path, compression: str = "uncompressed", keys: bool = True) -> tuple[Path, Path]:
    docs = [
        Document("b", "f2.md", "Bee", "first of b second of b", date="2020-01-02"),
        Document("a", "f1.md", "Ay", "first of a second of a", metadata={"k": 1}),
    ]
    chunks = _chunks()
    dates = {"a": None, "b": datetime(2020, 1, 2)}
    doc_path, chunk_path = folder / "documents.arrow", folder / "chunks.arrow"
    write_table(doc_path, [document_row(d) for d in docs], DOCUMENT_SCHEMA, compression)
    write_table(chunk_path, [chunk_row(c, dates[c.doc_id]) for c in chunks], CHUNK_SCHEMA, compression)
    if keys:
        write_keys(doc_path, [d.doc_id for d in docs], "doc_id")
        write_keys(chunk_path, [c.chunk_id for c in chunks], "chunk_id")
        write_keys(chunk_path, [c.doc_id for c in chunks], "doc_id")
    return doc_path, chunk_path


@pytest.mark.parametrize(("compression", "keys"), [("uncompressed", True), ("zstd", False)])
def test_tables_read_rows_by_id(tmp_path: Path, compression: str, keys: bool) -> None:
    # Uncompressed with lookups is what a build writes; zstd without them is a version written before.
    doc_path, chunk_path = _write(tmp_path, compression, keys)
    assert keys_path(chunk_path, "chunk_id").is_file() == keys
    documents, chunks = DocumentTable(doc_path), ChunkTable(chunk_path)
    assert len(chunks) == 4 and list(chunks) == [c.chunk_id for c in _chunks()]  # row order
    for expected in _chunks():
        assert chunks[expected.chunk_id] == expected
    assert "c-a1" in chunks and "nope" not in chunks and chunks.get("nope") is None
    with pytest.raises(KeyError):
        chunks["nope"]
    assert [c.chunk_id for c in chunks.of_doc("b")] == ["c-b0", "c-b1"]
    assert [c.chunk_id for c in chunks.of_doc("a")] == ["c-a0", "c-a1"]
    assert chunks.of_doc("zzz") == [] and chunks.count_of_doc("b") == 2 and chunks.count_of_doc("zzz") == 0
    assert documents["a"].metadata == {"k": 1} and documents["b"].date == "2020-01-02"
    assert "c" not in documents and len(documents) == 2
    assert [d.doc_id for d in documents.page(0, 10)] == ["a", "b"]  # id order, whatever the row order
    assert [d.doc_id for d in documents.page(1, 10)] == ["b"] and documents.page(5, 10) == []
    assert (
        chunks.rows(["c-a1", "nope", "c-b1", "c-a1"]).tolist() == [3, -1, 0, 3] and chunks.id_at(2) == "c-b0"
    )
    assert chunks.rows([]).tolist() == []
    assert chunks.table.column("date").to_pylist() == [datetime(2020, 1, 2), None, datetime(2020, 1, 2), None]


def test_a_hash_collision_never_returns_another_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridrag.indexing.stores import keys

    _doc_path, chunk_path = _write(tmp_path, keys=False)
    # Every id hashes alike: the lookup finds every row as a candidate and must pick by the id itself.
    monkeypatch.setattr(keys, "key_hash", lambda key: 7)
    chunks = ChunkTable(chunk_path)
    assert [chunks[c.chunk_id].chunk_id for c in _chunks()] == [c.chunk_id for c in _chunks()]
    assert "nope" not in chunks and [c.chunk_id for c in chunks.of_doc("a")] == ["c-a0", "c-a1"]
    assert chunks.rows(["c-a1", "nope", "c-b0"]).tolist() == [3, -1, 2]
    page = chunks.prefetch(["c-a1", "nope", "c-b0"])  # read ahead: each checked against its own id
    assert page["c-a1"].chunk_id == "c-a1" and page["c-b0"].chunk_id == "c-b0" and "nope" not in page
    assert page.rows == {"c-a1": 3, "c-b0": 2}  # the rows they were read from, collisions resolved
    assert chunks.ids_at([3, 2, 3]) == ["c-a1", "c-b0", "c-a1"]


def test_key_index_round_trips_and_keeps_repeated_keys(tmp_path: Path) -> None:
    index = KeyIndex.build(["x", "y", "x", "z"])
    index.save(tmp_path / "k.npy")
    loaded = KeyIndex.load(tmp_path / "k.npy")
    assert sorted(loaded.rows_of("x").tolist()) == [0, 2] and loaded.rows_of("y").tolist() == [1]
    many = loaded.rows_of_many(["z", "w", "x"])  # hashed and searched together, the same answers
    assert [sorted(r.tolist()) for r in many] == [[3], [], [0, 2]]
    assert KeyIndex.build([]).rows_of_many(["x"])[0].tolist() == [] and loaded.rows_of_many([]) == []
    assert loaded.rows_of("w").tolist() == [] and len(loaded) == 4
    assert isinstance(loaded.hashes, np.memmap)  # mapped, not read into memory
    np.save(tmp_path / "bad.npy", np.zeros(3))
    with pytest.raises(ValueError, match="not a key index"):
        KeyIndex.load(tmp_path / "bad.npy")


def test_take_reads_across_chunks_in_the_order_asked() -> None:
    # A mapped table of several record batches: rows from every batch, repeated, out of order.
    table = pa.Table.from_batches(
        [
            pa.record_batch({"x": list(range(i, i + 3)), "y": [str(v) for v in range(i, i + 3)]})
            for i in (0, 3, 6)
        ]
    )
    rows = [7, 0, 4, 8, 0, 3]
    assert take(table, rows).to_pylist() == [{"x": r, "y": str(r)} for r in rows]
    assert take(table.column("y"), rows).to_pylist() == [str(r) for r in rows]
    assert take(table, []).num_rows == 0 and take(table.column("x"), np.array([], np.int64)).to_pylist() == []
    single = pa.table({"x": [5, 6]})
    assert take(single, [1, 0]).column("x").to_pylist() == [6, 5]
    # The same rows converted batch by batch and put back in the order asked.
    assert take_pylist(table, rows) == [{"x": r, "y": str(r)} for r in rows]
    assert take_pylist(table.column("y"), np.array(rows)) == [str(r) for r in rows]
    assert take_pylist(table, []) == [] and take_pylist(single, [1, 0]) == [{"x": 6}, {"x": 5}]


def test_take_pylist_slices_a_few_rows_and_takes_many_alike() -> None:
    # A few rows are read as one-row slices of their batches, many by a `take` a batch: the same values.
    table = pa.Table.from_batches(
        [
            pa.record_batch({"x": list(range(i, i + 50)), "y": [f"v{v}" for v in range(i, i + 50)]})
            for i in range(0, 500, 50)
        ]
    )
    rows = np.random.default_rng(3).integers(0, 500, 300)  # repeats, out of order, every batch
    want = [{"x": int(r), "y": f"v{r}"} for r in rows]
    few, many = rows[: mapped.SLICED_ROWS], rows
    assert len(few) <= mapped.SLICED_ROWS < len(many)
    assert take_pylist(table, few) == want[: len(few)] and take_pylist(table, many) == want
    assert take_pylist(table.column("y"), few) == [w["y"] for w in want[: len(few)]]
    assert take_pylist(table.column("y"), many) == [w["y"] for w in want]
    for bad in ([3, 500], [-1], [*range(100), 500]):
        with pytest.raises(IndexError):
            take_pylist(table, bad)


def test_prefetch_reads_a_page_in_one_batch_and_falls_through(tmp_path: Path) -> None:
    doc_path, chunk_path = _write(tmp_path)
    documents, chunks = DocumentTable(doc_path), ChunkTable(chunk_path)
    page = chunks.prefetch(["c-a1", "nope", "c-b0", "c-a1"])
    assert page["c-a1"] == chunks["c-a1"] and page["c-b0"] == chunks["c-b0"]
    assert page["c-b1"] == chunks["c-b1"]  # not read ahead: from the table
    assert "nope" not in page and page.get("nope") is None and len(page) == 4
    assert list(page) == list(chunks)
    docs = documents.prefetch(["b"])
    assert docs["b"] == documents["b"] and docs["a"] == documents["a"]


def _rss_file_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


def test_mappings_read_tables_and_arrays_and_release_their_pages(tmp_path: Path) -> None:
    from hybridrag.indexing.stores.memory_maps import Mappings

    _doc_path, chunk_path = _write(tmp_path)
    maps = Mappings(release_every=3)
    chunks = ChunkTable(chunk_path, maps)
    assert chunks["c-b0"] == ChunkTable(chunk_path)["c-b0"] and maps.files == 3  # table + two lookups
    big = np.arange(2_000_000, dtype=np.int64).reshape(1000, 2000)  # 16 MB
    np.save(tmp_path / "big.npy", big)
    np.save(tmp_path / "fortran.npy", np.asfortranarray(big[:3, :5]))
    np.save(tmp_path / "empty.npy", np.zeros((0, 4), np.float32))
    arr = maps.npy(tmp_path / "big.npy")
    assert not arr.flags.writeable
    np.testing.assert_array_equal(maps.npy(tmp_path / "fortran.npy"), big[:3, :5])
    assert maps.npy(tmp_path / "empty.npy").shape == (0, 4)
    before = _rss_file_kb()
    assert int(arr.sum()) == int(big.sum())  # every page read: now resident
    touched = _rss_file_kb()
    assert touched - before > 12_000
    maps.release()  # the pages leave the process' page tables; the data does not change
    assert _rss_file_kb() < touched - 12_000 and maps.releases == 1
    assert int(arr[999, 1999]) == 1_999_999 and chunks["c-a1"].text == "second of a"
    for _ in range(2):  # every third search releases, in a thread of its own
        started = [maps.searched() for _ in range(3)]
        assert [t is not None for t in started] == [False, False, True]
        started[2].join()  # type: ignore[union-attr]
    assert maps.releases == 3
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="Python objects"):
        maps.npy(tmp_path / "objects.npy")
    never = Mappings(release_every=0)
    assert all(never.searched() is None for _ in range(40)) and never.releases == 0
    with pytest.raises(ValueError):
        Mappings(release_every=-1)


def _piece(doc_id: str, position: int, start: int, text: str) -> Chunk:
    return Chunk(f"{doc_id}-{position}", doc_id, "f.md", position, start, start + len(text), text, "en")


def test_a_documents_text_is_held_once_by_the_chunks_that_hold_it(tmp_path: Path) -> None:
    import json

    from hybridrag.indexing.stores.tables import document_from_row, joined_text, read_table, stored_text

    text = "Granite is igneous.  Basalt is volcanic; it cools fast."
    first, second = _piece("d", 0, 0, text[:19]), _piece("d", 1, 21, text[21:])
    overlap = _piece("d", 2, 30, text[30:44])  # chunks may overlap
    gaps = stored_text(text, [second, first])
    assert gaps is not None and json.loads(gaps) == [[19, "  "], [len(text), ""]]
    parts = [(c.start, c.text) for c in (second, overlap, first)]
    assert joined_text(parts, gaps) == text
    # A chunk that does not hold its part exactly, no chunk, no text: the row keeps the text.
    assert stored_text(text, [first, _piece("d", 1, 21, text[21:].lower())]) is None
    assert stored_text(text, []) is None and stored_text("", [first]) is None
    # A missing chunk is an error, never a shorter text.
    with pytest.raises(ValueError, match="hole"):
        joined_text([(first.start, first.text)], gaps)
    with pytest.raises(ValueError, match="hole"):
        joined_text([(second.start, second.text)], gaps)
    with pytest.raises(ValueError, match="do not end where"):  # another text's chunk
        joined_text([*parts, (50, "a longer tail")], gaps)
    # Through the tables: the row of "d" leaves its text to its chunks, that of "e" (cleaned chunks) keeps it.
    d = Document("d", "f.md", "Rocks", text)
    e = Document("e", "f.md", "E", "Text  its chunks  clean up.")
    cleaned = _piece("e", 0, 0, "Text its chunks clean up.")
    doc_path, chunk_path = tmp_path / "documents.arrow", tmp_path / "chunks.arrow"
    rows = [document_row(d, [first, second]), document_row(e, [cleaned])]
    write_table(doc_path, rows, DOCUMENT_SCHEMA, "uncompressed")
    chunks = [first, second, cleaned]
    write_table(chunk_path, [chunk_row(c) for c in chunks], CHUNK_SCHEMA, "uncompressed")
    write_keys(doc_path, ["d", "e"], "doc_id")
    write_keys(chunk_path, [c.chunk_id for c in chunks], "chunk_id")
    write_keys(chunk_path, [c.doc_id for c in chunks], "doc_id")
    raw = read_table(doc_path).to_pylist()
    assert raw[0]["text"] is None and raw[1]["text"] == e.text and raw[1]["text_gaps"] is None
    with pytest.raises(ValueError, match="held by its chunks"):
        document_from_row(raw[0])
    for documents in (DocumentTable(doc_path), DocumentTable(doc_path, chunks=ChunkTable(chunk_path))):
        assert documents["d"] == d and documents["e"] == e
        assert documents.prefetch(["e", "d"])["d"].text == text
        assert [doc.text for doc in documents.page(0, 10)] == [text, e.text]


def test_text_window_reads_a_window_from_the_pieces_that_overlap_it() -> None:
    from hybridrag.indexing.stores.tables import text_window

    text = "Granite is igneous.  Basalt is volcanic; it cools fast."
    pieces = [(21, text[21:45]), (0, text[:19]), (19, "  "), (30, text[30:])]  # overlapping, out of order
    for start, end in [(0, 5), (15, 25), (19, 21), (40, len(text)), (0, len(text)), (7, 7)]:
        assert text_window(pieces, start, end) == text[start:end]
    assert text_window(pieces[:2], 15, 25) is None  # the gap is missing: a hole, never a shorter text
    assert text_window([(0, text[:19])], 10, 30) is None  # nothing past the piece's end
    assert text_window([], 3, 3) == ""


def test_a_page_reads_its_documents_around_its_hits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A long document of 40 overlapping chunks with gaps between some, one whose chunks were cleaned (its row
    # keeps its text) and one of a single chunk; the chunks in the table out of order, as writes leave them.
    words = [f"w{i:03d}" for i in range(400)]
    long_text = " ".join(words)
    pieces, start = [], 0
    while start < len(long_text):
        end = min(len(long_text), start + 60)
        pieces.append(_piece("long", len(pieces), start, long_text[start:end]))
        start = end - 10 if len(pieces) % 3 else end + 2  # overlaps, then a gap of two characters
    short = Document("short", "g.md", "Short", "One chunk holds it all.", url="http://x/s", date="2021-05-01")
    cleaned = Document("clean", "h.md", "Clean", "Text  its chunks  clean up.")
    docs = [Document("long", "f.md", "Long", long_text), short, cleaned]
    chunks = [
        *pieces[::-1],
        _piece("short", 0, 0, short.text),
        _piece("clean", 0, 0, "Text its chunks clean up."),
    ]
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    doc_path, chunk_path = tmp_path / "documents.arrow", tmp_path / "chunks.arrow"
    rows = [document_row(d, by_doc[d.doc_id]) for d in docs]
    assert rows[0]["text"] is None and rows[1]["text"] is None and rows[2]["text"] == cleaned.text
    write_table(doc_path, rows, DOCUMENT_SCHEMA, "uncompressed")
    write_table(chunk_path, [chunk_row(c) for c in chunks], CHUNK_SCHEMA, "uncompressed")
    write_keys(doc_path, [d.doc_id for d in docs], "doc_id")
    write_keys(chunk_path, [c.chunk_id for c in chunks], "chunk_id")
    write_keys(chunk_path, [c.doc_id for c in chunks], "doc_id")
    documents = DocumentTable(doc_path, chunks=ChunkTable(chunk_path))
    read: list[int] = []
    real_rows = mapped._rows
    monkeypatch.setattr(mapped, "_rows", lambda table, at: read.append(len(at)) or real_rows(table, at))
    texts = {d.doc_id: d.text for d in docs}
    page = [pieces[20], chunks[-1], pieces[0], chunks[-2], pieces[21], pieces[-1]]
    for chars in (0, 7, 55, 300):
        read.clear()
        heads, context = documents.around(page, chars)
        for c in page:
            text = texts[c.doc_id]
            assert context[c.chunk_id] == (
                text[max(0, c.start - chars) : c.start],
                text[c.end : c.end + chars],
            )
        for d in docs:
            head = heads[d.doc_id]
            assert (head.doc_id, head.file_id, head.title, head.url, head.date) == (
                d.doc_id,
                d.file_id,
                d.title,
                d.url,
                d.date,
            )
        # The documents' rows, then (for windows the page's own chunks do not hold) the long one's neighbours:
        # never its 40 chunks.
        assert len(read) <= 2 and sum(read[1:]) < (len(pieces) if chars > 60 else 16), read
    assert documents.heads(["short", "nope"]) == {"short": heads["short"]}
    # Should the neighbours leave a hole (a chunk missing from the lookup), the whole text is read instead.
    monkeypatch.setattr(ChunkTable, "pieces_near", lambda self, spans: {d: [] for d in spans})
    _heads, context = documents.around([pieces[20]], 100)
    assert context[pieces[20].chunk_id] == (
        long_text[pieces[20].start - 100 : pieces[20].start],
        long_text[pieces[20].end : pieces[20].end + 100],
    )


def test_a_chunks_neighbours_are_read_from_ids_and_positions(tmp_path: Path) -> None:
    _doc_path, chunk_path = _write(tmp_path)  # two documents' chunks interleaved, out of order
    chunks = ChunkTable(chunk_path)
    for doc_id in ("a", "b"):
        ids = [c.chunk_id for c in chunks.of_doc(doc_id)]
        assert len(ids) == 2
        for at, chunk_id in enumerate(ids):
            expected = (ids[at - 1] if at else None, ids[at + 1] if at + 1 < len(ids) else None)
            assert chunks.neighbours(chunks[chunk_id]) == expected


def test_a_documents_table_written_before_text_gaps_reads_heads_and_context(tmp_path: Path) -> None:
    doc_path, chunk_path = _write(tmp_path)
    old = mapped.feather.read_table(doc_path).drop_columns(["text_gaps"])  # as a release before wrote it
    mapped.write_arrow(doc_path, old)
    documents, chunks = DocumentTable(doc_path, chunks=ChunkTable(chunk_path)), ChunkTable(chunk_path)
    heads, context = documents.around([chunks["c-a1"], chunks["c-b0"]], 5)
    assert heads["a"].title == "Ay" and heads["b"].date == "2020-01-02"
    texts = {"a": "first of a second of a", "b": "first of b second of b"}  # the rows keep their texts
    assert context == {
        c.chunk_id: (texts[c.doc_id][max(0, c.start - 5) : c.start], texts[c.doc_id][c.end : c.end + 5])
        for c in (chunks["c-a1"], chunks["c-b0"])
    }
    assert context["c-a1"] == (" of a", "f a")
    assert (
        [h.doc_id for h in documents.page_heads(0, 10)]
        == ["a", "b"]
        == [d.doc_id for d in documents.page(0, 10)]
    )
    assert documents.heads(["b"]) == {"b": heads["b"]}
