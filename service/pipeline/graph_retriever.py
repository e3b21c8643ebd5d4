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
through the bridge entity the first passage mentions. Passages written since the graph was built
(`stores.graph_delta`, until a merge brings them in) get the mass one more step of the walk brings them from
the entities they are linked to, and hand a seed's restart mass to those entities, as the merged graph's walk
would. Communities (global / hybrid questions) are ranked by
the cosine of the query to their embedded report. The constants were chosen on the dev sets together
(benchmarks/README.md, "Constants") and are one setting for every corpus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import normalize_name
from hybridrag.indexing.stores.filters import ChunkColumns, ChunkFilters
from hybridrag.indexing.stores.graph_delta import GraphDelta
from hybridrag.indexing.stores.graph_index import GraphIndex, name_forms_in
from hybridrag.pipeline.graph_trace import GraphTrace
from hybridrag.pipeline.graph_walk import DAMPING, Scratch, neighbour_support, one_step, walk
from hybridrag.pipeline.retrievers import Candidate, RetrievalQuery, Retrieved, Retriever

PASSAGE_SEEDS = 3  # top passages taken from each seeding retriever
SEEDERS = ("semantic", "keyword")
KEYWORD_SEED_SHARE = 0.25  # of the passage seeds' mass on keyword's top hits when semantic's are there too
PASSAGE_SHARE = 0.8  # of the restart mass on passage seeds when the query also names entities
PASSAGE_FLOOR = 0.2  # min-max scaled seed weights are floored so the last seed still counts
RESTART_KEPT = 0.1  # share of a seed passage's own restart mass left in its score
ENTITY_RESULTS = 3
ENTITY_CANDIDATES = 8 * ENTITY_RESULTS  # ordered first; all of them only when filters pass too few
COMMUNITY_RESULTS = 3


def best_first(scores: np.ndarray, limit: int) -> np.ndarray:
    """`np.argsort(-scores, kind="stable")[:limit]`: the `limit` best positions, ties in position order,
    sorting only the candidates at or above the limit-th score (a walk reaches thousands of passages and
    keeps a page's worth)."""
    if limit <= 0:
        return np.zeros(0, dtype=np.int64)
    if limit >= len(scores):
        return np.argsort(-scores, kind="stable")
    negated = -scores
    cutoff = np.partition(negated, limit - 1)[limit - 1]
    # Every position tied with the limit-th score, in order: the stable sort then keeps the first ones.
    candidates = np.flatnonzero(negated <= cutoff)
    return candidates[np.argsort(negated[candidates], kind="stable")][:limit]


@dataclass(slots=True)
class Seeds:
    """What seeds a query's walk (`GraphRetriever.restart`): the restart over the graph's nodes, notes, and
    with a delta the restart mass of seed passages the graph does not hold yet (by delta position) and of
    the new names the query spells (by name)."""

    restart: dict[int, float]
    notes: list[str]
    waiting: dict[int, float] = field(default_factory=dict)
    named: dict[int, float] = field(default_factory=dict)


class GraphRetriever:
    """Personalised PageRank from the query's entities and top passages; communities for global questions.

    `seeders` are the retrievers that find seed passages when the search did not hand them over (the graph
    running alone): semantic (when the query has a vector) and keyword. `delta`: the passages written since
    the graph was built, linked to its entities (None: the graph holds every passage).
    """

    name = "graph"

    def __init__(
        self,
        graph: GraphIndex,
        columns: ChunkColumns,
        analyzer: Analyzer,
        seeders: Mapping[str, Retriever] | None = None,
        delta: GraphDelta | None = None,
    ) -> None:
        if columns.size != len(graph.chunks):
            raise ValueError(f"{columns.size} chunk columns for a graph of {len(graph.chunks)} chunks")
        self.graph = graph
        self._analyzer = analyzer
        self._seeders = dict(seeders or {})
        self._columns = columns
        self._scratch = Scratch(graph.node_count)
        self.delta = delta

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

    def support(
        self, ids: Sequence[str], scores: Sequence[float], apart: np.ndarray | None = None
    ) -> dict[str, float]:
        """For the passages of `ids` the graph holds, how much of the others' `scores` each reaches in two
        steps of the walk (`graph_walk.neighbour_support`; `apart`: pairs that give each other none);
        passages it does not hold are left out."""
        rows = self.graph.chunks.rows(list(ids))
        nodes = np.where(rows >= 0, rows + len(self.graph.entities), -1)
        got = neighbour_support(self.graph, nodes, np.asarray(scores, dtype=np.float64), apart=apart)
        return {c: float(v) for c, v, r in zip(ids, got.tolist(), rows.tolist(), strict=True) if r >= 0}

    def _mask(self, filters: ChunkFilters) -> np.ndarray | None:
        """The chunk nodes a result may be: those passing the filters and still in the table (None: all)."""
        live = self.graph.live
        if not filters.active:
            return live
        mask = self._columns.mask(filters, self.graph.chunks.rows)
        return mask if live is None else mask & live

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

    def restart(self, query: RetrievalQuery) -> Seeds:
        """The walk's restart distribution over seed nodes and notes on what seeded it; with a delta, the
        restart mass of seed passages the graph does not hold yet (handed to their entities in `restart`)
        and of the new names the query names."""
        g = self.graph
        notes: list[str] = []
        entities = dict.fromkeys(g.match(query.text, self._analyzer, query.entities))
        entities.update(dict.fromkeys(g.match_by_meaning(query.vector)))
        new_names = self._new_names(query)
        ne = len(g.entities)
        sources: dict[str, list[tuple[int, float]]] = {}
        for name, passages in self.seed_passages(query).items():
            ids = [c for c, _s in passages]
            nodes = ne + g.chunks.rows(ids)
            if self.delta is not None:
                # A passage written since the graph was built: node -1 - its delta position.
                pending = self.delta.position(ids)
                nodes = np.where((nodes < ne) & (pending >= 0), -1 - pending, nodes)
            sources[name] = [
                (int(n), s) for n, (_c, s) in zip(nodes, passages, strict=True) if n >= ne or n < 0
            ]
        sources = {name: hits for name, hits in sources.items() if hits}
        restart: dict[int, float] = {}
        named: dict[int, float] = {}
        if entities or new_names:
            assert self.delta is not None or not new_names
            weights = {e: 1.0 / max(1, g.chunk_count_of(e)) for e in entities}
            news = {j: 1.0 / max(1, self.delta.names.count(j)) for j in new_names} if self.delta else {}
            total = sum(weights.values()) + sum(news.values())
            share = 1.0 - PASSAGE_SHARE if sources else 1.0
            restart.update({e: w / total * share for e, w in weights.items()})
            named.update({j: w / total * share for j, w in news.items()})
        else:
            notes.append("no entity of the query was found in the graph")
        if sources:
            passage_mass = PASSAGE_SHARE if entities or new_names else 1.0
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
        waiting = {-1 - n: restart.pop(n) for n in [n for n in restart if n < 0]}
        if waiting:
            assert self.delta is not None
            delta = self.delta
            for at, mass in waiting.items():
                # What the passage's first push hands the graph's entities and its new names: DAMPING of its
                # restart mass, by the passage -> entity weights.
                lo, hi = delta.indptr[at], delta.indptr[at + 1]
                new, new_weight = delta.names.of_passage(at)
                total = float(delta.outward[lo:hi].sum() + new_weight.sum())
                if total <= 0:
                    continue
                for e, w in zip(delta.entity[lo:hi].tolist(), delta.outward[lo:hi].tolist(), strict=True):
                    restart[e] = restart.get(e, 0.0) + DAMPING * mass * w / total
                for j, w in zip(new.tolist(), new_weight.tolist(), strict=True):
                    named[j] = named.get(j, 0.0) + DAMPING * mass * w / total
        return Seeds(restart, notes, waiting, named)

    def _new_names(self, query: RetrievalQuery) -> list[int]:
        """The delta's new names (`graph_delta.NewNames`) the query spells, as `match` finds the graph's."""
        names = self.delta.names.index if self.delta is not None else None
        if not names:
            return []
        forms = name_forms_in(query.text, self._analyzer) + [normalize_name(e) for e in query.entities]
        return list(dict.fromkeys(names[f] for f in forms if f in names))

    def retrieve(self, query: RetrievalQuery, limit: int) -> Retrieved:
        g = self.graph
        filters = query.filters
        seeds = self.restart(query)
        restart, notes = seeds.restart, seeds.notes
        mask = self._mask(filters)
        entity_hits: list[Candidate] = []
        trace = None
        if restart and not g.edge_count(np.fromiter(restart, dtype=np.int64, count=len(restart))):
            # Seeds with no edge at all (text without entities: lower-cased or OCR collections): the walk
            # could only hand the other retrievers' passages back, and fusing that copy would just re-weigh
            # them. An empty list leaves the fusion as if the graph were off.
            notes.append("the query's passages mention no entity of the graph: nothing to walk")
            restart = {}
        nodes, mass, p = np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
        if restart:
            nodes, mass, p = walk(g, restart, self._scratch)
            # The walk normalises its restart; what seeds outside the graph keep is not in it.
            total = sum(restart.values())
            mass, p = mass * total, p * total
            trace = GraphTrace(tuple(sorted(restart)), nodes, mass)
            entity_hits = self._entities(nodes, mass, filters, mask)
        chunk_hits, matched = self._passages(
            nodes, mass, p, mask, limit, self._delta_passages(seeds, restart, nodes, mass, trace, filters)
        )
        community_hits = self._communities(query, mask)
        total_hits = matched + len(entity_hits) + len(community_hits)
        # Chunks lead (they answer local questions); the query's entities follow the first few chunks;
        # community reports lead for global questions.
        # The list keeps `limit` passages whatever else it holds: their evidence scale (fusion) then does not
        # depend on how many entities and reports came with them.
        ordered = chunk_hits[:10] + entity_hits + chunk_hits[10:]
        ordered = community_hits + ordered if query.query_type == "global" else ordered + community_hits
        return Retrieved(ordered, total_hits, notes, trace, ratio_scores=True)

    def _delta_passages(
        self,
        seeds: Seeds,
        restart: Mapping[int, float],
        nodes: np.ndarray,
        mass: np.ndarray,
        trace: GraphTrace | None,
        filters: ChunkFilters,
    ) -> tuple[list[str], np.ndarray]:
        """The passages written since the graph was built that the walk reached (ids, scores): one step from
        the graph's entities (`graph_walk.one_step`), one from the new names the query spells, and a seed's
        own kept share, as the merged graph's walk would give them."""
        delta = self.delta
        if delta is None:
            return [], np.zeros(0)
        scores, via = one_step(self.graph, delta, nodes, mass, restart)
        for at, seed_mass in seeds.waiting.items():
            scores[at] += RESTART_KEPT * (1 - DAMPING) * seed_mass
        for name, name_mass in seeds.named.items():
            passages, share = delta.names.passages_of(name)
            np.add.at(scores, passages, DAMPING * (1 - DAMPING) * name_mass * share)
        kept = scores > 0
        if filters.active:
            kept &= delta.columns.mask(filters, delta.position)
        reached = np.flatnonzero(kept).tolist()
        if trace is not None:
            trace.delta_via.update((delta.ids[i], int(via[i])) for i in reached if via[i] >= 0)
        return [delta.ids[i] for i in reached], scores[reached]

    def _passages(
        self,
        nodes: np.ndarray,
        mass: np.ndarray,
        p: np.ndarray,
        mask: np.ndarray | None,
        limit: int,
        pending: tuple[list[str], np.ndarray],
    ) -> tuple[list[Candidate], int]:
        """The passages the walk reached, by the mass it brought them beyond their restart share (at most
        `limit`), and how many passed the filters; `pending`: the delta's (`_delta_passages`), after the
        graph's at equal scores."""
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
        pending_ids, pending_scores = pending
        scores = np.concatenate([chunk_scores, pending_scores])
        # Best first; ties keep chunk order (a stable sort of ascending positions), the graph's first.
        order = best_first(scores, limit)
        top = float(scores[order[0]]) if len(order) else 0.0
        held = order[order < len(positions)]
        named = dict(zip(held.tolist(), g.chunks.ids_at(positions[held].tolist()), strict=True))
        hits = [
            Candidate(
                named[i] if i < len(positions) else pending_ids[i - len(positions)],
                score,
                score / top if top > 0 else 0.0,
            )
            for i, score in zip(order.tolist(), scores[order].tolist(), strict=True)
        ]
        return hits, len(positions) + len(pending_ids)

    def _entities(
        self, nodes: np.ndarray, mass: np.ndarray, filters: ChunkFilters, mask: np.ndarray | None
    ) -> list[Candidate]:
        """The `ENTITY_RESULTS` entities the walk gave the most mass that pass the filters."""
        g = self.graph
        is_entity = nodes < len(g.entities)
        entity_mass, entity_nodes = mass[is_entity], nodes[is_entity]
        best = float(entity_mass.max()) if len(entity_mass) else 0.0
        # The best few first; all of them only when the filters pass too few of those.
        ranked = best_first(entity_mass, ENTITY_CANDIDATES)
        # Id and type only, a few rows a read (a hub entity's full row lists thousands of chunks).
        heads: list[dict[str, Any]] = []
        hits: list[Candidate] = []
        n = -1
        while len(hits) < ENTITY_RESULTS:
            n += 1
            if n == len(ranked) < len(entity_mass):
                ranked = np.argsort(-entity_mass, kind="stable")  # the same order, whole
            if n == len(ranked) or entity_mass[ranked[n]] <= 0:
                break
            i = int(ranked[n])
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
        ids = g.arrays.communities.column("id")
        hits: list[Candidate] = []
        for pos in np.argsort(-sims, kind="stable").tolist():
            if len(hits) >= COMMUNITY_RESULTS:
                break
            if mask is not None and not g.community_passes(pos, mask):
                continue
            sim = float(sims[pos])
            hits.append(Candidate(str(ids[pos].as_py()), sim, min(1.0, max(0.0, sim)), kind="community"))
        return hits
