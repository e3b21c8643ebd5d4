"""The vector index: chunk embeddings in an embedded LanceDB directory.

Search is exact (a flat scan) below `ANN_THRESHOLD` rows: at 384 dimensions IVF_PQ recall is poor, and a
flat scan of tens of thousands of vectors costs a few milliseconds. Above it an IVF_HNSW_SQ index is built.
Filters are SQL predicates applied before the vector search (prefilter), never after, so a page is full.
Scalar (BTree / label-list) indexes on the filter columns keep prefiltering cheap at scale.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hybridrag.indexing.stores import vector_segments
from hybridrag.indexing.stores.filters import ChunkFilters, filter_mask, filter_sql, sql_list
from hybridrag.indexing.stores.memory_maps import Mappings
from hybridrag.indexing.stores.quantized import QuantizedVectors, present
from hybridrag.indexing.stores.vector_segments import ServingVectors

TABLE = "chunks"
LANCE_FOLDER = f"{TABLE}.lance"  # the table's folder in a version's vectors/
ANN_THRESHOLD = 50_000
HNSW_EF = 150
REFINE_FACTOR = 5
IN_MEMORY_MAX_ROWS = 500_000  # 384-d float32: ~770 MB at the limit
# From this many rows the in-memory search runs in two stages: a scan of every vector's projection on its
# principal components (a quarter of the dimensions), then the best candidates rescored exactly. At 100k x 384
# a full scan is ~10 ms of memory traffic per query on one core, the projected one a quarter of it.
PROJECTED_MIN_ROWS = 50_000
PROJECTED_DIMS = 96
PROJECTED_CANDIDATES = 2000  # rescored per search, at least
PROJECTED_PER_RESULT = 40  # and this many per requested result when that is more
# How a new table stores its vectors (index format 6): float16, half the bytes of float32 (1.56 -> 0.79 KB a
# 384-d chunk), which the base's rescoring reads in place (`lance_rows`). The unit vectors' float16 rounding
# moves a cosine by ~1e-4; measured against float32 in benchmarks/docs/scale.md ("Disk: float16 vectors"). A
# table written before keeps float32, and writes to it keep its type (`VectorIndexWriter`).
VECTOR_TYPE = pa.float16()


def vector_schema(dim: int, value_type: pa.DataType = VECTOR_TYPE) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("file_id", pa.string(), nullable=False),
            pa.field("date", pa.timestamp("us"), nullable=True),
            pa.field("entity_types", pa.list_(pa.string()), nullable=False),
            pa.field("vector", pa.list_(value_type, dim), nullable=False),
        ]
    )


def vector_rows(
    rows: dict[str, Sequence[Any]], vectors: np.ndarray, value_type: pa.DataType = VECTOR_TYPE
) -> pa.Table:
    """Rows of the vector table: chunk_id, doc_id, file_id, date and entity_types per row, and its vector
    (stored as `value_type`)."""
    dim = int(vectors.shape[1])
    flat = pa.array(np.ascontiguousarray(vectors, dtype=value_type.to_pandas_dtype()).reshape(-1))
    return pa.table(
        {
            "chunk_id": pa.array(rows["chunk_id"], pa.string()),
            "doc_id": pa.array(rows["doc_id"], pa.string()),
            "file_id": pa.array(rows["file_id"], pa.string()),
            "date": pa.array(rows["date"], pa.timestamp("us")),
            "entity_types": pa.array([list(x) for x in rows["entity_types"]], pa.list_(pa.string())),
            "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
        },
        schema=vector_schema(dim, value_type),
    )


@dataclass(frozen=True, slots=True)
class VectorHit:
    chunk_id: str
    similarity: float  # cosine similarity in -1..1


def _connect(path: Path) -> Any:
    import lancedb

    return lancedb.connect(str(path))


def vector_table(path: Path) -> Any:
    """The LanceDB table of a version's `vectors/` folder (the source of truth of its serving files)."""
    return _connect(path).open_table(TABLE)


def half_width(folder: Path) -> bool:
    """Whether the vector table in `folder` (a version's `vectors/`) stores float16 values (index format 6:
    a release before would append float32 rows to it)."""
    if not (folder / LANCE_FOLDER).is_dir():
        return False
    return bool(vector_table(folder).schema.field("vector").type.value_type == pa.float16())


def compact_table(table: Any) -> None:
    """Fold a table's fragments into few and drop its old versions and transactions (every `add` appends
    one of each: 1,172 fragments and 3,500 files after a 300k-chunk build, each hard-linked and fsynced by
    every later write). For a table no one else reads: a staging or merge copy."""
    with warnings.catch_warnings():  # "concurrent readers would fail": a copy has none
        warnings.simplefilter("ignore", UserWarning)
        table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


class VectorIndexWriter:
    """Creates or updates the LanceDB table of one index version."""

    def __init__(self, path: Path, dim: int, create: bool, value_type: pa.DataType = VECTOR_TYPE) -> None:
        """`value_type`: how a new table (`create`) stores its vectors; an existing one keeps its own."""
        self._path = path
        self._db = _connect(path)
        self.dim = dim
        if create:
            self._table = self._db.create_table(
                TABLE, schema=vector_schema(dim, value_type), mode="overwrite"
            )
        else:
            self._table = self._db.open_table(TABLE)
        # A table keeps the vector type it was made with (float32 before index format 6).
        self._value_type = self._table.schema.field("vector").type.value_type
        # What this write changed, for the serving files (`vector_segments.update`). A new table's serving
        # files are written from the table itself: its rows are not held here too (a full build's vectors).
        self._keeps_added = not create
        self._added: list[pa.Table] = []
        self._removed: list[str] = []
        self._rewrite = False  # the serving files written anew (types changed, rows unknown)

    def add(self, rows: dict[str, Sequence[Any]], vectors: np.ndarray) -> None:
        if len(vectors) == 0:
            return
        if vectors.shape[1] != self.dim:
            raise ValueError(f"vectors have {vectors.shape[1]} dimensions, the index has {self.dim}")
        table = vector_rows(rows, vectors, self._value_type)
        self._table.add(table)
        if self._keeps_added:
            self._added.append(table)

    def delete_documents(self, doc_ids: Sequence[str], chunk_ids: Sequence[str] | None = None) -> None:
        """Delete the documents' rows; `chunk_ids`, their passages, are tombstoned in the serving files
        (without them, the serving files are written anew)."""
        if doc_ids:
            self._table.delete(f"doc_id IN ({sql_list(doc_ids)})")
            self._removed.extend(chunk_ids or ())
            self._rewrite = self._rewrite or chunk_ids is None

    def set_entity_types(self, types: dict[str, Sequence[str]]) -> None:
        """New entity types for existing rows (by chunk id); vectors and the other columns are kept."""
        if not types:
            return
        ids = sorted(types)
        update = pa.table(
            {
                "chunk_id": pa.array(ids, pa.string()),
                "entity_types": pa.array([list(types[i]) for i in ids], pa.list_(pa.string())),
            }
        )
        # Only the given columns are written; matched rows keep the rest.
        self._table.merge_insert("chunk_id").when_matched_update_all().execute(update)
        self._rewrite = True

    def finish(self, ann: bool = False, segment: str | None = None, compact: bool = False) -> dict[str, Any]:
        """Write the serving files (`indexing.quantized`: int8 codes to scan, float32 vectors to rescore):
        with `segment` (the version being written), as a segment and tombstones beside the base's
        (`vector_segments`), else anew. With `ann`, also LanceDB's own ANN and scalar indexes when the table
        is large enough (the service reads the serving files, so a build leaves them out). `compact`: the
        table's fragments folded first (`compact_table`; a new table, written by many adds). Returns what
        was built."""
        if compact:
            compact_table(self._table)
        rows = int(self._table.count_rows())
        if segment is None or self._rewrite:
            kind = vector_segments.rewrite(self._path, self._table, self.dim)
        else:
            added = pa.concat_tables(self._added) if self._added else None
            kind = vector_segments.update(self._path, self._table, self.dim, segment, added, self._removed)
        built: dict[str, Any] = {"rows": rows, "ann": None, "serving": kind}
        if ann and rows >= ANN_THRESHOLD:
            from lancedb.index import BTree, IvfHnswSq, LabelList

            partitions = max(1, int(math.sqrt(rows) / 4))
            self._table.create_index(
                "vector", config=IvfHnswSq(distance_type="cosine", num_partitions=partitions), replace=True
            )
            for column in ("file_id", "doc_id"):
                self._table.create_index(column, config=BTree(), replace=True)
            self._table.create_index("entity_types", config=LabelList(), replace=True)
            built["ann"] = {"type": "IVF_HNSW_SQ", "partitions": partitions, "ef": HNSW_EF}
        return built


class VectorIndex:
    """Read side: cosine top-k with SQL prefilters.

    Searches over up to `IN_MEMORY_MAX_ROWS` vectors run in numpy: one matrix-vector product (exact; at
    100k x 384 about 5x faster than LanceDB's IVF-HNSW here, 7 vs 40 ms, recall 1.0 vs 0.90), and unfiltered
    ones from `projected_min_rows` vectors in two stages (`ProjectedScan`: a scan of a quarter of the
    dimensions, then exact rescoring of the best candidates). Filtered searches there are exact over the rows
    the filters pass (`filter_mask`, the same predicate as the SQL). Larger tables use LanceDB with SQL
    prefilters.
    """

    def __init__(
        self,
        path: Path,
        dim: int,
        in_memory_max_rows: int = IN_MEMORY_MAX_ROWS,
        projected_min_rows: int = PROJECTED_MIN_ROWS,
        quantized: bool = True,
        maps: Mappings | None = None,
    ) -> None:
        self._table = _connect(path).open_table(TABLE)
        self.dim = dim
        self._rows = int(self._table.count_rows())
        self._ann = self._rows >= ANN_THRESHOLD
        self._matrix: np.ndarray | None = None
        self._ids: np.ndarray | None = None
        self._row: dict[str, int] = {}
        self._projected: ProjectedScan | None = None
        self._columns: pa.Table | None = None
        self._quantized: QuantizedVectors | ServingVectors | None = None
        if quantized and present(path):
            self._quantized = ServingVectors.open(path, dim, maps)
            if self._quantized.rows != self._rows:
                raise ValueError(
                    f"serving files of {path} hold {self._quantized.rows} rows, the table {self._rows}"
                )
        elif 0 < self._rows <= in_memory_max_rows:
            table = self._table.to_arrow()
            ids, matrix = _ids_and_vectors(table, dim)
            # The filter columns, in row order: filtered searches are answered in memory too.
            self._columns = table.select(["chunk_id", "file_id", "date", "entity_types"]).combine_chunks()
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            self._matrix = matrix / np.where(norms > 0, norms, 1.0)
            self._ids = np.asarray(ids, dtype=object)
            self._row = {cid: i for i, cid in enumerate(ids)}
            if self._rows >= max(1, projected_min_rows) and dim > PROJECTED_DIMS:
                self._projected = ProjectedScan.fit(self._matrix, PROJECTED_DIMS)

    @property
    def two_stage(self) -> bool:
        """True when unfiltered searches rescore the candidates of a first, approximate stage."""
        return self._projected is not None or self._quantized is not None

    @property
    def kind(self) -> str:
        """How searches run: `sq8-rescored` or `ivf-sq8-rescored` (the serving files), `projected`, `exact` (in memory), `lancedb`."""
        if self._quantized is not None:
            return self._quantized.kind
        if self._matrix is None:
            return "lancedb"
        return "projected" if self._projected is not None else "exact"

    def _search_in_memory(
        self, query: np.ndarray, limit: int, filters: ChunkFilters | None = None
    ) -> tuple[list[VectorHit], int]:
        """Top `limit` rows by cosine in numpy, and how many rows were eligible. With (active) `filters`, exact
        over the rows passing them (the predicate of `filter_sql`); without, over every row or the projected
        scan's candidates."""
        assert self._matrix is not None and self._ids is not None and self._columns is not None
        norm = float(np.linalg.norm(query))
        unit = query / norm if norm > 0 else query
        if filters is not None:
            rows = np.flatnonzero(filter_mask(self._columns, filters))
            if len(rows) == 0:
                return [], 0
            eligible = len(rows)
            # A narrow filter rescores its rows alone; a broad one costs one product over every row.
            sims = self._matrix[rows] @ unit if len(rows) * 4 < self._rows else (self._matrix @ unit)[rows]
        else:
            eligible = self._rows
            candidates = self._projected.candidates(unit, limit) if self._projected is not None else None
            if candidates is None:
                sims = self._matrix @ unit
                rows = np.arange(len(sims))
            else:
                rows = candidates
                sims = self._matrix[rows] @ unit  # exact similarities of the candidates
        k = min(max(1, limit), len(sims))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
        # Best first; equal similarities in stored order, so results are deterministic.
        top = top[np.lexsort((rows[top], -sims[top]))]
        return [VectorHit(str(self._ids[rows[i]]), float(sims[i])) for i in top], eligible

    def search(
        self, vector: np.ndarray, limit: int, filters: ChunkFilters | None = None
    ) -> tuple[list[VectorHit], int | None]:
        """Top `limit` chunks by cosine similarity; the count of chunks passing the filters when cheap."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query vector has {query.shape[0]} dimensions, the index has {self.dim}")
        if self._quantized is not None:
            q = self._quantized
            norm = float(np.linalg.norm(query))
            unit = query / norm if norm > 0 else query
            mask = q.filter_mask(filters) if filters is not None and filters.active else None
            rows, sims, eligible = q.search(unit, limit, mask)
            pairs = zip(q.chunk_ids(rows), sims.tolist(), strict=True)
            return [VectorHit(chunk_id, float(v)) for chunk_id, v in pairs], eligible
        where = filter_sql(filters)
        if self._matrix is not None:
            return self._search_in_memory(query, limit, filters if where is not None else None)
        search = self._table.search(query, vector_column_name="vector").distance_type("cosine")
        if self._ann:
            # The HNSW stage returns limit x refine_factor candidates, and its ef must be at least that.
            search = search.nprobes(20).ef(max(HNSW_EF, limit * REFINE_FACTOR)).refine_factor(REFINE_FACTOR)
        if where:
            search = search.where(where, prefilter=True)
        table = search.limit(max(1, limit)).select(["chunk_id", "_distance"]).to_arrow()
        ids = table.column("chunk_id").to_pylist()
        distances = table.column("_distance").to_numpy()
        hits = [VectorHit(cid, float(1.0 - d)) for cid, d in zip(ids, distances, strict=True)]
        total = self._rows if not where else int(self._table.count_rows(where))
        return hits, total

    def vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored (unit-length) vectors of these chunks; unknown ids are left out."""
        if not chunk_ids:
            return {}
        if self._quantized is not None:
            found = {cid: self._quantized.vector(cid) for cid in chunk_ids}
            return {cid: v for cid, v in found.items() if v is not None}
        if self._matrix is not None:
            return {cid: self._matrix[self._row[cid]] for cid in chunk_ids if cid in self._row}
        table = (
            self._table.search()
            .where(f"chunk_id IN ({sql_list(list(chunk_ids))})")
            .select(["chunk_id", "vector"])
            .limit(len(chunk_ids))
            .to_arrow()
        )
        ids, matrix = _ids_and_vectors(table, self.dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)  # float16 rows are unit length only nearly
        matrix = matrix / np.where(norms > 0, norms, 1.0)
        return {cid: matrix[i] for i, cid in enumerate(ids)}


@dataclass(frozen=True, slots=True)
class ProjectedScan:
    """The first stage of a two-stage in-memory search: every vector projected on the leading principal
    components of the vectors (fitted on a fixed sample when the index loads, so the same vectors always give
    the same projection). A query's projection ranks all rows cheaply; the best candidates are then
    rescored with their full vectors, so every returned similarity is exact and only the candidate set is
    approximate (recall against the exact search: benchmarks/docs/tables.md, "In-memory vector search").
    """

    mean: np.ndarray  # dim
    basis: np.ndarray  # dim x dims, orthonormal columns
    projected: np.ndarray  # rows x dims: (vector - mean) @ basis

    @classmethod
    def fit(cls, matrix: np.ndarray, dims: int, sample: int = 20_000, seed: int = 0) -> ProjectedScan:
        rng = np.random.default_rng(seed)
        rows = matrix[np.sort(rng.choice(len(matrix), size=min(len(matrix), sample), replace=False))]
        mean = rows.mean(axis=0)
        centred = (rows - mean).astype(np.float64)
        _values, vectors = np.linalg.eigh(centred.T @ centred)  # ascending eigenvalues
        basis = np.ascontiguousarray(vectors[:, ::-1][:, :dims], dtype=np.float32)
        projected = np.concatenate(
            [(matrix[i : i + 16384] - mean) @ basis for i in range(0, len(matrix), 16384)]
        )
        return cls(mean.astype(np.float32), basis, np.ascontiguousarray(projected, dtype=np.float32))

    def candidates(self, unit: np.ndarray, limit: int) -> np.ndarray | None:
        """Rows to rescore for `limit` results, in stored order; None: rescore every row (a page so deep that
        the candidates would be most of the index anyway)."""
        want = max(PROJECTED_CANDIDATES, PROJECTED_PER_RESULT * max(1, limit))
        if want * 2 > len(self.projected):
            return None
        # q . (x - mean) ranks rows as q . x does (q . mean is the same for every row).
        approx = self.projected @ (unit @ self.basis)
        return np.sort(np.argpartition(-approx, want - 1)[:want])


def _ids_and_vectors(table: pa.Table, dim: int) -> tuple[list[str], np.ndarray]:
    """Chunk ids and their vectors (rows x dim float32) from an Arrow table with those two columns."""
    flat = table.column("vector").combine_chunks().values.to_numpy(zero_copy_only=False)
    return table.column("chunk_id").to_pylist(), np.asarray(flat, dtype=np.float32).reshape(-1, dim)
