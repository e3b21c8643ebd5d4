"""One filter predicate: `filter_mask` over chunk columns, its SQL translation run by LanceDB, and the graph's
precomputed `ChunkColumns.mask` agree on random filters (ids listed or not, empty lists, any entity type,
open and closed date ranges, rows without a date)."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from hybridrag.indexing.stores.filters import ChunkColumns, ChunkFilters, filter_mask, filter_sql

N = 300
TYPES = ["person", "place", "organization", "other"]


def _columns(seed: int = 3) -> pa.Table:
    rng = random.Random(seed)
    return pa.table(
        {
            "chunk_id": [f"c{i}" for i in range(N)],
            "file_id": [f"f{rng.randrange(8)}.md" for _ in range(N)],
            "date": pa.array(
                [
                    datetime(1990 + rng.randrange(30), 1 + rng.randrange(12), 1)
                    if rng.random() < 0.7
                    else None
                    for _ in range(N)
                ],
                pa.timestamp("us"),
            ),
            "entity_types": [sorted(rng.sample(TYPES, rng.randrange(3))) for _ in range(N)],
        }
    )


def _random_filters(rng: random.Random) -> ChunkFilters:
    def maybe(values: list[str], k: int) -> list[str] | None:
        roll = rng.random()
        if roll < 0.5:
            return None
        if roll < 0.6:
            return []
        return rng.sample(values, min(k, len(values))) + (["missing"] if rng.random() < 0.3 else [])

    start = datetime(1990 + rng.randrange(30), 1, 1) if rng.random() < 0.4 else None
    end = datetime(1995 + rng.randrange(30), 6, 30) if rng.random() < 0.4 else None
    return ChunkFilters(
        file_ids=maybe([f"f{i}.md" for i in range(8)], 3),
        entity_types=maybe([*TYPES, "no-such-type"], 2),
        date_start=start,
        date_end=end,
        chunk_ids=maybe([f"c{i}" for i in range(N)], 40),
    )


def test_sql_and_precomputed_columns_agree_with_the_predicate(tmp_path: Path) -> None:
    import lancedb

    table = _columns()
    db = lancedb.connect(str(tmp_path / "db"))
    lance = db.create_table("chunks", table)
    columns = ChunkColumns.from_arrow(
        table.column("file_id"), table.column("entity_types"), table.column("date")
    )
    # The same columns read in several chunks (a mapped table's record batches) encode the same.
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=37))
    in_chunks = ChunkColumns.from_arrow(
        chunked.column("file_id"), chunked.column("entity_types"), chunked.column("date")
    )
    row = {f"c{i}": i for i in range(N)}

    def rows(ids: list[str]) -> np.ndarray:
        return np.array([row.get(i, -1) for i in ids], dtype=np.int64)

    def reversed_rows(ids: list[str]) -> np.ndarray:
        found = rows(ids)
        return np.where(found >= 0, N - 1 - found, -1)

    rng = random.Random(11)
    checked = 0
    for _ in range(150):
        filters = _random_filters(rng)
        expected = filter_mask(table, filters)
        assert columns.mask(filters, rows).tolist() == expected.tolist(), filters
        assert in_chunks.mask(filters, rows).tolist() == expected.tolist(), filters
        assert columns.take(np.arange(N)[::-1]).mask(filters, reversed_rows).tolist() == (
            expected[::-1].tolist()
        )
        where = filter_sql(filters)
        query = lance.search().select(["chunk_id"]).limit(N + 1)
        if where is not None:
            query = query.where(where)
        found = set(query.to_arrow().column("chunk_id").to_pylist())
        assert found == {f"c{i}" for i in np.flatnonzero(expected)}, (filters, where)
        checked += int(expected.any()) + int(not expected.all())
    assert checked > 100  # the random filters both keep and drop rows
