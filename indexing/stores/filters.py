"""Filters in the index's own terms, and their one predicate, shared by every store.

`ChunkFilters` says which chunks may be returned; `filter_mask` is the predicate over a table of chunk columns
(chunk_id, file_id, date, entity_types), `filter_sql` its translation for LanceDB (tested against it on random
filters), `ChunkColumns` the same columns encoded once for the graph and the vector store's serving files
(its `mask` gives what `filter_mask` gives, without comparing every chunk's strings). The keyword store
states the same rules as tantivy clauses (`keyword._filter_query`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from hybridrag.indexing.stores.tables import Chunk


@dataclass(frozen=True, slots=True)
class ChunkFilters:
    """Which chunks may be returned. None means "no constraint"; an empty list matches nothing.

    Dates are naive UTC datetimes; a chunk without a date never passes a date constraint.
    """

    file_ids: Sequence[str] | None = None
    entity_types: Sequence[str] | None = None
    date_start: datetime | None = None
    date_end: datetime | None = None
    chunk_ids: Sequence[str] | None = None

    @property
    def active(self) -> bool:
        return any(
            v is not None
            for v in (self.file_ids, self.entity_types, self.date_start, self.date_end, self.chunk_ids)
        )


def sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def sql_list(values: Sequence[str]) -> str:
    return ", ".join(sql_str(v) for v in values)


def _sql_time(value: datetime) -> str:
    return f"timestamp '{value.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def filter_mask(columns: pa.Table, filters: ChunkFilters) -> np.ndarray:
    """Which rows of `columns` (chunk_id, file_id, date, entity_types) pass `filters`: the predicate of
    `filter_sql`, evaluated in memory (a row without a date fails any date bound, as NULL does in SQL)."""
    n = columns.num_rows
    mask = np.ones(n, dtype=bool)
    for name, values in (("file_id", filters.file_ids), ("chunk_id", filters.chunk_ids)):
        if values is not None:
            hit = pc.is_in(columns.column(name), value_set=pa.array(list(values), pa.string()))
            mask &= _bools(hit)
    if filters.entity_types is not None:
        types = columns.column("entity_types").combine_chunks()
        flat_hit = pc.is_in(types.flatten(), value_set=pa.array(list(filters.entity_types), pa.string()))
        parents = pc.list_parent_indices(types).to_numpy(zero_copy_only=False)
        any_type = np.zeros(n, dtype=bool)
        any_type[parents[_bools(flat_hit)]] = True
        mask &= any_type
    for bound, compare in ((filters.date_start, pc.greater_equal), (filters.date_end, pc.less_equal)):
        if bound is not None:
            passed = compare(columns.column("date"), pa.scalar(bound, pa.timestamp("us")))
            mask &= _bools(pc.fill_null(passed, False))
    return mask


def _bools(values: Any) -> np.ndarray:
    """An Arrow boolean array (without nulls) as a numpy bool array."""
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)


def filter_sql(filters: ChunkFilters | None) -> str | None:
    """The SQL predicate for the filters; an empty id list matches nothing, as in the keyword index."""
    if filters is None:
        return None
    parts = []
    if filters.file_ids is not None:
        parts.append(f"file_id IN ({sql_list(filters.file_ids)})" if filters.file_ids else "false")
    if filters.chunk_ids is not None:
        parts.append(f"chunk_id IN ({sql_list(filters.chunk_ids)})" if filters.chunk_ids else "false")
    if filters.entity_types is not None:
        if filters.entity_types:
            parts.append(f"array_has_any(entity_types, [{sql_list(filters.entity_types)}])")
        else:
            parts.append("false")
    if filters.date_start is not None:
        parts.append(f"date >= {_sql_time(filters.date_start)}")
    if filters.date_end is not None:
        parts.append(f"date <= {_sql_time(filters.date_end)}")
    return " AND ".join(parts) if parts else None


def parse_date(value: str | None) -> datetime | None:
    """A stored ISO date (a document's `date`) as the naive UTC datetime the stores compare."""
    if not value:
        return None
    return naive_utc(datetime.fromisoformat(value))


def naive_utc(value: datetime | None) -> datetime | None:
    """The form every store compares dates in: naive, UTC (an aware datetime is converted)."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def seconds_since_epoch(value: datetime | None) -> float:
    """Naive-UTC datetime -> seconds since the epoch (NaN for none), without any local-time conversion."""
    return float("nan") if value is None else (value - _EPOCH).total_seconds()


_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class ChunkColumns:
    """The filter columns of a store's chunks, in its row order, so a filter is one vectorised mask per
    query: file ids as codes into their distinct values (a file's chunks share one), one boolean array per
    entity type, dates as seconds (NaN for none). Comparing a request's file ids with every chunk's string
    (1M chunks: ~8 ms a search) or its types with every chunk's list of strings (50-165 ms) is what this
    replaces: the distinct file ids are compared, and the chunks' codes looked up."""

    file_codes: np.ndarray  # int32: each row's position in `file_names`, -1 for none
    file_names: pa.Array  # the distinct file ids (strings)
    by_type: dict[str, np.ndarray]
    seconds: np.ndarray

    @property
    def size(self) -> int:
        return len(self.seconds)

    def mask(self, filters: ChunkFilters, chunk_rows: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """Which rows pass `filters`: `filter_mask`'s predicate over these precomputed columns (a file id or
        chunk id listed, a mention of a listed entity type, a date inside the range; no date fails a range).
        `chunk_rows`: the rows of chunk ids (-1 for an unknown id)."""
        n = self.size
        mask = np.ones(n, dtype=bool)
        if filters.file_ids is not None:
            mask &= self.of_files(filters.file_ids)
        if filters.chunk_ids is not None:
            wanted = np.zeros(n, dtype=bool)
            rows = chunk_rows(list(filters.chunk_ids))
            wanted[rows[rows >= 0]] = True
            mask &= wanted
        if filters.entity_types is not None:
            typed = np.zeros(n, dtype=bool)
            for t in filters.entity_types:
                if t in self.by_type:
                    typed |= self.by_type[t]
            mask &= typed
        if filters.date_start is not None or filters.date_end is not None:
            dated = ~np.isnan(self.seconds)
            if filters.date_start is not None:
                dated &= self.seconds >= seconds_since_epoch(filters.date_start)
            if filters.date_end is not None:
                dated &= self.seconds <= seconds_since_epoch(filters.date_end)
            mask &= dated
        return mask

    def take(self, rows: np.ndarray) -> ChunkColumns:
        """These columns at `rows` (another order of the same chunks: a graph built for an earlier table)."""
        rows = np.asarray(rows, dtype=np.int64)
        return ChunkColumns(
            self.file_codes[rows],
            self.file_names,
            {t: column[rows] for t, column in self.by_type.items()},
            self.seconds[rows],
        )

    def of_files(self, file_ids: Sequence[str]) -> np.ndarray:
        """Which rows come from one of `file_ids`."""
        return self._listed(file_ids)[self.file_codes]

    def in_files(self, rows: np.ndarray, file_ids: Sequence[str]) -> np.ndarray:
        """Whether each of `rows` comes from one of `file_ids` (False for a row < 0: none)."""
        rows = np.asarray(rows, dtype=np.int64)
        codes = np.where(rows >= 0, self.file_codes[np.maximum(rows, 0)], -1)
        return self._listed(file_ids)[codes]

    def _listed(self, file_ids: Sequence[str]) -> np.ndarray:
        """Whether each distinct file id is listed, with one more slot (last, never listed) that a row
        without a file id (code -1) reads."""
        listed = pc.is_in(self.file_names, value_set=pa.array(list(file_ids), pa.string()))
        return np.append(_bools(pc.fill_null(listed, False)), False)

    @classmethod
    def from_arrow(
        cls, file_ids: pa.ChunkedArray | pa.Array, entity_types: pa.ChunkedArray, dates: pa.ChunkedArray
    ) -> ChunkColumns:
        """From the chunk table's columns (`file_id`, `entity_types`, `date`), in its row order."""
        n = len(file_ids)
        files = _encoded(file_ids)
        types = entity_types.combine_chunks()
        named = _encoded(types.flatten())
        # Each flattened value's row: its list's position repeated by the list's length (a null list: 0).
        parents = np.repeat(np.arange(n, dtype=np.int64), np.diff(types.offsets.to_numpy()))
        flat_codes = _codes(named)
        by_type: dict[str, np.ndarray] = {}
        for position, t in enumerate(named.dictionary.to_pylist()):
            if t is None:
                continue
            column = np.zeros(n, dtype=bool)
            column[parents[flat_codes == position]] = True
            by_type[t] = column
        by_type = dict(sorted(by_type.items()))
        micros = pc.cast(dates, pa.timestamp("us")).cast(pa.int64()).combine_chunks()
        seconds = np.asarray(pc.fill_null(micros, 0).to_numpy(zero_copy_only=False), dtype=np.float64) / 1e6
        if micros.null_count:
            seconds[_bools(micros.is_null())] = np.nan
        return cls(_codes(files), files.dictionary, by_type, seconds)

    @classmethod
    def from_chunks(
        cls, chunk_ids: Sequence[str], chunks: Mapping[str, Chunk], dates: Mapping[str, datetime | None]
    ) -> ChunkColumns:
        """From chunk objects (a table written before chunk dates were stored; a chunk id it lacks passes
        no file, type or date filter)."""
        found = [chunks.get(c) for c in chunk_ids]
        by_type: dict[str, np.ndarray] = {}
        for i, chunk in enumerate(found):
            for t in chunk.entity_types if chunk is not None else ():
                by_type.setdefault(t, np.zeros(len(found), dtype=bool))[i] = True
        files = _encoded(pa.array([c.file_id if c else None for c in found], pa.string()))
        return cls(
            _codes(files),
            files.dictionary,
            by_type,
            np.array([seconds_since_epoch(dates.get(c)) for c in chunk_ids], dtype=np.float64),
        )


def _encoded(values: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """`values` dictionary-encoded as one array (chunks combined first, so the dictionary is one)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    encoded: pa.DictionaryArray = pc.dictionary_encode(values)
    return encoded


def _codes(encoded: pa.DictionaryArray) -> np.ndarray:
    """The codes of a dictionary-encoded array as int32, -1 where the value was null."""
    indices = encoded.indices if not encoded.null_count else pc.fill_null(encoded.indices, -1)
    return np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int32)
