"""Passages written after the graph was built, linked to its entities until a merge rebuilds it.

A write that leaves the graph behind (`builds.stages.VersionWrite._carry_graph`) links each passage it adds
to the base graph's entities (`builds.graph_build.delta_links`): those its mentions name and those whose names
its text spells in any letter case. The links of every write since the graph was built are kept together in
`graph/delta.arrow`, written anew by each write (its size follows the writes since the last merge, not the
corpus; a merge's graph starts without one). `GraphDelta` is what the service reads: each link with the two
weights a build gives the same mention (`graph_weights.mention_weights`), the share of the entity's
out-weight the passage would get once merged, and whether the edge would be among the heaviest `fanout` of
the entity's row (the walk pushes along no more: `pipeline.graph_walk`). How the walk uses it is
`pipeline.graph_retriever`'s.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather

from hybridrag.indexing.stores.csr import row_lengths, row_positions
from hybridrag.indexing.stores.filters import ChunkColumns
from hybridrag.indexing.stores.graph_arrays import GraphArrays
from hybridrag.indexing.stores.graph_index import GraphIndex
from hybridrag.indexing.stores.graph_order import ChunkOrder
from hybridrag.indexing.stores.graph_weights import TITLE_WEIGHT, mention_weights

DELTA = "delta.arrow"
#: One row per link; a passage that links to nothing keeps one row without an entity.
#: `key`: the normalised name of an entity the graph does not hold (the merge will make it), else null;
#: `about`: the passage's title names it; `article`: its whole title does (the build makes it an article).
DELTA_SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("entity_id", pa.string()),
        ("key", pa.string()),
        ("about", pa.bool_()),
        ("article", pa.bool_()),
    ]
)


def read_delta(graph_folder: Path) -> pa.Table:
    """The pending links of `graph_folder` (none when no write left the graph behind)."""
    path = graph_folder / DELTA
    if not path.is_file():
        return DELTA_SCHEMA.empty_table()
    return feather.read_table(path, memory_map=False)


def write_delta(graph_folder: Path, kept: pa.Table, added: pa.Table, removed: Sequence[str]) -> None:
    """`graph_folder`'s links made into `kept` less the passages in `removed`, then `added`. Written under
    a temporary name and renamed: the file is shared through hard links with the version being served."""
    if removed and kept.num_rows:
        gone = pc.is_in(kept.column("chunk_id"), value_set=pa.array(list(removed), pa.string()))
        kept = kept.filter(pc.invert(gone))
    table = pa.concat_tables([kept.cast(DELTA_SCHEMA), added.cast(DELTA_SCHEMA)])
    path = graph_folder / DELTA
    tmp = path.with_name(f".{path.name}.tmp")
    feather.write_feather(table, tmp, compression="uncompressed")
    os.replace(tmp, path)


@dataclass(frozen=True, slots=True)
class NewNames:
    """Names the delta's passages mention that the graph does not hold: each name (`index`, by its key)
    with its links in CSR form by name (`indptr`; per link its `passage`, the passage's `share` of the
    name's out-weight and the passage -> name weight `outward`), each weighed as a build would weigh the
    same mentions among the delta's passages (a name some passage's title names has an article)."""

    index: dict[str, int]
    indptr: np.ndarray
    passage: np.ndarray
    share: np.ndarray
    outward: np.ndarray

    def passages_of(self, name: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.indptr[name], self.indptr[name + 1]
        return self.passage[lo:hi], self.share[lo:hi]

    def of_passage(self, passage: int) -> tuple[np.ndarray, np.ndarray]:
        """The names a passage mentions and its weight to each."""
        at = np.flatnonzero(self.passage == passage)
        name = np.searchsorted(self.indptr, at, side="right") - 1
        return name, self.outward[at]

    def count(self, name: int) -> int:
        return int(self.indptr[name + 1] - self.indptr[name])


@dataclass(frozen=True, slots=True)
class GraphDelta:
    """The linked passages the graph does not hold, by position (0..len-1), and their links in CSR form.

    `ids`, `rows`: each passage's id and chunk-table row; `columns`: their filter columns. Per link (the
    passage's slice `indptr[i]:indptr[i + 1]`): the entity node, `share` (what the passage would get of the
    entity's out-weight once merged), `outward` (the passage -> entity weight), and whether the edge would
    be among the entity's heaviest `fanout` / `seed_fanout` edges (`within`, `within_seed`). `names`: the
    names they mention that the graph does not hold yet; `became`: entities that will have an article.
    """

    ids: list[str]
    rows: np.ndarray
    columns: ChunkColumns
    indptr: np.ndarray
    entity: np.ndarray
    share: np.ndarray
    outward: np.ndarray
    within: np.ndarray
    within_seed: np.ndarray
    index: dict[str, int]
    names: NewNames
    # Entities a new passage's whole title names that have no article in the graph yet, and their
    # out-weights: the merged graph's passages that mention them lead to them as to an article's.
    became: np.ndarray
    became_out: np.ndarray
    # Whether each passage has a link to the graph or to a new name.
    has_link: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def position(self, chunk_ids: Sequence[str]) -> np.ndarray:
        """Each id's position in the delta, -1 for a passage it does not hold."""
        return np.array([self.index.get(c, -1) for c in chunk_ids], dtype=np.int64)

    def linked(self, chunk_ids: Sequence[str]) -> np.ndarray:
        """Whether each id is a passage of the delta with a link to the graph or a new name (one without
        could be ranked only by what the merge adds)."""
        at = self.position(chunk_ids)
        return (at >= 0) & self.has_link[np.maximum(at, 0)]

    @property
    def linked_count(self) -> int:
        return int(self.has_link.sum())

    def entity_ids_of(self, graph: GraphIndex, at: int, most: int = 20) -> list[str]:
        """The graph's entities a passage is linked to, most mentioned first (its `sources` until a merge)."""
        linked = self.entity[self.indptr[at] : self.indptr[at + 1]]
        ranked = linked[np.argsort(graph.entity_rank[linked], kind="stable")][:most]
        return [graph.arrays.entity_id(int(e)) for e in ranked]

    def owner(self) -> np.ndarray:
        """Each link's passage position."""
        return np.repeat(np.arange(len(self.ids), dtype=np.int64), np.diff(self.indptr))

    @classmethod
    def load(
        cls,
        graph_folder: Path,
        graph: GraphIndex,
        table: ChunkOrder,
        table_columns: ChunkColumns,
        fanout: int,
        seed_fanout: int,
    ) -> GraphDelta | None:
        """The links of the passages the table holds and the graph does not (None: there are none)."""
        links = read_delta(graph_folder)
        if not links.num_rows:
            return None
        chunk_ids = links.column("chunk_id").to_pylist()
        unique = list(dict.fromkeys(chunk_ids))
        table_row = dict(zip(unique, np.asarray(table.rows(unique)).tolist(), strict=True))
        graph_rows = np.asarray(graph.chunks.rows(unique))
        held = graph_rows >= 0
        if graph.live is not None:
            held &= graph.live[np.maximum(graph_rows, 0)]
        pending = [c for c, h in zip(unique, held.tolist(), strict=True) if not h and table_row[c] >= 0]
        if not pending:
            return None
        position = {c: i for i, c in enumerate(pending)}
        arrays = graph.arrays
        at = np.array([position.get(c, -1) for c in chunk_ids], dtype=np.int64)
        entity_ids = links.column("entity_id").to_pylist()
        keys = links.column("key").to_pylist()
        # A passage without a link has a row without an entity, `about` and `article` null.
        abouts = np.asarray(links.column("about").fill_null(False).to_numpy(zero_copy_only=False), bool)
        flagged = np.asarray(links.column("article").fill_null(False).to_numpy(zero_copy_only=False), bool)
        entity_rows = _entity_rows(arrays, entity_ids)
        listed = (at >= 0) & np.array([e is not None for e in entity_ids], dtype=bool)
        in_graph = listed & (entity_rows >= 0)
        graph_links = list(
            zip(at[in_graph].tolist(), entity_rows[in_graph].tolist(), abouts[in_graph].tolist(), strict=True)
        )
        articles = set(entity_rows[in_graph & flagged].tolist())
        names: dict[str, int] = {}
        name_links: list[tuple[int, int, bool]] = []
        named_articles: set[int] = set()
        for n in np.flatnonzero(listed & (entity_rows < 0)).tolist():
            if keys[n] is None:
                continue
            name = names.setdefault(keys[n], len(names))
            name_links.append((int(at[n]), name, bool(abouts[n])))
            if flagged[n]:
                named_articles.add(name)
        owner, entity, about = _unique_links(graph_links)
        # Entities a new passage's whole title names that have no article yet: the merge makes them one.
        became = np.array(sorted(articles), dtype=np.int64)
        if len(became):
            had = arrays.entities.column("article").take(pa.array(became)).to_numpy(zero_copy_only=False)
            became = became[~np.asarray(had, dtype=bool)]
        share, outward, within, within_seed, became_out = _link_weights(
            graph, entity, about, became, (fanout, seed_fanout)
        )
        rows = np.array([table_row[c] for c in pending], dtype=np.int64)
        indptr = _indptr(owner, len(pending))
        new_names = _new_names(names, name_links, named_articles)
        has_link = np.diff(indptr) > 0
        has_link[new_names.passage] = True
        return cls(
            pending,
            rows,
            table_columns.take(rows),
            indptr,
            entity,
            share,
            outward,
            within,
            within_seed,
            position,
            new_names,
            became,
            became_out,
            has_link,
        )


def _entity_rows(arrays: GraphArrays, entity_ids: Sequence[str | None]) -> np.ndarray:
    """Each id's entity row in the graph, -1 for none (or no id)."""
    unique = list(dict.fromkeys(e for e in entity_ids if e is not None))
    by_id = dict(zip(unique, arrays.entity_rows(unique).tolist(), strict=True))
    return np.array([-1 if e is None else by_id[e] for e in entity_ids], dtype=np.int64)


def _unique_links(links: list[tuple[int, int, bool]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(passage, entity, about) of each link, sorted by passage then entity, each pair once (a title
    mention's `about` wins)."""
    owner = np.asarray([a for a, _e, _b in links], dtype=np.int64)
    entity = np.asarray([e for _a, e, _b in links], dtype=np.int64)
    about = np.asarray([b for _a, _e, b in links], dtype=bool)
    order = np.lexsort((~about, entity, owner))
    owner, entity, about = owner[order], entity[order], about[order]
    first = np.ones(len(owner), dtype=bool)
    first[1:] = (owner[1:] != owner[:-1]) | (entity[1:] != entity[:-1])
    return owner[first], entity[first], about[first]


def _indptr(owner: np.ndarray, count: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=count))]).astype(np.int64)


def _new_names(names: dict[str, int], links: list[tuple[int, int, bool]], articles: set[int]) -> NewNames:
    """The new names' passages by name, weighed by `graph_weights.mention_weights` as a build would weigh
    them among these passages (no relation yet; `articles`: names a passage's whole title spells)."""
    name, passage, about = _unique_links([(n, a, b) for a, n, b in links])  # by name, then passage
    article = np.zeros(len(names), dtype=bool)
    article[list(articles)] = True
    weight, outward = mention_weights(
        about, article[name], np.zeros(len(about), bool), np.ones(len(about)), 1
    )
    total = np.bincount(name, weights=weight, minlength=len(names))
    return NewNames(names, _indptr(name, len(names)), passage, weight / total[name], outward)


def _link_weights(
    graph: GraphIndex, entity: np.ndarray, about: np.ndarray, became: np.ndarray, fanouts: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per link: the passage's share of the entity's out-weight once merged, the passage -> entity weight,
    and whether the entity -> passage edge would be among the heaviest of each fanout; and the out-weights
    of `became` (linked entities that will have an article)."""
    arrays = graph.arrays
    ne, chunks = arrays.entity_count, len(graph.chunks)
    unique, back = np.unique(entity, return_inverse=True)
    heads = arrays.entities.select(["title_chunk_ids", "article", "concept"]).take(pa.array(unique))
    titled = np.asarray(
        pc.fill_null(pc.list_value_length(heads.column("title_chunk_ids")), 0), dtype=np.float64
    )
    article = np.asarray(heads.column("article").to_numpy(zero_copy_only=False), dtype=bool)
    article |= np.isin(unique, became)
    concept = np.asarray(heads.column("concept").to_numpy(zero_copy_only=False), dtype=bool)
    df = np.asarray(arrays.entity_chunks, dtype=np.float64)[unique]
    # An entity's out-weight: its edges to passages weigh 1 (or 1 + TITLE_WEIGHT to a passage its title
    # names), so their part of the row's normalised weights tells the whole.
    p = graph.transition
    positions = row_positions(p.indptr, unique)
    lengths = row_lengths(p.indptr, unique)
    values = np.asarray(p.data[positions], dtype=np.float64)
    to_passage = np.asarray(p.indices[positions], dtype=np.int64) >= ne
    owner = np.repeat(np.arange(len(unique)), lengths)
    passage_part = np.bincount(owner[to_passage], weights=values[to_passage], minlength=len(unique))
    weight_part = df + TITLE_WEIGHT * titled
    out_weight = np.divide(weight_part, passage_part, out=np.zeros_like(weight_part), where=passage_part > 0)
    to_chunk, outward = mention_weights(about, article[back], concept[back], df[back], chunks)
    out = out_weight[back]
    share = to_chunk / (out + to_chunk)
    starts = np.asarray(p.indptr[unique], dtype=np.int64)
    within: list[np.ndarray] = []
    for fanout in fanouts:
        # The entity's `fanout`-th heaviest weight (its row holds them heaviest first); ties lose, as a
        # passage written later takes a later node than the graph's.
        full = lengths >= fanout
        cut = np.zeros(len(unique))
        cut[full] = np.asarray(p.data[starts[full] + fanout - 1], dtype=np.float64) * out_weight[full]
        within.append(~full[back] | (to_chunk > cut[back]))
    return share, outward, within[0], within[1], out_weight[np.searchsorted(unique, became)]
