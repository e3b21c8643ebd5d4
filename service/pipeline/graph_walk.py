"""The graph's walk: personalised PageRank by local push from the seeds, bounded by a tolerance.

Forward push (Andersen, Chung and Lang, 2006): every node holds an estimate and a residual; pushing a node
moves (1 - DAMPING) of its residual into its estimate and hands DAMPING of it to its out-neighbours in
proportion to the transition weights. Only nodes whose residual exceeds `TOLERANCE` (a share of the query's
restart mass) are pushed, in rounds, all at once, so the work is bounded by 1 / ((1 - DAMPING) x TOLERANCE)
pushes whatever the corpus' size: a query's cost follows the mass its seeds spread, not the corpus. A node
pushes along at most `FANOUT` of its heaviest out-edges (a seed along `SEED_FANOUT`), so a hub entity (a
country, a year, a common concept) named by millions of passages hands its mass to its best-linked few
and one seed cannot touch millions of passages; the mass on the edges beyond is dropped, as mass leaving
the reach of a restricted walk is. A node's mass is its estimate plus the share (1 - DAMPING) of the residual
it still holds (what its next push would keep).

The rows of the transition matrix are stored heaviest edge first (`graph_weights.walk_matrices`), so the
fanout is a prefix of each row. Dense per-node scratch (estimate, residual, a slot: 20 bytes a node) comes
from a pool owned by the retriever, so a walk allocates nothing of the corpus' size; pages once touched stay
resident, and every walk leaves the estimate and residual zeroed. A round's targets are deduplicated through
the int32 slot (`csr.distinct_by_slot`) instead of sorted, and the nodes the walk reached are its rounds'
targets deduplicated once at its end: only the few a round pushes next are sorted, so every sum runs in the
same order as with a sort's dedupe and the walk's results are the same to the bit.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np
from scipy import sparse

from hybridrag.indexing.stores.csr import distinct_by_slot, row_lengths, row_positions
from hybridrag.indexing.stores.graph_delta import GraphDelta
from hybridrag.indexing.stores.graph_index import GraphIndex
from hybridrag.indexing.stores.graph_weights import ARTICLE_WEIGHT, TITLE_WEIGHT

# Measured against the walk this replaced on the dev sets: benchmarks/README.md, "Constants".
DAMPING = 0.7
TOLERANCE = 1e-4  # of the restart mass: a node holding less residual is not pushed
FANOUT = 50  # heaviest out-edges a node pushes along
SEED_FANOUT = 500  # and a seed
MAX_ROUNDS = 100  # a safeguard: with DAMPING 0.7 the residual above TOLERANCE is gone in ~30 rounds


class Scratch:
    """Per-node arrays for walks (estimate and residual: zeroed; a slot for deduplication: any content),
    reused: one set per walk running at a time."""

    def __init__(self, nodes: int) -> None:
        self._nodes = nodes
        self._free: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with self._lock:
            if self._free:
                return self._free.pop()
        return np.zeros(self._nodes), np.zeros(self._nodes), np.zeros(self._nodes, dtype=np.int32)

    def give(self, arrays: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        with self._lock:
            self._free.append(arrays)


def walk(
    graph: GraphIndex, restart: dict[int, float], scratch: Scratch | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Personalised PageRank from `restart` (seed node -> weight) by local push.

    Returns (nodes, mass, restart vector) over the nodes the walk touched, in node order.
    """
    pool = scratch or Scratch(graph.node_count)
    estimate, residual, slot = pool.take()
    p_matrix = graph.transition
    seeds = np.array(sorted(restart), dtype=np.int64)
    p = np.array([restart[int(s)] for s in seeds], dtype=np.float64)
    p /= p.sum()
    reached = [seeds]  # every round's targets, repeats and all
    nodes: np.ndarray | None = None
    try:
        residual[seeds] = p
        active = seeds[p > TOLERANCE]
        for _ in range(MAX_ROUNDS):
            if not len(active):
                break
            mass = residual[active]
            residual[active] = 0.0
            estimate[active] += (1.0 - DAMPING) * mass
            at = np.minimum(np.searchsorted(seeds, active), len(seeds) - 1)
            most = np.where(seeds[at] == active, SEED_FANOUT, FANOUT)
            counts = np.minimum(row_lengths(p_matrix.indptr, active), most)
            positions = row_positions(p_matrix.indptr, active, most)
            targets = np.asarray(p_matrix.indices[positions], dtype=np.int64)
            np.add.at(residual, targets, np.repeat(DAMPING * mass, counts) * p_matrix.data[positions])
            reached.append(targets)
            # Sorted, as a sort's dedupe left them: the next round's sums then run in the same order.
            active = np.sort(distinct_by_slot(targets[residual[targets] > TOLERANCE], slot))
        nodes = np.sort(distinct_by_slot(np.concatenate(reached), slot))
        mass = estimate[nodes] + (1.0 - DAMPING) * residual[nodes]
    finally:
        written = nodes if nodes is not None else np.concatenate(reached)
        estimate[written] = 0.0
        residual[written] = 0.0
        pool.give((estimate, residual, slot))
    restart_vector = np.zeros(len(nodes))
    restart_vector[np.searchsorted(nodes, seeds)] = p
    return nodes, mass, restart_vector


def one_step(
    graph: GraphIndex,
    delta: GraphDelta,
    nodes: np.ndarray,
    mass: np.ndarray,
    restart: Mapping[int, float],
) -> tuple[np.ndarray, np.ndarray]:
    """The mass one more push of the walk (`walk`'s nodes and mass) brings each passage written since the
    graph was built (`stores.graph_delta`): DAMPING of each linked entity's mass times the passage's share
    of the entity's out-weight, along an edge within the entity's fanout (a seed's larger one) — what the
    passage would hold in the merged graph's walk, less what it would pass on and bring back. An entity a
    new passage makes an article holds the mass the walk's passages would have sent it as to an article
    (`article_inflow`). Also the entity node that brought each passage the most (-1: none)."""
    owner = delta.owner()
    if not len(nodes) or not len(delta.entity):
        return np.zeros(len(delta)), np.full(len(delta), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(nodes, delta.entity), len(nodes) - 1)
    entity_mass = np.where(nodes[at] == delta.entity, mass[at], 0.0)
    if len(delta.became):
        extra = article_inflow(graph, delta.became, delta.became_out, nodes, mass)
        pos = np.minimum(np.searchsorted(delta.became, delta.entity), len(delta.became) - 1)
        entity_mass += np.where(delta.became[pos] == delta.entity, extra[pos], 0.0)
    seeds = np.fromiter(restart, dtype=np.int64, count=len(restart))
    within = np.where(np.isin(delta.entity, seeds), delta.within_seed, delta.within)
    flow = DAMPING * entity_mass * delta.share * within
    scores = np.bincount(owner, weights=flow, minlength=len(delta))
    via = np.full(len(delta), -1, dtype=np.int64)
    best = np.lexsort((-flow, owner))  # each passage's links, the heaviest flow first
    first = best[np.r_[True, owner[best][1:] != owner[best][:-1]]]
    first = first[flow[first] > 0]
    via[owner[first]] = delta.entity[first]
    return scores, via


def article_inflow(
    graph: GraphIndex, entities: np.ndarray, out_weight: np.ndarray, nodes: np.ndarray, mass: np.ndarray
) -> np.ndarray:
    """The mass each of `entities` (sorted; their out-weights given) would gain from the walk's passages
    if it had an article: a passage that mentions a name without being about it sends it 1 of its
    out-weight, an article's 1 + ARTICLE_WEIGHT (`graph_weights.mention_weights`). One step: what the
    walk's passages held (`nodes`, `mass`) sent along the heavier edge, less what they sent."""
    p, ne = graph.transition, len(graph.entities)
    out = np.zeros(len(entities))
    heavy = 1.0 + ARTICLE_WEIGHT
    for i, (entity, weight) in enumerate(zip(entities.tolist(), out_weight.tolist(), strict=True)):
        lo, hi = p.indptr[entity], p.indptr[entity + 1]
        columns = np.asarray(p.indices[lo:hi], dtype=np.int64)
        # Its passages; those about it (title) are left out: they lead to it as before.
        plain = (columns >= ne) & (np.asarray(p.data[lo:hi]) * weight < 1.0 + TITLE_WEIGHT / 2)
        passages = columns[plain]
        at = np.minimum(np.searchsorted(nodes, passages), len(nodes) - 1)
        reached = nodes[at] == passages
        passages, held = passages[reached], mass[at[reached]]
        if not len(passages):
            continue
        # Each passage's transition to the entity is 1 / its out-weight (a plain name weighs 1).
        positions = row_positions(p.indptr, passages)
        owner = np.repeat(np.arange(len(passages)), row_lengths(p.indptr, passages))
        to_it = np.asarray(p.indices[positions]) == entity
        step = np.zeros(len(passages))
        step[owner[to_it]] = np.asarray(p.data[positions[to_it]], dtype=np.float64)
        known = step > 0
        out_c = 1.0 / step[known]
        gain = heavy / (out_c + heavy - 1.0) - step[known]
        out[i] = DAMPING * float((held[known] * gain).sum())
    return out


def neighbour_support(
    graph: GraphIndex,
    nodes: np.ndarray,
    scores: np.ndarray,
    fanout: int | None = FANOUT,
    apart: np.ndarray | None = None,
) -> np.ndarray:
    """How much of the other candidates' score each candidate passage reaches in two steps of the walk:
    support(d) = sum over candidates n != d and entities e of P(d -> e) P(e -> n) s(n).

    `nodes`: the candidates' chunk nodes (-1: a passage the graph does not hold, support 0); `scores`:
    theirs. An entity hands its share along its `fanout` heaviest edges, as the walk pushes (None: all),
    so a hub named by millions of passages costs what a specific name costs. `apart`: a boolean matrix over
    the candidates, True where two give each other no support.
    """
    support = np.zeros(len(nodes))
    held = np.flatnonzero(nodes >= 0)
    if len(held) < 2:
        return support
    p, ne = graph.transition, len(graph.entities)
    cand = np.asarray(nodes[held], dtype=np.int64)
    # Step one: each candidate's entities.
    positions = row_positions(p.indptr, cand)
    owner = np.repeat(np.arange(len(cand)), row_lengths(p.indptr, cand))
    entity = np.asarray(p.indices[positions], dtype=np.int64)
    is_entity = entity < ne
    owner, entity, first = owner[is_entity], entity[is_entity], np.asarray(p.data[positions[is_entity]])
    if not len(entity):
        return support
    shared, column = np.unique(entity, return_inverse=True)
    # Step two: each of those entities' passages among the candidates.
    lengths = row_lengths(p.indptr, shared)
    if fanout is not None:
        lengths = np.minimum(lengths, fanout)
    positions = row_positions(p.indptr, shared, lengths)
    from_entity = np.repeat(np.arange(len(shared)), lengths)
    target = np.asarray(p.indices[positions], dtype=np.int64)
    order = np.argsort(cand, kind="stable")
    at = np.minimum(np.searchsorted(cand[order], target), len(cand) - 1)
    hit = cand[order[at]] == target
    one = sparse.csr_matrix((first, (owner, column)), shape=(len(cand), len(shared)))
    two = sparse.csr_matrix(
        (np.asarray(p.data[positions[hit]]), (from_entity[hit], order[at[hit]])),
        shape=(len(shared), len(cand)),
    )
    reach = (one @ two).toarray()
    np.fill_diagonal(reach, 0.0)
    if apart is not None:
        reach[np.asarray(apart, dtype=bool)[np.ix_(held, held)]] = 0.0
    support[held] = reach @ np.asarray(scores, dtype=np.float64)[held]
    return support
