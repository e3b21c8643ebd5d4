"""Graph retrieval: personalised PageRank over one graph of entities *and* passages (HippoRAG 2's layout).

Nodes are the entities and the chunks. Edges: chunk–entity where a chunk mentions an entity (from the entity,
much heavier towards a chunk whose document title names it: that passage is what the entity is about; from
the chunk, the same to every entity it mentions), entity–entity for
stored relations (co-occurrence) and, when the index has them, synonym edges between near-identical names.

A query seeds the walk with every signal it has: the entities it names (by spelling, and by meaning when the
index stores entity name vectors; weighted by specificity, 1 / chunks mentioning them) and the top dense and
keyword passages (the semantic and keyword retrievers' own hits, handed over within the search, or the graph's
own seed searches when it runs alone; keyword's carry a quarter of the passage seeds' mass). The walk is
a local push from the seeds (`graph_walk`), bounded by a tolerance and a fanout per node, so a query's cost
follows the mass its seeds spread, not the corpus. Passages are ranked by the mass the walk brought
them beyond their own restart share: a second-hop passage that shares no word with the question is found
through the bridge entity the first passage mentions. Communities (global / hybrid questions) are ranked by
the cosine of the query to their embedded report. The constants were chosen on the dev sets together
(benchmarks/README.md) and are one setting for every corpus.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import normalize_name
from hybridrag.indexing.stores.filters import ChunkColumns, ChunkFilters
from hybridrag.indexing.stores.graph_index import GraphIndex
from hybridrag.pipeline.graph_trace import GraphTrace
from hybridrag.pipeline.graph_walk import DAMPING, Scratch, walk
from hybridrag.pipeline.retrievers import Candidate, RetrievalQuery, Retrieved, Retriever

PASSAGE_SEEDS = 3  # top passages taken from each seeding retriever
SEEDERS = ("semantic", "keyword")
KEYWORD_SEED_SHARE = 0.25  # of the passage seeds' mass on keyword's top hits when semantic's are there too
PASSAGE_SHARE = 0.8  # of the restart mass on passage seeds when the query also names entities
PASSAGE_FLOOR = 0.2  # min-max scaled seed weights are floored so the last seed still counts
RESTART_KEPT = 0.1  # share of a seed passage's own restart mass left in its score
ENTITY_RESULTS = 3
COMMUNITY_RESULTS = 3


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
        self._scratch = Scratch(graph.node_count)

    def names_in(self, text: str) -> list[str]:
        """Names of the graph's entities that `text` spells (any letter case), longest first; a name inside
        a longer one found ("scott" in "scott derrickson") is left out."""
        g = self.graph
        found = g.match(text, self._analyzer)
        # Names only: a concept is a phrase of the corpus, not something the query names.
        heads = g.arrays.entity_heads(found)
        names = sorted({h["name"] for h in heads if not h["concept"]}, key=lambda n: (-len(n), n))
        kept: list[str] = []
        for name in names:
            words = f" {normalize_name(name)} "
            if not any(words in f" {normalize_name(k)} " for k in kept):
                kept.append(name)
        return kept

    def _mask(self, filters: ChunkFilters) -> np.ndarray | None:
        """The chunk nodes a result may be: those passing the filters and still in the table (None: all)."""
        live = self.graph.live
        if not filters.active:
            return live
        mask = self._columns.mask(filters, self.graph.chunks.rows)
        return mask if live is None else mask & live

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
        filters = query.filters
        restart, notes = self.restart(query)
        mask = self._mask(filters)
        chunk_hits: list[Candidate] = []
        entity_hits: list[Candidate] = []
        trace = None
        if restart and not g.edge_count(np.fromiter(restart, dtype=np.int64, count=len(restart))):
            # Seeds with no edge at all (text without entities: lower-cased or OCR collections): the walk
            # could only hand the other retrievers' passages back, and fusing that copy would just re-weigh
            # them. An empty list leaves the fusion as if the graph were off.
            notes.append("the query's passages mention no entity of the graph: nothing to walk")
            restart = {}
        matched = 0
        if restart:
            nodes, mass, p = walk(g, restart, self._scratch)
            full = np.zeros(g.node_count)
            full[nodes] = mass
            trace = GraphTrace(tuple(sorted(restart)), full)
            chunk_hits, matched = self._passages(nodes, mass, p, mask, limit)
            entity_hits = self._entities(nodes, mass, filters, mask)
        community_hits = self._communities(query, mask)
        total = matched + len(entity_hits) + len(community_hits)
        # Chunks lead (they answer local questions); the query's entities follow the first few chunks;
        # community reports lead for global questions.
        # The list keeps `limit` passages whatever else it holds: their evidence scale (fusion) then does not
        # depend on how many entities and reports came with them.
        ordered = chunk_hits[:10] + entity_hits + chunk_hits[10:]
        ordered = community_hits + ordered if query.query_type == "global" else ordered + community_hits
        return Retrieved(ordered, total, notes, trace, ratio_scores=True)

    def _passages(
        self, nodes: np.ndarray, mass: np.ndarray, p: np.ndarray, mask: np.ndarray | None, limit: int
    ) -> tuple[list[Candidate], int]:
        """The passages the walk reached, by the mass it brought them beyond their restart share (at most
        `limit`), and how many passed the filters."""
        g = self.graph
        ne = len(g.entities)
        is_chunk = nodes >= ne
        # A seed passage keeps only part of its restart share: the list ranks what the walk reached.
        chunk_scores = mass[is_chunk] - (1 - RESTART_KEPT) * (1 - DAMPING) * p[is_chunk]
        positions = nodes[is_chunk] - ne
        eligible = chunk_scores > 0
        if mask is not None:
            eligible &= mask[positions]
        chunk_scores, positions = chunk_scores[eligible], positions[eligible]
        # Best first; ties keep chunk order (a stable sort of ascending positions).
        order = np.argsort(-chunk_scores, kind="stable")[:limit]
        top = float(chunk_scores[order[0]]) if len(order) else 0.0
        hits = [
            Candidate(chunk_id, score, score / top if top > 0 else 0.0)
            for chunk_id, score in zip(
                g.chunks.ids_at(positions[order].tolist()), chunk_scores[order].tolist(), strict=True
            )
        ]
        return hits, len(positions)

    def _entities(
        self, nodes: np.ndarray, mass: np.ndarray, filters: ChunkFilters, mask: np.ndarray | None
    ) -> list[Candidate]:
        """The `ENTITY_RESULTS` entities the walk gave the most mass that pass the filters."""
        g = self.graph
        is_entity = nodes < len(g.entities)
        entity_mass, entity_nodes = mass[is_entity], nodes[is_entity]
        best = float(entity_mass.max()) if len(entity_mass) else 0.0
        ranked = np.argsort(-entity_mass, kind="stable")
        ranked = ranked[entity_mass[ranked] > 0]
        # Id and type only, a few rows a read (a hub entity's full row lists thousands of chunks).
        heads: list[dict[str, Any]] = []
        hits: list[Candidate] = []
        for n, i in enumerate(ranked.tolist()):
            if len(hits) >= ENTITY_RESULTS:
                break
            if n == len(heads):
                heads += g.arrays.entity_heads(entity_nodes[ranked[n : n + 2 * ENTITY_RESULTS]])
            head = heads[n]
            if filters.entity_types is not None and head["type"] not in filters.entity_types:
                continue
            if mask is not None and not g.entity_passes(int(entity_nodes[i]), mask):
                continue
            score = float(entity_mass[i])
            hits.append(Candidate(head["id"], score, score / best, kind="entity"))
        return hits

    def _communities(self, query: RetrievalQuery, mask: np.ndarray | None) -> list[Candidate]:
        """For global and hybrid questions, the `COMMUNITY_RESULTS` reports closest to the query."""
        g = self.graph
        if (
            query.query_type not in ("global", "hybrid")
            or g.community_vectors is None
            or query.vector is None
        ):
            return []
        sims = g.community_vectors @ np.asarray(query.vector, dtype=np.float32)
        hits: list[Candidate] = []
        for pos in np.argsort(-sims, kind="stable"):
            if len(hits) >= COMMUNITY_RESULTS:
                break
            c = g.communities[int(pos)]
            if mask is not None and not self._passes(c.chunk_ids, mask):
                continue
            sim = float(sims[pos])
            hits.append(Candidate(c.id, sim, min(1.0, max(0.0, sim)), kind="community"))
        return hits
