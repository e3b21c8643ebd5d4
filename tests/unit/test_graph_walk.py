"""The graph's walk (`pipeline.graph_walk`): personalised PageRank by local push against power iteration,
its paths against node-by-node references, its deduplication, and the cut of its best passages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hybridrag.indexing.stores import versions


def _reference_pagerank(
    transition: Any, restart: dict[int, float], damping: float, fanout: int, seed_fanout: int
) -> np.ndarray:
    """Personalised PageRank by power iteration over the whole graph, each node's out-edges cut to its
    heaviest `fanout` (a seed's to `seed_fanout`) as the push cuts them, the rest of their mass dropped."""
    from scipy import sparse

    n = transition.shape[0]
    rows, cols, vals = [], [], []
    for u in range(n):
        lo, hi = int(transition.indptr[u]), int(transition.indptr[u + 1])
        order = np.lexsort((transition.indices[lo:hi], -transition.data[lo:hi]))
        keep = order[: seed_fanout if u in restart else fanout]
        rows += [u] * len(keep)
        cols += transition.indices[lo:hi][keep].tolist()
        vals += transition.data[lo:hi][keep].tolist()
    cut = sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))
    p = np.zeros(n)
    for node, weight in restart.items():
        p[node] = weight
    p /= p.sum()
    x = p.copy()
    for _ in range(200):
        x = (1 - damping) * p + damping * (cut.T @ x)
    return x


def _reference_parents(
    a: Any, seeds: tuple[int, ...], mass: np.ndarray, hops: int, visits: int
) -> dict[int, int]:
    """Breadth-first parents one node at a time, heaviest neighbours first, as first written."""
    parent: dict[int, int] = {}
    frontier = sorted(seeds, key=lambda s: -mass[s])
    seen = set(frontier)
    for _ in range(hops):
        nxt: list[int] = []
        for node in frontier:
            neighbours = a.indices[a.indptr[node] : a.indptr[node + 1]]
            neighbours = neighbours[mass[neighbours] > 0]
            for v in neighbours[np.argsort(-mass[neighbours], kind="stable")].tolist():
                if v in seen:
                    continue
                seen.add(v)
                parent[v] = node
                nxt.append(v)
                if len(seen) >= visits:
                    return parent
        frontier = sorted(nxt, key=lambda s: -mass[s])
    return parent


def test_the_local_push_walk_is_pagerank_within_its_tolerance(
    sample_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The push gives every node the personalised PageRank of a power iteration over the whole graph (with
    the same fanout cut), to within what its tolerance leaves unpushed; with a tiny tolerance, exactly; and
    it hands its scratch back zeroed."""
    from hybridrag.indexing.stores.graph_index import GraphIndex
    from hybridrag.indexing.stores.mapped import ChunkTable
    from hybridrag.pipeline import graph_walk as gw

    version = versions.current_version(sample_index).path
    g = GraphIndex.load(version / "graph", ChunkTable(version / "chunks.arrow"))
    t = g.transition
    # Rows heaviest first, and each a probability distribution (or empty).
    for u in range(t.shape[0]):
        row = t.data[t.indptr[u] : t.indptr[u + 1]]
        assert list(row) == sorted(row, reverse=True)
        assert len(row) == 0 or abs(row.sum(dtype=np.float64) - 1.0) < 1e-6  # float32 on disk
    degree = np.diff(g.neighbours.indptr)
    hubs = [int(n) for n in np.argsort(-degree, kind="stable")[:6]]
    assert degree[hubs[3]] > 8
    monkeypatch.setattr(gw, "FANOUT", 5)  # the sample is small: make its busiest nodes hubs
    monkeypatch.setattr(gw, "SEED_FANOUT", 8)
    scratch = gw.Scratch(g.node_count)
    restarts = ({hubs[0]: 1.0}, {hubs[1]: 0.3, hubs[2]: 0.7}, {len(g.entities) + 3: 1.0, hubs[3]: 0.5})
    for restart in restarts:
        want = _reference_pagerank(t, restart, gw.DAMPING, gw.FANOUT, gw.SEED_FANOUT)
        nodes, mass, p = gw.walk(g, restart, scratch)
        full = np.zeros(g.node_count)
        full[nodes] = mass
        assert p.sum() == pytest.approx(1.0) and len(nodes) < g.node_count
        # Each node is off by at most the residual left below the tolerance around it.
        assert np.abs(full - want).max() < 20 * gw.TOLERANCE
        top = np.argsort(-want, kind="stable")[:5]
        assert set(np.argsort(-full, kind="stable")[:5].tolist()) == set(top.tolist())
        monkeypatch.setattr(gw, "TOLERANCE", 1e-12)
        nodes, mass, _p = gw.walk(g, restart, scratch)
        full = np.zeros(g.node_count)
        full[nodes] = mass
        np.testing.assert_allclose(full, want, atol=1e-9)
        monkeypatch.setattr(gw, "TOLERANCE", 1e-4)
    # The scratch is handed back zeroed, ready for the next walk (the slot holds what it may).
    for array in scratch.take()[:2]:
        assert not array.any()


@pytest.mark.parametrize("visits", [3, 40, 5000])
def test_walk_paths_match_node_by_node_references(
    sample_index: Path, monkeypatch: pytest.MonkeyPatch, visits: int
) -> None:
    """The batched path traversal gives exactly what the node-by-node version gave, including where the
    traversal's bound cuts a node's neighbours short; the CSR row gathers equal scipy's."""
    from scipy import sparse

    from hybridrag.indexing.stores.csr import row_lengths, row_positions
    from hybridrag.indexing.stores.graph_index import GraphIndex
    from hybridrag.indexing.stores.mapped import ChunkTable
    from hybridrag.pipeline import graph_trace as gt
    from hybridrag.pipeline import graph_walk as gw

    monkeypatch.setattr(gt, "PATH_VISITS", visits)
    version = versions.current_version(sample_index).path
    g = GraphIndex.load(version / "graph", ChunkTable(version / "chunks.arrow"))
    a = g.neighbours
    degree = np.diff(a.indptr)
    candidates = [int(n) for n in np.argsort(-degree, kind="stable")[:12]] + [len(g.entities) + 1]
    walked = 0
    for i in range(0, len(candidates) - 1, 2):
        restart = {candidates[i]: 0.5, candidates[i + 1]: 0.5}
        nodes, mass, _p = gw.walk(g, restart)
        full = np.zeros(g.node_count)
        full[nodes] = mass
        trace = gt.GraphTrace(tuple(sorted(restart)), nodes, mass)
        expected = _reference_parents(a, trace.seeds, full, gt.PATH_HOPS, visits)
        for target in [*sorted(expected, key=lambda n: -full[n])[:5], 10**9]:
            trace._chain(g, target)  # advances the shared traversal only as far as this target needs
        for target in expected:
            chain = trace._chain(g, target)
            assert chain[-1] == target and chain[0] in trace.seeds
        assert trace.parents == expected
        walked += len(expected) > 0
    assert walked >= 3
    rng = np.random.default_rng(0)
    for _ in range(50):
        m = sparse.random(60, 60, density=float(rng.uniform(0, 0.3)), format="csr", random_state=rng)
        rows = rng.integers(0, 60, size=int(rng.integers(0, 15)))
        assert m.indices[row_positions(m.indptr, rows)].tolist() == m[rows].indices.tolist()
        most = rng.integers(0, 4, size=len(rows))
        ends = [min(m.indptr[r] + k, m.indptr[r + 1]) for r, k in zip(rows, most, strict=True)]
        prefixes = [m.indices[m.indptr[r] : end] for r, end in zip(rows, ends, strict=True)]
        want = np.concatenate(prefixes).tolist() if prefixes else []
        assert m.indices[row_positions(m.indptr, rows, most)].tolist() == want
        assert row_lengths(m.indptr, rows).tolist() == [m[int(r)].nnz for r in rows]


def test_distinct_by_slot_keeps_each_value_once() -> None:
    """The walk's dedupe of node ids gives `np.unique`'s values (in some order), its dtype kept, whatever
    the slot held before."""
    from hybridrag.indexing.stores.csr import distinct_by_slot

    rng = np.random.default_rng(0)
    cases = [np.zeros(0, dtype=np.int64), np.array([7]), np.array([3, 3, 3]), np.array([5, 1, 5, 0, 1])]
    cases += [rng.integers(0, high, size=size) for high in (2, 50, 10**5) for size in (2, 17, 3000)]
    cases += [rng.integers(0, 40, size=100).astype(np.int32)]
    for values in cases:
        slot = rng.integers(-(2**31), 2**31 - 1, size=10**5, dtype=np.int64).astype(np.int32)
        got = distinct_by_slot(values, slot)
        assert got.dtype == values.dtype and len(got) == len(np.unique(values))
        np.testing.assert_array_equal(np.sort(got), np.unique(values))


def test_walk_results_do_not_depend_on_its_dedupe(
    sample_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk with its targets deduplicated by slot returns exactly (to the bit) what it returns with a
    sort's dedupe (`np.unique`), for seeds on hubs and on passages."""
    from hybridrag.indexing.stores.graph_index import GraphIndex
    from hybridrag.indexing.stores.mapped import ChunkTable
    from hybridrag.pipeline import graph_walk as gw

    version = versions.current_version(sample_index).path
    g = GraphIndex.load(version / "graph", ChunkTable(version / "chunks.arrow"))
    degree = np.diff(g.neighbours.indptr)
    hubs = [int(n) for n in np.argsort(-degree, kind="stable")[:4]]
    restarts = [{hubs[0]: 1.0}, {hubs[1]: 0.2, hubs[2]: 0.8}, {len(g.entities) + 2: 0.6, hubs[3]: 0.4}]
    scratch = gw.Scratch(g.node_count)
    by_slot = [gw.walk(g, r, scratch) for r in restarts]
    monkeypatch.setattr(gw, "distinct_by_slot", lambda values, _slot: np.unique(values))
    for restart, got in zip(restarts, by_slot, strict=True):
        want = gw.walk(g, restart, scratch)
        assert len(want[0]) > 3
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


def test_best_first_is_a_stable_argsort_cut() -> None:
    """The graph's top passages and entities come out as a stable sort of every score would give them,
    ties in position order, whatever the limit."""
    from hybridrag.pipeline.graph_retriever import best_first

    rng = np.random.default_rng(1)
    cases = [np.zeros(0), np.array([0.5]), np.ones(9), rng.random(500), rng.integers(0, 4, 300) / 4.0]
    for scores in cases:
        for limit in (0, 1, 3, 10, 299, 1000):
            want = np.argsort(-scores, kind="stable")[:limit]
            np.testing.assert_array_equal(best_first(scores, limit), want)


def test_neighbour_support_is_two_steps_of_the_walk_between_the_candidates(sample_index: Path) -> None:
    """support(d) = sum over the other candidates n and entities e of P(d -> e) P(e -> n) s(n), against the
    dense product of the transition matrix; an entity's step cut to its heaviest edges as the walk's fanout
    cuts it; a passage the graph does not hold gets 0 and gives nothing."""
    from hybridrag.indexing.stores.graph_index import GraphIndex
    from hybridrag.indexing.stores.mapped import ChunkTable
    from hybridrag.pipeline import graph_walk as gw

    version = versions.current_version(sample_index).path
    g = GraphIndex.load(version / "graph", ChunkTable(version / "chunks.arrow"))
    t, ne = g.transition, len(g.entities)
    dense = t.toarray()
    rng = np.random.default_rng(7)
    chunks = rng.choice(len(g.chunks), size=min(12, len(g.chunks)), replace=False)
    nodes = np.concatenate([ne + chunks, [-1]])
    scores = rng.random(len(nodes))
    got = gw.neighbour_support(g, nodes, scores, fanout=None)
    reach = dense[np.ix_(ne + chunks, range(ne))] @ dense[np.ix_(range(ne), ne + chunks)]
    np.fill_diagonal(reach, 0.0)
    assert got[:-1] == pytest.approx(reach @ scores[:-1])
    assert got[-1] == 0.0 and got.max() > 0  # the sample's passages share names
    # The fanout: an entity steps only along its heaviest `fanout` edges.
    cut = dense.copy()
    for e in range(ne):
        lo, hi = int(t.indptr[e]), int(t.indptr[e + 1])
        kept = np.zeros(dense.shape[1], dtype=bool)
        kept[np.asarray(t.indices[lo:hi])[:2]] = True
        cut[e, ~kept] = 0.0
    reach = dense[np.ix_(ne + chunks, range(ne))] @ cut[np.ix_(range(ne), ne + chunks)]
    np.fill_diagonal(reach, 0.0)
    assert gw.neighbour_support(g, nodes, scores, fanout=2)[:-1] == pytest.approx(reach @ scores[:-1])
    # Pairs held apart give each other nothing; the others keep their support.
    apart = np.zeros((len(nodes), len(nodes)), dtype=bool)
    apart[0, 1] = apart[1, 0] = True
    reach = dense[np.ix_(ne + chunks, range(ne))] @ dense[np.ix_(range(ne), ne + chunks)]
    np.fill_diagonal(reach, 0.0)
    reach[0, 1] = reach[1, 0] = 0.0
    assert gw.neighbour_support(g, nodes, scores, fanout=None, apart=apart)[:-1] == pytest.approx(
        reach @ scores[:-1]
    )
    # Fewer than two passages the graph holds: nothing to support.
    assert not gw.neighbour_support(g, nodes[:1], scores[:1]).any()
