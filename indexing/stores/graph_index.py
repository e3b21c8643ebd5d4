"""The graph's reader: its matrices and lookups over the memory-mapped arrays (`graph_arrays`), with lazy
views that read an entity, relation, community or name from its row when asked for.

Node i < len(entities) is entity i; node len(entities) + j is the chunk at row j of the chunk order (the chunk
table's own lookups, or the graph's own order when writes since left it behind). `GraphIndex.load` maps the arrays a build wrote, or derives them from the JSON record
(graph.json.gz) of a version written before them. The walk over it lives in `pipeline.graph_walk`, the retriever in
`pipeline.graph_retriever`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS, Analyzer
from hybridrag.indexing.analysis.entities import normalize_name
from hybridrag.indexing.analysis.text import reads_as_japanese
from hybridrag.indexing.stores.csr import row_lengths
from hybridrag.indexing.stores.graph import Community, Entity, GraphData
from hybridrag.indexing.stores.graph_arrays import FOLDER as ARRAYS
from hybridrag.indexing.stores.graph_arrays import GraphArrays
from hybridrag.indexing.stores.graph_order import ChunkOrder, ListOrder, table_rows
from hybridrag.indexing.stores.mapped import take_pylist
from hybridrag.indexing.stores.memory_maps import Mappings

ENTITY_MATCH_TOP = 3
ENTITY_MATCH_MIN = 0.88  # query vector . entity name vector, for a match by meaning
MAX_NGRAM = 6
_WORDS = re.compile(r"[\w\-’'.]+")


class _Entities:
    """`graph.entities`: an entity by node number, read from its row when asked for."""

    def __init__(self, arrays: GraphArrays) -> None:
        self._arrays = arrays

    def __len__(self) -> int:
        return self._arrays.entity_count

    def __getitem__(self, row: int) -> Entity:
        return self._arrays.entity(int(row))


class _ByEntity:
    """`graph.entity_index` (its node number), `graph.community_of` and `graph.relations_of`: per entity
    id, read from the arrays."""

    def __init__(self, arrays: GraphArrays, read: Any) -> None:
        self._arrays = arrays
        self._read = read

    def get(self, entity_id: str, default: Any = None) -> Any:
        row = self._arrays.entity_row(entity_id)
        if row is None:
            return default
        value = self._read(row)
        return default if value is None else value

    def __contains__(self, entity_id: object) -> bool:
        return isinstance(entity_id, str) and self.get(entity_id) is not None

    def __getitem__(self, entity_id: str) -> Any:
        value = self.get(entity_id)
        if value is None:
            raise KeyError(entity_id)
        return value


class _EdgeRelation:
    """`graph.edge_relation`: (lower, higher) entity node pair -> relation id."""

    def __init__(self, arrays: GraphArrays) -> None:
        self._arrays = arrays

    def get(self, pair: tuple[int, int], default: str | None = None) -> str | None:
        row = self._arrays.relation_between(*pair)
        return default if row is None else self._arrays.relation_ids(np.array([row]))[0]

    def __contains__(self, pair: object) -> bool:
        return isinstance(pair, tuple) and self._arrays.relation_between(*pair) is not None

    def __getitem__(self, pair: tuple[int, int]) -> str:
        found = self.get(pair)
        if found is None:
            raise KeyError(pair)
        return found


class _RelationChunks:
    """`graph.relation_chunks`: relation id -> the chunks its co-occurrences are in."""

    def __init__(self, arrays: GraphArrays) -> None:
        self._arrays = arrays

    def get(self, relation_id: str, default: frozenset[str] = frozenset()) -> frozenset[str]:
        row = self._arrays.relation_row(relation_id)
        if row is None:
            return default
        return frozenset(self._arrays.relations.column("chunk_ids")[row].as_py() or ())


class _Communities:
    """`graph.communities` (a report by position) and `graph.community_by_id`, read from their rows."""

    def __init__(self, arrays: GraphArrays) -> None:
        self._arrays = arrays

    def __len__(self) -> int:
        return self._arrays.communities.num_rows

    def __getitem__(self, key: int | str) -> Community:
        row = key if isinstance(key, int) else self._arrays.community_row(key)
        if row is None:
            raise KeyError(key)
        return self._arrays.community(int(row))

    def __contains__(self, community_id: object) -> bool:
        return isinstance(community_id, str) and self._arrays.community_row(community_id) is not None


class _SynonymPairs:
    def __init__(self, arrays: GraphArrays) -> None:
        self._arrays = arrays

    def __contains__(self, pair: object) -> bool:
        return isinstance(pair, tuple) and self._arrays.is_synonym_edge(*pair)


@dataclass(slots=True)
class GraphIndex:
    """The loaded graph: its matrices and lookups over memory-mapped arrays (`graph_arrays`), with views
    that read an entity, relation or name from its row when asked for."""

    arrays: GraphArrays
    chunks: ChunkOrder
    community_vectors: np.ndarray | None
    entity_vectors: np.ndarray | None
    entities: _Entities
    entity_index: _ByEntity
    community_of: _ByEntity
    relations_of: _ByEntity
    edge_relation: _EdgeRelation
    relation_chunks: _RelationChunks
    synonym_pairs: _SynonymPairs
    communities: _Communities
    community_by_id: _Communities
    #: Per chunk node: its row in the chunk table, -1 once deleted; None when the graph follows the table.
    table_rows: np.ndarray | None = None
    #: Per chunk node: whether its chunk is still in the table (None: all are).
    live: np.ndarray | None = None
    #: Per table ("entities", "communities"): the chunk node of each id in its chunk dictionary (-1: none),
    #: made on first use.
    _dictionary_nodes: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def load(
        cls, folder: Path, chunk_order: ChunkOrder | Sequence[str], maps: Mappings | None = None
    ) -> GraphIndex:
        """Map `folder/arrays` (through `maps` when given); a version written before them derives the same
        arrays in memory from its JSON record. `chunk_order`: the chunk table's. A graph built for another
        version of the table (a write left it behind) keeps its own order: `table_rows` then maps its chunk
        nodes to the table's rows and `live` says which are still there."""
        order: ChunkOrder = ListOrder(chunk_order) if isinstance(chunk_order, Sequence) else chunk_order
        mapped = folder / ARRAYS
        rows: np.ndarray | None = None
        if GraphArrays.present(mapped):
            arrays = GraphArrays.open(mapped, maps)
            own = GraphArrays.chunk_order(mapped, maps)
            if own is not None:
                if len(own) != arrays.chunk_count:
                    raise ValueError(f"the graph lists {len(own)} chunks for {arrays.chunk_count} nodes")
                rows = table_rows(own, order)
                # Built for this table: its rows, deleted ones counted, are the graph's chunk nodes.
                if len(own) == order.row_count and np.array_equal(rows, np.arange(len(own))):
                    rows = None
                else:
                    order = own
            elif arrays.chunk_count != len(order):
                raise ValueError(
                    f"the graph was built for {arrays.chunk_count} chunks, the table holds {len(order)}"
                )
            vectors = GraphData.load_community_vectors(folder)
        else:
            graph, vectors = GraphData.load(folder)
            arrays = GraphArrays.derive(graph, order)
        entity_vectors = GraphData.load_entity_vectors(folder)
        if entity_vectors is not None and len(entity_vectors) != arrays.entity_count:
            raise ValueError("entity_vectors.npy does not match the graph's entities")
        return cls(
            arrays,
            order,
            vectors,
            entity_vectors,
            _Entities(arrays),
            _ByEntity(arrays, lambda row: row),
            _ByEntity(arrays, arrays.community_of),
            _ByEntity(arrays, lambda row: arrays.relation_ids(arrays.relations_of(row))),
            _EdgeRelation(arrays),
            _RelationChunks(arrays),
            _SynonymPairs(arrays),
            _Communities(arrays),
            _Communities(arrays),
            rows,
            None if rows is None else rows >= 0,
        )

    @property
    def lagging(self) -> bool:
        """Whether the graph was built for another version of the chunk table (a merge brings it up)."""
        return self.table_rows is not None

    @property
    def neighbours(self) -> sparse.csr_matrix:
        """Each node's neighbours, heaviest edge first (`GraphArrays.neighbours`: read indices and indptr)."""
        return self.arrays.neighbours

    @property
    def transition(self) -> sparse.csr_matrix:
        """P = D^-1 A by rows (from-node), each row heaviest edge first."""
        return self.arrays.transition

    @property
    def entity_rank(self) -> np.ndarray:
        return self.arrays.entity_rank

    @property
    def relation_count(self) -> int:
        return self.arrays.relations.num_rows

    @property
    def node_count(self) -> int:
        return self.arrays.entity_count + len(self.chunks)

    def chunk_node(self, chunk_id: str) -> int | None:
        row = self.chunks.row(chunk_id)
        return None if row is None else self.arrays.entity_count + row

    def chunk_count_of(self, entity: int) -> int:
        """How many chunks mention the entity (its specificity in the walk's restart)."""
        return int(self.arrays.entity_chunks[entity])

    def entity_passes(self, entity: int, mask: np.ndarray) -> bool:
        """Whether a chunk that mentions the entity passes the chunk mask (its chunk neighbours)."""
        a, ne = self.neighbours, self.arrays.entity_count
        neighbours = np.asarray(a.indices[a.indptr[entity] : a.indptr[entity + 1]])
        chunks = neighbours[neighbours >= ne] - ne
        return bool(mask[chunks].any())

    def community_passes(self, community: int, mask: np.ndarray) -> bool:
        """Whether one of the community's chunks passes the chunk mask (`chunk_nodes`)."""
        nodes = self.chunk_nodes("communities", community)
        return bool(mask[nodes[nodes >= 0]].any())

    def entity_table_rows(self, entity: int) -> np.ndarray:
        """The chunk table's row of each chunk that mentions the entity, in its row's order (-1: a chunk
        the table no longer holds)."""
        nodes = self.chunk_nodes("entities", entity)
        if self.table_rows is None:
            return nodes
        return np.where(nodes >= 0, self.table_rows[np.maximum(nodes, 0)], -1)

    def chunk_nodes(self, table: str, row: int) -> np.ndarray:
        """The chunk nodes of an entity's or community's chunks, in its row's order (-1: not a node). They
        are read as positions in the column's dictionary, mapped to chunk nodes once per loaded graph: a
        community of a million-chunk corpus lists up to 322,893 chunks and an entity 66,809, and looking
        their ids up as strings took a global search under a file filter to ~0.3-0.5 s."""
        codes = self.arrays.chunk_codes(table, row)
        nodes = self._dictionary_nodes.get(table)
        if codes is not None and nodes is None:
            dictionary = self.arrays.chunk_dictionary(table)
            if dictionary is not None:
                # Two searches may both make it: the same array, whichever is kept.
                nodes = self._dictionary_nodes[table] = self.chunks.rows(dictionary)
        if codes is None or nodes is None:
            return np.asarray(self.chunks.rows(self.arrays.row_chunk_ids(table, row)), dtype=np.int64)
        return nodes[codes]

    def sources_of(self, chunk_id: str, most: int = 20) -> tuple[list[str], str | None, list[str]]:
        """A passage's sources in the graph (see `sources_of_many`)."""
        return self.sources_of_many([chunk_id], most)[0]

    def sources_of_many(
        self, chunk_ids: Sequence[str], most: int = 20, rows: Sequence[int] | None = None
    ) -> list[tuple[list[str], str | None, list[str]]]:
        """Each passage's sources in the graph: its entities (most mentioned first, at most `most`), their
        most common community, and the relations among them whose co-occurrences include this passage.

        The relations come from the chunk's own list of evidenced relations (`chunk_relations`), not from
        each relation's list of chunks: a hub pair lists thousands of chunks at 100k. A page of results is
        answered together: one Arrow call per column for all its passages, not one per passage. `rows`: the
        chunks' rows in `self.chunks` when the caller has read them already (checked ids), else looked up.
        """
        arrays, a = self.arrays, self.neighbours
        ne = arrays.entity_count
        if rows is None:
            rows = self.chunks.rows(list(chunk_ids)).tolist()
        per_chunk: list[np.ndarray] = []
        evidenced: list[np.ndarray] = []
        for row in rows:
            if row < 0:
                per_chunk.append(np.zeros(0, dtype=np.int64))
                evidenced.append(np.zeros(0, dtype=np.int64))
                continue
            node = ne + int(row)
            neighbours = np.asarray(a.indices[a.indptr[node] : a.indptr[node + 1]])
            mentioned = neighbours[neighbours < ne]
            order = np.argsort(self.entity_rank[mentioned], kind="stable")
            per_chunk.append(mentioned[order][:most].astype(np.int64))
            lo, hi = arrays.chunk_relations_indptr[row], arrays.chunk_relations_indptr[row + 1]
            evidenced.append(np.asarray(arrays.chunk_relations_rows[lo:hi], dtype=np.int64))
        every = np.concatenate(per_chunk) if per_chunk else np.zeros(0, np.int64)
        ids = take_pylist(arrays.entities.column("id"), every)
        communities = take_pylist(arrays.entities.column("community"), every)
        kept_all, kept_counts = self._relations_among(per_chunk, evidenced, most)
        relation_ids = arrays.relation_ids(kept_all)
        out: list[tuple[list[str], str | None, list[str]]] = []
        e_at = r_at = 0
        for mine, kept in zip(per_chunk, kept_counts.tolist(), strict=True):
            found = [c for c in communities[e_at : e_at + len(mine)] if c is not None]
            counts = {c: found.count(c) for c in set(found)}
            community = min(counts, key=lambda c: (-counts[c], c)) if counts else None
            out.append(
                (
                    [str(x) for x in ids[e_at : e_at + len(mine)]],
                    community,
                    relation_ids[r_at : r_at + kept],
                )
            )
            e_at += len(mine)
            r_at += kept
        return out

    def _relations_among(
        self, per_chunk: Sequence[np.ndarray], evidenced: Sequence[np.ndarray], most: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Of each chunk's evidenced relations, those between two of its listed entities, in the order of a
        nested loop over the list (first entity, then second), at most `most` a chunk: the kept relation rows
        of every chunk in turn, and how many each chunk kept."""
        arrays = self.arrays
        ne = arrays.entity_count
        count = len(per_chunk)
        relations = np.concatenate(evidenced) if count else np.zeros(0, np.int64)
        entities = np.concatenate(per_chunk) if count else np.zeros(0, np.int64)
        if not len(relations) or not len(entities):
            return np.zeros(0, np.int64), np.zeros(count, np.int64)
        owner = np.repeat(np.arange(count, dtype=np.int64), [len(r) for r in evidenced])
        # Where each chunk's listed entities stand in its list, looked up by (chunk, entity) keys.
        listed = np.repeat(np.arange(count, dtype=np.int64), [len(m) for m in per_chunk]) * ne + entities
        position = np.concatenate([np.arange(len(m), dtype=np.int64) for m in per_chunk])
        by_key = np.argsort(listed, kind="stable")
        listed, position = listed[by_key], position[by_key]
        pairs = np.asarray(arrays.relation_pairs[relations], dtype=np.int64)

        def place(entity: np.ndarray) -> np.ndarray:
            key = owner * ne + entity
            at = np.minimum(np.searchsorted(listed, key), len(listed) - 1)
            return np.where(listed[at] == key, position[at], -1)

        first, second = place(pairs // ne), place(pairs % ne)
        among = (first >= 0) & (second >= 0)
        low, high = np.minimum(first, second)[among], np.maximum(first, second)[among]
        relations, owner = relations[among], owner[among]
        order = np.lexsort((high, low, owner))
        relations, owner = relations[order], owner[order]
        # The first `most` of each chunk: place within its chunk's run.
        starts = np.searchsorted(owner, np.arange(count, dtype=np.int64))
        within = np.arange(len(owner)) - starts[owner]
        keep = within < most
        return relations[keep], np.bincount(owner[keep], minlength=count)

    def entities_of(self, chunk_id: str) -> list[str]:
        """The entities the chunk mentions (its entity neighbours), most mentioned first."""
        node = self.chunk_node(chunk_id)
        if node is None:
            return []
        a = self.neighbours
        neighbours = np.asarray(a.indices[a.indptr[node] : a.indptr[node + 1]])
        mentioned = neighbours[neighbours < self.arrays.entity_count]
        return [self.arrays.entity_id(int(i)) for i in mentioned[np.argsort(self.entity_rank[mentioned])]]

    def match(self, text: str, analyzer: Analyzer, extra: tuple[str, ...] = ()) -> list[int]:
        """Entities named in the query: every word n-gram (or morpheme run) that is an entity name or alias."""
        return entities_named(self.arrays, text, analyzer, extra)

    def match_by_meaning(self, vector: np.ndarray | None) -> list[int]:
        """Entities whose embedded name is close to the query vector (an index built with name vectors)."""
        if vector is None or self.entity_vectors is None or not len(self.entity_vectors):
            return []
        sims = self.entity_vectors @ np.asarray(vector, dtype=np.float32)
        # Only the few names above the bar are sorted: a sort of every entity's similarity cost ~0.1 s a
        # search at a million entities.
        close = np.flatnonzero(sims >= ENTITY_MATCH_MIN)
        return close[np.argsort(-sims[close], kind="stable")][:ENTITY_MATCH_TOP].tolist()

    def edge_count(self, nodes: np.ndarray) -> int:
        """How many edges the given nodes have in all."""
        return int(row_lengths(self.neighbours.indptr, nodes).sum())


def name_forms_in(text: str, analyzer: Analyzer) -> list[str]:
    """Every word n-gram (up to `MAX_NGRAM`; morpheme runs in Japanese) of `text` as a normalised name form,
    each once, in order of appearance; single stopwords and one-letter words left out. A query is split
    as passages are read (`reads_as_japanese`): an English question quoting a Chinese name keeps its words."""
    text = unicodedata.normalize("NFKC", text)
    if reads_as_japanese(text):
        words = [s for s, _n, _p, _b, _e in analyzer.japanese.morphemes(text)]
        joiner = ""
    else:
        words = [w.strip(".'’") for w in _WORDS.findall(text)]
        joiner = " "
    forms: list[str] = []
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + MAX_NGRAM) + 1):
            form = normalize_name(joiner.join(words[i:j]))
            if j == i + 1 and (form in ENGLISH_STOPWORDS or len(form) < 2):
                continue
            forms.append(form)
    return list(dict.fromkeys(forms))


def entities_named(
    arrays: GraphArrays, text: str, analyzer: Analyzer, extra: Sequence[str] = ()
) -> list[int]:
    """The entity rows whose name or alias `text` spells (any letter case; `name_forms_in`), and those of
    the names in `extra`, in order of first appearance."""
    forms = name_forms_in(text, analyzer) + [normalize_name(name) for name in extra]
    found: dict[int, None] = {}
    for rows in arrays.named_many(list(dict.fromkeys(forms))):
        found.update(dict.fromkeys(rows))
    return list(found)
