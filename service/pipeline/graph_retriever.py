"""Graph retrieval: personalised PageRank over one graph of entities *and* passages (HippoRAG 2's layout).

Nodes are the entities and the chunks. Edges: chunk–entity where a chunk mentions an entity (from the entity,
much heavier towards a chunk whose document title names it: that passage is what the entity is about; from
the chunk, the same to every entity it mentions), entity–entity for
stored relations (co-occurrence) and, when the index has them, synonym edges between near-identical names.

A query seeds the walk with every signal it has: the entities it names (by spelling, and by meaning when the
index stores entity name vectors; weighted by specificity, 1 / chunks mentioning them) and the top dense and
keyword passages (the semantic and keyword retrievers' own hits, handed over within the search, or the graph's
own seed searches when it runs alone; keyword's carry a quarter of the passage seeds' mass). The walk runs on the neighbourhood of the seeds within `WALK_HOPS` hops, hubs not
expanded, so a query costs the same at 10k and 100k chunks. Passages are ranked by the mass the walk brought
them beyond their own restart share: a second-hop passage that shares no word with the question is found
through the bridge entity the first passage mentions. Communities (global / hybrid questions) are ranked by
the cosine of the query to their embedded report. The constants were chosen on the dev sets together
(benchmarks/README.md) and are one setting for every corpus.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS, Analyzer
from hybridrag.indexing.analysis.entities import normalize_name
from hybridrag.indexing.analysis.text import has_japanese
from hybridrag.indexing.stores.csr import row_indices, row_lengths
from hybridrag.indexing.stores.filters import ChunkFilters
from hybridrag.indexing.stores.graph import Community, Entity, GraphData
from hybridrag.indexing.stores.graph_arrays import FOLDER as ARRAYS
from hybridrag.indexing.stores.graph_arrays import (
    ChunkOrder,
    GraphArrays,
    ListOrder,
)
from hybridrag.indexing.stores.mapped import take_pylist
from hybridrag.indexing.stores.mapping import Mappings
from hybridrag.indexing.stores.tables import Chunk
from hybridrag.pipeline.retrievers import Candidate, RetrievalQuery, Retrieved, Retriever

DAMPING = 0.7
ITERATIONS = 30
TOLERANCE = 1e-6
PASSAGE_SEEDS = 3  # top passages taken from each seeding retriever
SEEDERS = ("semantic", "keyword")
KEYWORD_SEED_SHARE = 0.25  # of the passage seeds' mass on keyword's top hits when semantic's are there too
PASSAGE_SHARE = 0.8  # of the restart mass on passage seeds when the query also names entities
PASSAGE_FLOOR = 0.2  # min-max scaled seed weights are floored so the last seed still counts
RESTART_KEPT = 0.1  # share of a seed passage's own restart mass left in its score
WALK_HOPS = 3
HUB = 50  # a node with more edges than this is reached but not expanded further
SEED_FANOUT = 500  # a seed expands along at most this many of its heaviest edges
ENTITY_MATCH_TOP = 3
ENTITY_MATCH_MIN = 0.88  # query vector . entity name vector, for a match by meaning
MAX_NGRAM = 6
ENTITY_RESULTS = 3
PATH_HOPS = 4
PATH_VISITS = 5000
COMMUNITY_RESULTS = 3
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
    """The loaded graph: its matrices and lookups over memory-mapped arrays (`indexing.graph_arrays`),
    with views that read an entity, relation or name from its row when asked for. Node i < len(entities) is
    entity i; node len(entities) + j is the chunk at row j of `chunks` (the chunk table's own lookups)."""

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

    @classmethod
    def load(
        cls, folder: Path, chunk_order: ChunkOrder | Sequence[str], maps: Mappings | None = None
    ) -> GraphIndex:
        """Map `folder/arrays` (through `maps` when given) when the build wrote it for this chunk order;
        otherwise (a version written before) derive the same arrays in memory from graph.json."""
        order: ChunkOrder = ListOrder(chunk_order) if isinstance(chunk_order, Sequence) else chunk_order
        mapped = folder / ARRAYS
        if GraphArrays.present(mapped):
            arrays = GraphArrays.open(mapped, maps)
            if arrays.chunk_count != len(order):
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
        )

    @property
    def adjacency(self) -> sparse.csr_matrix:
        return self.arrays.adjacency

    @property
    def transition_t(self) -> sparse.csr_matrix:
        return self.arrays.transition_t

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
        a, ne = self.adjacency, self.arrays.entity_count
        neighbours = np.asarray(a.indices[a.indptr[entity] : a.indptr[entity + 1]])
        chunks = neighbours[neighbours >= ne] - ne
        return bool(mask[chunks].any())

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
        arrays, a = self.arrays, self.adjacency
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
        a = self.adjacency
        neighbours = np.asarray(a.indices[a.indptr[node] : a.indptr[node + 1]])
        mentioned = neighbours[neighbours < self.arrays.entity_count]
        return [self.arrays.entity_id(int(i)) for i in mentioned[np.argsort(self.entity_rank[mentioned])]]

    def match(self, text: str, analyzer: Analyzer, extra: tuple[str, ...] = ()) -> list[int]:
        """Entities named in the query: every word n-gram (or morpheme run) that is an entity name or alias."""
        text = unicodedata.normalize("NFKC", text)
        if has_japanese(text):
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
        forms.extend(normalize_name(name) for name in extra)
        found: dict[int, None] = {}
        for rows in self.arrays.named_many(list(dict.fromkeys(forms))):
            found.update(dict.fromkeys(rows))
        return list(found)

    def match_by_meaning(self, vector: np.ndarray | None) -> list[int]:
        """Entities whose embedded name is close to the query vector (an index built with name vectors)."""
        if vector is None or self.entity_vectors is None or not len(self.entity_vectors):
            return []
        sims = self.entity_vectors @ np.asarray(vector, dtype=np.float32)
        top = np.argsort(-sims, kind="stable")[:ENTITY_MATCH_TOP]
        return [int(i) for i in top if sims[i] >= ENTITY_MATCH_MIN]

    def edge_count(self, nodes: np.ndarray) -> int:
        """How many edges the given nodes have in all."""
        return int(row_lengths(self.adjacency.indptr, nodes).sum())

    def neighbourhood(self, seeds: np.ndarray) -> np.ndarray:
        """The nodes within `WALK_HOPS` of the seeds (sorted): each seed along its `SEED_FANOUT` heaviest
        edges, then every reached node with at most `HUB` edges. Bounded by the seeds, not the corpus."""
        a = self.adjacency
        seen = np.zeros(self.node_count, dtype=bool)
        seen[seeds] = True
        reached: list[np.ndarray] = []
        for seed in seeds:
            lo, hi = a.indptr[seed], a.indptr[seed + 1]
            neighbours, weights = a.indices[lo:hi], a.data[lo:hi]
            if len(neighbours) > SEED_FANOUT:
                neighbours = neighbours[np.argsort(-weights, kind="stable")[:SEED_FANOUT]]
            reached.append(neighbours)
        frontier = np.unique(np.concatenate(reached)) if reached else np.zeros(0, dtype=np.int64)
        frontier = frontier[~seen[frontier]]
        seen[frontier] = True
        for hop in range(WALK_HOPS - 1):
            expand = frontier[row_lengths(a.indptr, frontier) <= HUB]
            if not len(expand):
                break
            neighbours = row_indices(a, expand)
            fresh = neighbours[~seen[neighbours]]
            seen[fresh] = True
            if hop < WALK_HOPS - 2:
                frontier = np.unique(fresh)
        return np.flatnonzero(seen)

    def walk(self, restart: dict[int, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Personalised PageRank restricted to the seeds' neighbourhood (mass leaving it is dropped).

        Returns (nodes, mass, restart vector) over the neighbourhood's nodes, in node order.
        """
        seeds = np.array(sorted(restart), dtype=np.int64)
        nodes = self.neighbourhood(seeds)
        sub = self.transition_t[nodes][:, nodes]
        p = np.zeros(len(nodes))
        p[np.searchsorted(nodes, seeds)] = [restart[int(s)] for s in seeds]
        p /= p.sum()
        r = p.copy()
        for _ in range(ITERATIONS):
            nxt = (1 - DAMPING) * p + DAMPING * (sub @ r)
            if np.abs(nxt - r).sum() < TOLERANCE:
                r = nxt
                break
            r = nxt
        return nodes, r, p


@dataclass(slots=True)
class GraphTrace:
    """What the walk of one query was: its seed nodes and the PageRank mass it left on each node."""

    seeds: tuple[int, ...]
    mass: np.ndarray  # over all nodes (entities, then chunks)
    # The breadth-first traversal behind `path`, advanced only as far as the results asked for so far.
    parents: dict[int, int] | None = None
    traversal: Iterator[int] | None = None
    # What the paths of this search have named so far (entity heads, chunk ids) by node: a page's paths
    # share their seeds and first hops, so each node is read once a search.
    named: dict[int, Any] = field(default_factory=dict)

    def _chain(self, graph: GraphIndex, target: int) -> list[int]:
        """A shortest chain of edges from a seed to `target` through nodes the walk reached, seeds first.

        Breadth-first from the seeds, neighbours in order of the mass the walk gave them (so a chain shown is
        one the walk weighted); at most `PATH_HOPS` edges and `PATH_VISITS` nodes. The traversal is shared by
        every result of the search and goes only as far as the results need: most are found within a few
        hundred nodes, so a page of paths costs about one traversal, not one each.
        """
        if target in self.seeds:
            return [target]
        if self.parents is None:
            self.parents = {}
            self.traversal = self._traverse(graph, self.parents)
        parent = self.parents
        while target not in parent and self.traversal is not None:
            if next(self.traversal, None) is None:
                self.traversal = None
        if target not in parent:
            return []
        chain = [target]
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        return chain[::-1]

    def _traverse(self, graph: GraphIndex, parent: dict[int, int]) -> Iterator[int]:
        """Records each node's parent as it is reached; yields each node whose neighbours it added."""
        a, mass = graph.adjacency, self.mass
        frontier = np.array(sorted(self.seeds, key=lambda s: -mass[s]), dtype=np.int64)
        seen = np.zeros(len(mass), dtype=bool)
        seen[frontier] = True
        visits = len(frontier)
        for _ in range(PATH_HOPS):
            reached: list[np.ndarray] = []
            for node in frontier.tolist():
                neighbours = a.indices[a.indptr[node] : a.indptr[node + 1]]
                neighbours = neighbours[(mass[neighbours] > 0) & ~seen[neighbours]]
                if not len(neighbours):
                    continue
                # Heaviest first (ties in node order); at least one, as a node-by-node walk adds one
                # before it checks the bound.
                neighbours = neighbours[np.argsort(-mass[neighbours], kind="stable")]
                neighbours = neighbours[: max(1, PATH_VISITS - visits)]
                seen[neighbours] = True
                parent.update(dict.fromkeys(neighbours.tolist(), node))
                reached.append(neighbours)
                visits += len(neighbours)
                yield node
                if visits >= PATH_VISITS:
                    return
            if not reached:
                return
            frontier = np.concatenate(reached).astype(np.int64)
            frontier = frontier[np.argsort(-mass[frontier], kind="stable")]

    def path(self, graph: GraphIndex, item_id: str, chunk_row: int | None = None) -> list[dict[str, Any]]:
        """The walk that reached a graph result, seed first: each step an entity or a passage, with the kind
        of edge that led to it (`mentions`, `relation` + relationId, `synonym`). Empty when no chain within
        reach explains it. `chunk_row`: the passage's row in `graph.chunks` when the caller has it."""
        ne = len(graph.entities)
        if chunk_row is not None:
            target = ne + chunk_row
        elif item_id in graph.entity_index:
            target = graph.entity_index[item_id]
        else:
            node = graph.chunk_node(item_id)
            if node is None:
                return []
            target = node
        chain = self._chain(graph, target)
        named = self.named
        entities = [n for n in dict.fromkeys(chain) if n < ne and n not in named]
        if entities:
            named.update(zip(entities, graph.arrays.entity_heads(entities), strict=True))
        for n in chain:  # one or two passages a path: a scalar read each is cheaper than a take
            if n >= ne and n not in named:
                named[n] = graph.chunks.id_at(n - ne)
        steps: list[dict[str, Any]] = []
        previous: int | None = None
        for node in chain:
            step: dict[str, Any]
            if node < ne:
                e = named[node]
                step = {"id": e["id"], "type": "entity", "name": e["name"], "entityType": e["type"]}
            else:
                step = {"id": named[node], "type": "chunk"}
            if previous is None:
                step["seed"] = True
            else:
                step["via"] = steps[-1]["id"]
                pair = (min(previous, node), max(previous, node))
                if node >= ne or previous >= ne:
                    step["edge"] = "mentions"
                elif pair in graph.edge_relation:
                    step["edge"] = "relation"
                    step["relationId"] = graph.edge_relation[pair]
                else:
                    step["edge"] = "synonym"
            steps.append(step)
            previous = node
        return steps


def _seconds(value: datetime | None) -> float:
    """Naive-UTC datetime -> seconds since the epoch (NaN for none), without any local-time conversion."""
    return float("nan") if value is None else (value - _EPOCH).total_seconds()


_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class ChunkColumns:
    """The filter columns of the graph's chunks, aligned with `GraphIndex.chunks`, so a filter is one
    vectorised mask per query: file ids as an Arrow column (mapped from the chunk table where it can be),
    one boolean array per entity type, dates as seconds (NaN for none)."""

    file_ids: pa.ChunkedArray
    by_type: dict[str, np.ndarray]
    seconds: np.ndarray

    @property
    def size(self) -> int:
        return len(self.seconds)

    def of_files(self, file_ids: Sequence[str]) -> np.ndarray:
        hit = pc.is_in(self.file_ids, value_set=pa.array(list(file_ids), pa.string()))
        return np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), dtype=bool)

    @classmethod
    def from_arrow(
        cls, file_ids: pa.ChunkedArray, entity_types: pa.ChunkedArray, dates: pa.ChunkedArray
    ) -> ChunkColumns:
        """From the chunk table's columns (`file_id`, `entity_types`, `date`), in its row order."""
        n = len(file_ids)
        types = entity_types.combine_chunks()
        flat = types.flatten()
        parents = pc.list_parent_indices(types).to_numpy(zero_copy_only=False)
        by_type: dict[str, np.ndarray] = {}
        for t in sorted(set(pc.unique(flat).to_pylist()) - {None}):
            column = np.zeros(n, dtype=bool)
            column[parents[np.asarray(pc.equal(flat, t).to_numpy(zero_copy_only=False), dtype=bool)]] = True
            by_type[t] = column
        micros = pc.cast(dates, pa.timestamp("us")).cast(pa.int64())
        seconds = pc.fill_null(pc.divide(pc.cast(micros, pa.float64()), 1e6), float("nan"))
        return cls(file_ids, by_type, np.asarray(seconds.to_numpy(), dtype=np.float64))

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
        return cls(
            pa.chunked_array([pa.array([c.file_id if c else None for c in found], pa.string())]),
            by_type,
            np.array([_seconds(dates.get(c)) for c in chunk_ids], dtype=np.float64),
        )


class GraphRetriever:
    """Personalised PageRank from the query's entities and top passages; communities for global questions.

    `seeders` are the retrievers that find seed passages when the search did not hand them over (the graph
    running alone): semantic (when the query has a vector) and keyword.
    """

    name = "graph"

    def __init__(
        self,
        graph: GraphIndex,
        columns: ChunkColumns,
        analyzer: Analyzer,
        seeders: Mapping[str, Retriever] | None = None,
    ) -> None:
        if columns.size != len(graph.chunks):
            raise ValueError(f"{columns.size} chunk columns for a graph of {len(graph.chunks)} chunks")
        self.graph = graph
        self._analyzer = analyzer
        self._seeders = dict(seeders or {})
        self._columns = columns

    def names_in(self, text: str) -> list[str]:
        """Names of the graph's entities that `text` spells (any letter case), longest first; a name inside
        a longer one found ("scott" in "scott derrickson") is left out."""
        g = self.graph
        found = g.match(text, self._analyzer)
        names = sorted({h["name"] for h in g.arrays.entity_heads(found)}, key=lambda n: (-len(n), n))
        kept: list[str] = []
        for name in names:
            words = f" {normalize_name(name)} "
            if not any(words in f" {normalize_name(k)} " for k in kept):
                kept.append(name)
        return kept

    def _mask(self, filters: ChunkFilters) -> np.ndarray:
        """Which chunk positions pass the filters: the rules of the keyword and vector stores (a file id or
        chunk id listed, a mention of a listed entity type, a date inside the range; no date fails a range)."""
        n = len(self.graph.chunks)
        columns = self._columns
        mask = np.ones(n, dtype=bool)
        if filters.file_ids is not None:
            mask &= columns.of_files(filters.file_ids)
        if filters.chunk_ids is not None:
            wanted = np.zeros(n, dtype=bool)
            rows = self.graph.chunks.rows(list(filters.chunk_ids))
            wanted[rows[rows >= 0]] = True
            mask &= wanted
        if filters.entity_types is not None:
            typed = np.zeros(n, dtype=bool)
            for t in filters.entity_types:
                if t in columns.by_type:
                    typed |= columns.by_type[t]
            mask &= typed
        if filters.date_start is not None or filters.date_end is not None:
            dated = ~np.isnan(columns.seconds)
            if filters.date_start is not None:
                dated &= columns.seconds >= _seconds(filters.date_start)
            if filters.date_end is not None:
                dated &= columns.seconds <= _seconds(filters.date_end)
            mask &= dated
        return mask

    def _passes(self, chunk_ids: list[str], mask: np.ndarray) -> bool:
        rows = self.graph.chunks.rows(chunk_ids)
        return bool(mask[rows[rows >= 0]].any())

    def seed_passages(self, query: RetrievalQuery) -> dict[str, list[tuple[str, float]]]:
        """The passages that seed the walk, by retriever, best first: those the search handed over, else the
        graph's own searches (semantic with the query's vector, and keyword)."""
        if query.seed_passages is not None:
            return {name: list(hits[:PASSAGE_SEEDS]) for name, hits in query.seed_passages.items()}
        out: dict[str, list[tuple[str, float]]] = {}
        for name in SEEDERS:
            seeder = self._seeders.get(name)
            if seeder is None or (name == "semantic" and query.vector is None):
                continue
            out[name] = [(c.id, c.raw_score) for c in seeder.retrieve(query, PASSAGE_SEEDS).candidates]
        return out

    def restart(self, query: RetrievalQuery) -> tuple[dict[int, float], list[str]]:
        """The walk's restart distribution over seed nodes, and notes on what seeded it."""
        g = self.graph
        notes: list[str] = []
        entities = dict.fromkeys(g.match(query.text, self._analyzer, query.entities))
        entities.update(dict.fromkeys(g.match_by_meaning(query.vector)))
        ne = len(g.entities)
        sources: dict[str, list[tuple[int, float]]] = {}
        for name, passages in self.seed_passages(query).items():
            rows = g.chunks.rows([c for c, _s in passages])
            sources[name] = [(ne + int(r), s) for r, (_c, s) in zip(rows, passages, strict=True) if r >= 0]
        sources = {name: hits for name, hits in sources.items() if hits}
        restart: dict[int, float] = {}
        if entities:
            weights = {e: 1.0 / max(1, g.chunk_count_of(e)) for e in entities}
            total = sum(weights.values())
            share = 1.0 - PASSAGE_SHARE if sources else 1.0
            restart.update({e: w / total * share for e, w in weights.items()})
        else:
            notes.append("no entity of the query was found in the graph")
        if sources:
            passage_mass = PASSAGE_SHARE if entities else 1.0
            shares = {"semantic": 1.0 - KEYWORD_SEED_SHARE, "keyword": KEYWORD_SEED_SHARE}
            total_share = sum(shares.get(name, 0.0) for name in sources) or 1.0
            for name, hits in sources.items():
                scores = np.array([s for _n, s in hits], dtype=np.float64)
                low, high = scores.min(), scores.max()
                scaled = (scores - low) / (high - low) if high > low else np.ones_like(scores)
                scaled = np.maximum(scaled, PASSAGE_FLOOR)
                share = passage_mass * shares.get(name, 0.0) / total_share
                for (node, _s), w in zip(hits, scaled / scaled.sum(), strict=True):
                    restart[node] = restart.get(node, 0.0) + float(w) * share
        return restart, notes

    def retrieve(self, query: RetrievalQuery, limit: int) -> Retrieved:
        g = self.graph
        ne = len(g.entities)
        filters = query.filters
        chunk_hits: list[Candidate] = []
        entity_hits: list[Candidate] = []
        community_hits: list[Candidate] = []
        restart, notes = self.restart(query)
        total = 0
        mask = self._mask(filters) if filters.active else None
        trace = None
        if restart and not g.edge_count(np.fromiter(restart, dtype=np.int64, count=len(restart))):
            # Seeds with no edge at all (text without entities: lower-cased or OCR collections): the walk
            # could only hand the other retrievers' passages back, and fusing that copy would just re-weigh
            # them. An empty list leaves the fusion as if the graph were off.
            notes.append("the query's passages mention no entity of the graph: nothing to walk")
            restart = {}
        if restart:
            nodes, mass, p = g.walk(restart)
            full = np.zeros(g.node_count)
            full[nodes] = mass
            trace = GraphTrace(tuple(sorted(restart)), full)
            is_chunk = nodes >= ne
            # A seed passage keeps only part of its restart share: the list ranks what the walk reached.
            chunk_scores = mass[is_chunk] - (1 - RESTART_KEPT) * (1 - DAMPING) * p[is_chunk]
            positions = nodes[is_chunk] - ne
            eligible = chunk_scores > 0
            if mask is not None:
                eligible &= mask[positions]
            chunk_scores, positions = chunk_scores[eligible], positions[eligible]
            total += len(positions)
            # Best first; ties keep chunk order (a stable sort of ascending positions).
            order = np.argsort(-chunk_scores, kind="stable")[:limit]
            top = float(chunk_scores[order[0]]) if len(order) else 0.0
            for chunk_id, score in zip(
                g.chunks.ids_at(positions[order].tolist()), chunk_scores[order].tolist(), strict=True
            ):
                chunk_hits.append(Candidate(chunk_id, score, score / top if top > 0 else 0.0))
            entity_mass = mass[~is_chunk]
            entity_nodes = nodes[~is_chunk]
            added = 0
            best = float(entity_mass.max()) if len(entity_mass) else 0.0
            ranked = np.argsort(-entity_mass, kind="stable")
            ranked = ranked[entity_mass[ranked] > 0]
            # Id and type only, a few rows a read (a hub entity's full row lists thousands of chunks).
            heads: list[dict[str, Any]] = []
            for n, i in enumerate(ranked.tolist()):
                if added >= ENTITY_RESULTS:
                    break
                if n == len(heads):
                    heads += g.arrays.entity_heads(entity_nodes[ranked[n : n + 2 * ENTITY_RESULTS]])
                head = heads[n]
                if filters.entity_types is not None and head["type"] not in filters.entity_types:
                    continue
                if mask is not None and not g.entity_passes(int(entity_nodes[i]), mask):
                    continue
                entity_hits.append(
                    Candidate(head["id"], float(entity_mass[i]), float(entity_mass[i]) / best, kind="entity")
                )
                added += 1
                total += 1
        if (
            query.query_type in ("global", "hybrid")
            and g.community_vectors is not None
            and query.vector is not None
        ):
            sims = g.community_vectors @ np.asarray(query.vector, dtype=np.float32)
            added = 0
            for pos in np.argsort(-sims, kind="stable"):
                if added >= COMMUNITY_RESULTS:
                    break
                c = g.communities[int(pos)]
                if mask is not None and not self._passes(c.chunk_ids, mask):
                    continue
                sim = float(sims[pos])
                community_hits.append(Candidate(c.id, sim, min(1.0, max(0.0, sim)), kind="community"))
                added += 1
                total += 1
        # Chunks lead (they answer local questions); the query's entities follow the first few chunks;
        # community reports lead for global questions.
        # The list keeps `limit` passages whatever else it holds: their evidence scale (fusion) then does not
        # depend on how many entities and reports came with them.
        ordered = chunk_hits[:10] + entity_hits + chunk_hits[10:]
        ordered = community_hits + ordered if query.query_type == "global" else ordered + community_hits
        return Retrieved(ordered, total, notes, trace, ratio_scores=True)
