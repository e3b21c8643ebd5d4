"""The graph's walk: personalised PageRank restricted to the seeds' neighbourhood.

The neighbourhood is every node within `WALK_HOPS` of the seeds, hubs (more than `HUB` edges) reached but
not expanded, so a query costs the same at 10k and 100k chunks: its cost follows the seeds, not the corpus.
"""

from __future__ import annotations

import numpy as np

from hybridrag.indexing.stores.csr import row_indices, row_lengths
from hybridrag.indexing.stores.graph_index import GraphIndex

DAMPING = 0.7
ITERATIONS = 30
TOLERANCE = 1e-6
WALK_HOPS = 3
HUB = 50  # a node with more edges than this is reached but not expanded further
SEED_FANOUT = 500  # a seed expands along at most this many of its heaviest edges


def neighbourhood(graph: GraphIndex, seeds: np.ndarray) -> np.ndarray:
    """The nodes within `WALK_HOPS` of the seeds (sorted): each seed along its `SEED_FANOUT` heaviest
    edges, then every reached node with at most `HUB` edges. Bounded by the seeds, not the corpus."""
    a = graph.adjacency
    seen = np.zeros(graph.node_count, dtype=bool)
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


def walk(graph: GraphIndex, restart: dict[int, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Personalised PageRank restricted to the seeds' neighbourhood (mass leaving it is dropped).

    Returns (nodes, mass, restart vector) over the neighbourhood's nodes, in node order.
    """
    seeds = np.array(sorted(restart), dtype=np.int64)
    nodes = neighbourhood(graph, seeds)
    sub = graph.transition_t[nodes][:, nodes]
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
