"""Graph retrieval: query entities -> personalised PageRank over the entity graph -> chunks, entities, communities.

The transition matrix is built once per index version as a CSR matrix (networkx's pagerank rebuilds it on
every call, seconds at 100k nodes); a query costs a few sparse mat-vecs. Chunks are scored by the PageRank
mass of the entities they mention; entities by their own mass; communities (for global / hybrid queries) by
the cosine similarity of the query to their embedded report.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from hybridrag.indexing.analyzers import ENGLISH_STOPWORDS, Analyzer
from hybridrag.indexing.entities import normalize_name
from hybridrag.indexing.filters import ChunkFilters
from hybridrag.indexing.graph import Community, Entity, GraphData, Relation
from hybridrag.indexing.tables import Chunk
from hybridrag.indexing.text import has_japanese
from hybridrag.pipeline.retrievers import Candidate, RetrievalQuery, Retrieved

DAMPING = 0.85
ITERATIONS = 30
MAX_NGRAM = 6
ENTITY_RESULTS = 3
PATH_HOPS = 3
PATH_VISITS = 5000
COMMUNITY_RESULTS = 3
_WORDS = re.compile(r"[\w\-’'.]+")


@dataclass(slots=True)
class GraphIndex:
    """The loaded graph with its precomputed matrices and lookups."""

    entities: list[Entity]
    relations: list[Relation]
    communities: list[Community]
    community_vectors: np.ndarray | None
    names: dict[str, list[int]]
    transition_t: sparse.csr_matrix  # P transposed, P = D^-1 A
    incidence: sparse.csr_matrix  # chunks x entities
    chunk_ids: list[str]
    chunk_index: dict[str, int]  # chunk id -> row of `incidence`
    entity_index: dict[str, int]
    community_of: dict[str, str]
    relations_of: dict[str, list[str]]
    entities_of_chunk: dict[str, list[str]]
    relation_chunks: dict[str, frozenset[str]]
    community_by_id: dict[str, Community]
    neighbours: list[list[tuple[int, str]]]  # entity -> (neighbour entity, relation id), strongest first

    @classmethod
    def load(cls, folder: Path, chunk_order: list[str]) -> GraphIndex:
        graph, vectors = GraphData.load(folder)
        n = len(graph.entities)
        index = {e.id: i for i, e in enumerate(graph.entities)}
        names: dict[str, list[int]] = {}
        for i, e in enumerate(graph.entities):
            for form in {normalize_name(e.name), *(normalize_name(a) for a in e.aliases)}:
                names.setdefault(form, []).append(i)
        rows = [index[r.source] for r in graph.relations] + [index[r.target] for r in graph.relations]
        cols = [index[r.target] for r in graph.relations] + [index[r.source] for r in graph.relations]
        weights = [float(r.count) for r in graph.relations] * 2
        adjacency = sparse.csr_matrix((weights, (rows, cols)), shape=(n, n))
        out_weight = np.asarray(adjacency.sum(axis=1)).ravel()
        inv = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=out_weight > 0)
        transition = sparse.diags(inv) @ adjacency
        chunk_pos = {cid: i for i, cid in enumerate(chunk_order)}
        inc_rows, inc_cols = [], []
        for i, e in enumerate(graph.entities):
            for cid in e.chunk_ids:
                if cid in chunk_pos:
                    inc_rows.append(chunk_pos[cid])
                    inc_cols.append(i)
        incidence = sparse.csr_matrix(
            (np.ones(len(inc_rows)), (inc_rows, inc_cols)), shape=(len(chunk_order), n)
        )
        community_of = {eid: c.id for c in graph.communities for eid in c.entity_ids}
        relations_of: dict[str, list[str]] = {}
        for r in sorted(graph.relations, key=lambda r: (-r.count, r.id)):
            relations_of.setdefault(r.source, []).append(r.id)
            relations_of.setdefault(r.target, []).append(r.id)
        entities_of_chunk: dict[str, list[str]] = {}
        for e in sorted(graph.entities, key=lambda e: (-e.mentions, e.id)):
            for cid in e.chunk_ids:
                entities_of_chunk.setdefault(cid, []).append(e.id)
        neighbours: list[list[tuple[int, str]]] = [[] for _ in range(n)]
        for r in sorted(graph.relations, key=lambda r: (-r.count, r.id)):
            neighbours[index[r.source]].append((index[r.target], r.id))
            neighbours[index[r.target]].append((index[r.source], r.id))
        return cls(
            graph.entities,
            graph.relations,
            graph.communities,
            vectors,
            names,
            sparse.csr_matrix(transition.T),
            incidence,
            chunk_order,
            chunk_pos,
            index,
            community_of,
            relations_of,
            entities_of_chunk,
            {r.id: frozenset(r.chunk_ids) for r in graph.relations},
            {c.id: c for c in graph.communities},
            neighbours,
        )

    def match(self, text: str, analyzer: Analyzer, extra: tuple[str, ...] = ()) -> list[int]:
        """Entities named in the query: every word n-gram (or morpheme run) that is an entity name or alias."""
        text = unicodedata.normalize("NFKC", text)
        if has_japanese(text):
            words = [s for s, _n, _p, _b, _e in analyzer.japanese.morphemes(text)]
            joiner = ""
        else:
            words = [w.strip(".'’") for w in _WORDS.findall(text)]
            joiner = " "
        found: dict[int, None] = {}
        for i in range(len(words)):
            for j in range(i + 1, min(len(words), i + MAX_NGRAM) + 1):
                form = normalize_name(joiner.join(words[i:j]))
                if j == i + 1 and (form in ENGLISH_STOPWORDS or len(form) < 2):
                    continue
                for idx in self.names.get(form, ()):
                    found[idx] = None
        for name in extra:
            for idx in self.names.get(normalize_name(name), ()):
                found[idx] = None
        return list(found)

    def pagerank(self, seeds: list[int]) -> np.ndarray:
        """Personalised PageRank; a seed's restart weight is its specificity (1 / chunks mentioning it)."""
        n = len(self.entities)
        p = np.zeros(n)
        for s in seeds:
            p[s] = 1.0 / max(1, len(self.entities[s].chunk_ids))
        p /= p.sum()
        r = p.copy()
        for _ in range(ITERATIONS):
            nxt = (1 - DAMPING) * p + DAMPING * (self.transition_t @ r)
            # Mass of entities with no edges returns to the seeds (keeps r a distribution).
            nxt += (1.0 - nxt.sum()) * p
            if np.abs(nxt - r).sum() < 1e-8:
                r = nxt
                break
            r = nxt
        return r


@dataclass(frozen=True, slots=True)
class GraphTrace:
    """What the walk of one query was: its seed entities and the PageRank mass it left on each entity."""

    seeds: tuple[int, ...]
    mass: np.ndarray

    def path_to_entity(self, graph: GraphIndex, target: int) -> list[tuple[int, str | None]]:
        """A shortest chain of relations from a seed to `target`: [(seed, None), (entity, relation id), ...].

        Breadth-first over the relation graph, neighbours in order of the mass the walk gave them, so the
        chain shown is one the walk actually weighted; at most `PATH_HOPS` relations and `PATH_VISITS`
        entities are looked at, so a path costs microseconds even around hub entities.
        """
        if target in self.seeds:
            return [(target, None)]
        parent: dict[int, tuple[int, str]] = {}
        frontier = sorted(self.seeds, key=lambda s: -self.mass[s])
        seen = set(frontier)
        for _ in range(PATH_HOPS):
            nxt: list[int] = []
            for node in frontier:
                for neighbour, relation in graph.neighbours[node]:
                    if neighbour in seen or self.mass[neighbour] <= 0:
                        continue
                    seen.add(neighbour)
                    parent[neighbour] = (node, relation)
                    if neighbour == target:
                        chain: list[tuple[int, str | None]] = []
                        at: int = target
                        while at in parent:
                            prev, rel = parent[at]
                            chain.append((at, rel))
                            at = prev
                        chain.append((at, None))
                        return chain[::-1]
                    nxt.append(neighbour)
                    if len(seen) >= PATH_VISITS:
                        return []
            frontier = sorted(nxt, key=lambda s: -self.mass[s])
        return []

    def path(self, graph: GraphIndex, item_id: str) -> list[dict[str, Any]]:
        """The walk that reached a graph result, seed first: entities (with the relation that led to each),
        then the chunk itself for a chunk. Empty when no chain within reach explains it."""
        if item_id in graph.entity_index:
            target, chunk_id = graph.entity_index[item_id], None
        elif item_id in graph.chunk_index:
            row = graph.incidence.getrow(graph.chunk_index[item_id])
            if row.nnz == 0:
                return []
            target = int(row.indices[np.argmax(self.mass[row.indices])])
            chunk_id = item_id
        else:
            return []
        steps: list[dict[str, Any]] = []
        for position, (idx, relation) in enumerate(self.path_to_entity(graph, target)):
            e = graph.entities[idx]
            step: dict[str, Any] = {"id": e.id, "type": "entity", "name": e.name, "entityType": e.type}
            if position == 0:
                step["seed"] = True
            else:
                step["relationId"] = relation
            steps.append(step)
        if steps and chunk_id is not None:
            steps.append({"id": chunk_id, "type": "chunk", "via": steps[-1]["id"]})
        return steps


def _seconds(value: datetime | None) -> float:
    """Naive-UTC datetime -> seconds since the epoch (NaN for none), without any local-time conversion."""
    return float("nan") if value is None else (value - _EPOCH).total_seconds()


_EPOCH = datetime(1970, 1, 1)


class GraphRetriever:
    """Personalised PageRank from the query's entities; communities for global questions."""

    name = "graph"

    def __init__(
        self,
        graph: GraphIndex,
        chunks: Mapping[str, Chunk],
        chunk_dates: Mapping[str, datetime | None],
        analyzer: Analyzer,
    ) -> None:
        self.graph = graph
        self._analyzer = analyzer
        # Per-chunk columns aligned with graph.chunk_ids, so filters are one vectorised mask per query
        # rather than a Python call per matching chunk (tens of thousands at 100k chunks).
        ids = graph.chunk_ids
        files = sorted({chunks[c].file_id for c in ids if c in chunks})
        self._file_code = {f: i for i, f in enumerate(files)}
        self._file_codes = np.array([self._file_code[chunks[c].file_id] if c in chunks else -1 for c in ids])
        self._by_type: dict[str, np.ndarray] = {}
        for i, cid in enumerate(ids):
            for t in chunks[cid].entity_types if cid in chunks else ():
                self._by_type.setdefault(t, np.zeros(len(ids), dtype=bool))[i] = True
        self._seconds = np.array([_seconds(chunk_dates.get(c)) for c in ids], dtype=np.float64)

    def _mask(self, filters: ChunkFilters) -> np.ndarray:
        """Which chunk positions pass the filters: the rules of the keyword and vector stores (a file id or
        chunk id listed, a mention of a listed entity type, a date inside the range; no date fails a range)."""
        n = len(self.graph.chunk_ids)
        mask = np.ones(n, dtype=bool)
        if filters.file_ids is not None:
            codes = [self._file_code[f] for f in filters.file_ids if f in self._file_code]
            mask &= np.isin(self._file_codes, codes)
        if filters.chunk_ids is not None:
            wanted = np.zeros(n, dtype=bool)
            wanted[[self.graph.chunk_index[c] for c in filters.chunk_ids if c in self.graph.chunk_index]] = (
                True
            )
            mask &= wanted
        if filters.entity_types is not None:
            typed = np.zeros(n, dtype=bool)
            for t in filters.entity_types:
                if t in self._by_type:
                    typed |= self._by_type[t]
            mask &= typed
        if filters.date_start is not None or filters.date_end is not None:
            dated = ~np.isnan(self._seconds)
            if filters.date_start is not None:
                dated &= self._seconds >= _seconds(filters.date_start)
            if filters.date_end is not None:
                dated &= self._seconds <= _seconds(filters.date_end)
            mask &= dated
        return mask

    def _passes(self, chunk_ids: list[str], mask: np.ndarray) -> bool:
        position = self.graph.chunk_index
        return any(mask[position[c]] for c in chunk_ids if c in position)

    def retrieve(self, query: RetrievalQuery, limit: int) -> Retrieved:
        g = self.graph
        filters = query.filters
        chunk_hits: list[Candidate] = []
        entity_hits: list[Candidate] = []
        community_hits: list[Candidate] = []
        notes: list[str] = []
        seeds = g.match(query.text, self._analyzer, query.entities)
        total = 0
        mask = self._mask(filters) if filters.active else None
        trace = None
        if seeds:
            mass = g.pagerank(seeds)
            trace = GraphTrace(tuple(seeds), mass)
            chunk_scores = g.incidence @ mass
            top = float(chunk_scores.max()) if len(chunk_scores) else 0.0
            eligible = chunk_scores > 0
            if mask is not None:
                eligible &= mask
            positions = np.flatnonzero(eligible)
            total += len(positions)
            # Best first; ties keep index order (a stable sort of ascending positions).
            best_first = positions[np.argsort(-chunk_scores[positions], kind="stable")[:limit]]
            for pos in best_first:
                score = float(chunk_scores[pos])
                chunk_hits.append(Candidate(g.chunk_ids[pos], score, score / top if top > 0 else 0.0))
            entity_order = np.argsort(-mass, kind="stable")
            best = float(mass[entity_order[0]])
            added = 0
            for pos in entity_order:
                if added >= ENTITY_RESULTS or mass[pos] <= 0:
                    break
                e = g.entities[pos]
                if filters.entity_types is not None and e.type not in filters.entity_types:
                    continue
                if mask is not None and not self._passes(e.chunk_ids, mask):
                    continue
                entity_hits.append(Candidate(e.id, float(mass[pos]), float(mass[pos]) / best))
                added += 1
                total += 1
        else:
            notes.append("no entity of the query was found in the graph")
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
                c = g.communities[pos]
                if mask is not None and not self._passes(c.chunk_ids, mask):
                    continue
                sim = float(sims[pos])
                community_hits.append(Candidate(c.id, sim, min(1.0, max(0.0, sim))))
                added += 1
                total += 1
        # Chunks lead (they answer local questions); the query's entities follow the first few chunks;
        # community reports lead for global questions.
        ordered = chunk_hits[:10] + entity_hits + chunk_hits[10:]
        ordered = community_hits + ordered if query.query_type == "global" else ordered + community_hits
        return Retrieved(ordered[:limit], total, notes, trace)
