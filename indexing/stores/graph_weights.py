"""How the graph's walk weighs each edge: the matrices of personalised PageRank over entities and passages.

Edges: entity-entity for relations (`RELATION_WEIGHT` per co-occurring sentence) and synonyms; passage-entity
for mentions, in both directions with their own weights (an entity leads mostly to the passages about it, a
passage mostly to the entities that have an article elsewhere, concepts as `concepts` says). The transition
matrix is the adjacency normalised by each node's out-weight.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from scipy import sparse

from hybridrag.indexing.stores.csr import index_type
from hybridrag.indexing.stores.graph import GraphData
from hybridrag.indexing.stores.graph_order import ChunkOrder, list_rows

RELATION_WEIGHT = 0.3  # an entity-entity co-occurrence, per sentence, against one mention edge
TITLE_WEIGHT = 10.0  # added to the edge between an entity and a passage whose title names it
# Added to the edge from a passage to an entity that has an article in the corpus (a document whose whole
# title is its name) when the passage's own title does not name it: the bridge to the next hop (chosen on the
# dev sets, benchmarks/README.md, "Constants"; corpora without articles are unaffected).
ARTICLE_WEIGHT = 10.0
SYNONYM_WEIGHT = 1.0  # times the name cosine
# The step from a passage to a concept is (idf / the largest idf) ** this: specific concepts carry the walk,
# common ones barely (benchmarks/README.md, "Constants").
CONCEPT_SPECIFICITY_POWER = 3.0


def walk_matrices(
    graph: GraphData, index: dict[str, int], order: ChunkOrder, entities: pa.Table
) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """The walk's transition matrix over entities then chunks (each row heaviest edge first:
    `heaviest_first`), each relation's pair key (in relation order) and the sorted pair keys of synonym
    edges. `entities`: the graph's entity table (`_mention_edges`). Every edge is added in both directions
    (a mention as passage -> entity and entity -> passage, with their own weights), so a node's row holds
    all of its neighbours: the graph's structure."""
    ne = len(graph.entities)
    rows: list[int] = []
    cols: list[int] = []
    weights: list[float] = []

    def both_ways(a: int, b: int, weight: float) -> int:
        """Add the edge a-b in both directions; its pair key."""
        rows.extend((a, b))
        cols.extend((b, a))
        weights.extend((weight, weight))
        return min(a, b) * ne + max(a, b)

    pair_keys = [
        both_ways(index[r.source], index[r.target], RELATION_WEIGHT * r.count) for r in graph.relations
    ]
    synonym_keys = [
        both_ways(index[s.source], index[s.target], SYNONYM_WEIGHT * s.similarity) for s in graph.synonyms
    ]
    entity, chunk, to_entity, to_chunk = _mention_edges(entities, order)
    n = ne + len(order)
    # The edges' rows and columns in the index type scipy keeps (`csr.index_type`): given as int64, it made
    # int32 copies beside them. With the product below, this was the peak of a large build's last
    # steps (two edges a mention: ~50M at a million chunks).
    itype = index_type(n)
    data = np.concatenate([np.asarray(weights, dtype=np.float64), to_entity, to_chunk])
    del to_entity, to_chunk
    entity, chunk = entity.astype(itype), chunk.astype(itype)
    row = np.concatenate([np.asarray(rows, dtype=itype), chunk, entity])
    col = np.concatenate([np.asarray(cols, dtype=itype), entity, chunk])
    del entity, chunk
    directed = sparse.csr_matrix((data, (row, col)), shape=(n, n))  # duplicates add up
    del data, row, col
    out_weight = np.asarray(directed.sum(axis=1)).ravel()
    inv = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=out_weight > 0)
    # Each row divided by its out-weight in place: the product with a diagonal matrix it replaces made a
    # second matrix (the same values: one multiplication each, and it too dropped any that came out 0).
    directed.data *= np.repeat(inv, np.diff(directed.indptr))
    directed.eliminate_zeros()
    transition = heaviest_first(directed)
    keys = np.asarray(pair_keys, dtype=np.int64)
    return transition, keys, np.sort(np.asarray(synonym_keys, dtype=np.int64))


def heaviest_first(matrix: sparse.csr_matrix) -> sparse.csr_matrix:
    """The same matrix with each row's entries ordered by weight, heaviest first (ties by column): the walk
    pushes along a prefix of each row (`pipeline.graph_walk`)."""
    m = sparse.csr_matrix(matrix)
    # Canonical after this: each row's entries in column order, which the stable sort below keeps among
    # equal weights (a third key for the column sorted 52M entries at 1M chunks in 19 s, this in 11 s).
    m.sum_duplicates()
    # The keys live for the sort alone, each row's number in the matrix' own index type.
    rows = np.arange(m.shape[0], dtype=m.indices.dtype)
    order = np.lexsort((-m.data, np.repeat(rows, np.diff(m.indptr))))
    out = sparse.csr_matrix((m.data[order], m.indices[order], m.indptr.copy()), shape=m.shape)
    out.has_sorted_indices = False  # ordered by weight, not by column: scipy must not "sort" them
    return out


def _mention_edges(
    entities: pa.Table, order: ChunkOrder
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every mention as an edge between its entity and its chunk's node: (entity, chunk node, weight from
    the chunk, weight from the entity). `entities`: the graph's entity table with its chunk ids
    dictionary-encoded (`graph_arrays.shared_strings`), read as arrays. Chunks the table does not hold are
    left out."""
    ne = entities.num_rows
    lengths, at = list_rows(entities.column("chunk_ids"), order)
    mention_entity = np.repeat(np.arange(ne, dtype=np.int64), lengths)
    # A mention is about its entity when its chunk is one of the entity's titled chunks: (entity, chunk row)
    # pairs compared as one integer each.
    title_lengths, title_at = list_rows(entities.column("title_chunk_ids"), order)
    title_entity = np.repeat(np.arange(ne, dtype=np.int64), title_lengths)
    width = order.row_count + 1  # above every chunk row
    titled = title_entity[title_at >= 0] * width + title_at[title_at >= 0]
    kept = at >= 0
    entity = mention_entity[kept]
    about = np.isin(entity * width + at[kept], titled)
    chunk = ne + at[kept]
    df = np.bincount(entity, minlength=ne).astype(np.float64)
    flags = {
        name: entities.column(name).to_numpy(zero_copy_only=False).astype(bool)[entity]
        for name in ("article", "concept")
    }
    to_chunk, to_entity = mention_weights(about, flags["article"], flags["concept"], df[entity], len(order))
    return entity, chunk, to_entity, to_chunk


def mention_weights(
    about: np.ndarray, article: np.ndarray, concept: np.ndarray, df: np.ndarray, chunks: int
) -> tuple[np.ndarray, np.ndarray]:
    """The two weights of each mention's edge: (entity -> passage, passage -> entity), for mentions whose
    passage's title names the entity (`about`), of entities with an article or that are concepts, each
    entity mentioned by `df` of the graph's `chunks` passages. A graph's build and the links of passages
    written after it (`graph_delta`) weigh alike."""
    # Entity -> passage: mostly to the passages about it (title), so a bridge entity leads to its own
    # article. Passage -> entity: mostly to the entities with an article that the passage's own title
    # does not name, the bridges; alike to the others (a corpus without articles walks as before).
    to_chunk = 1.0 + TITLE_WEIGHT * about
    to_entity = 1.0 + ARTICLE_WEIGHT * (article & ~about)
    # From a passage, a concept weighs by how specific it is (its idf over the largest, cubed): a phrase a
    # few passages share leads somewhere, one many share spreads the walk thin; names keep their weight.
    most = np.log1p(max(1, chunks))
    concept_weight = (np.log1p(chunks / np.maximum(df, 1.0)) / most) ** CONCEPT_SPECIFICITY_POWER
    return to_chunk, np.where(concept, concept_weight, to_entity)
