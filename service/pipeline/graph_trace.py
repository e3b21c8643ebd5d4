"""How the graph reached a result: the walk's trace (seeds and mass) and the path shown to the caller."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hybridrag.indexing.stores.graph_index import GraphIndex

PATH_HOPS = 4
PATH_VISITS = 5000


@dataclass(slots=True)
class GraphTrace:
    """What the walk of one query was: its seed nodes and the PageRank mass it left on the nodes it reached.

    Held sparse, as the walk returns it: an array over every node of a ten-million-chunk graph would be
    allocated and freed by each search, and glibc keeps such blocks in each thread's arena (anonymous memory
    grew with every thread that ran a graph search).
    """

    seeds: tuple[int, ...]
    nodes: np.ndarray  # the nodes the walk reached, ascending (entities, then chunks)
    mass: np.ndarray  # the mass it left on each of `nodes`
    # The breadth-first traversal behind `path`, advanced only as far as the results asked for so far.
    parents: dict[int, int] | None = None
    traversal: Iterator[int] | None = None
    # What the paths of this search have named so far (entity heads, chunk ids) by node: a page's paths
    # share their seeds and first hops, so each node is read once a search.
    named: dict[int, Any] = field(default_factory=dict)
    # Passages the graph does not hold yet (`stores.graph_delta`) that the walk reached: the entity node that
    # brought each the most.
    delta_via: dict[str, int] = field(default_factory=dict)

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

    def _at(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where `nodes` are in the trace's `nodes` (clipped) and which of them the walk reached."""
        at = np.minimum(np.searchsorted(self.nodes, nodes), len(self.nodes) - 1)
        return at, self.nodes[at] == nodes

    def _traverse(self, graph: GraphIndex, parent: dict[int, int]) -> Iterator[int]:
        """Records each node's parent as it is reached; yields each node whose neighbours it added."""
        a, mass = graph.neighbours, self.mass
        if not len(self.nodes):
            return
        seeds = np.array(self.seeds, dtype=np.int64)
        at, reached_by_walk = self._at(seeds)
        seed_mass = np.where(reached_by_walk, mass[at], 0.0)
        frontier = seeds[np.argsort(-seed_mass, kind="stable")]
        seen = np.zeros(len(self.nodes), dtype=bool)  # by position in `nodes`: only reached nodes are added
        seen[at[reached_by_walk]] = True
        visits = len(frontier)
        for _ in range(PATH_HOPS):
            reached: list[np.ndarray] = []
            for node in frontier.tolist():
                # In node order (rows are stored heaviest edge first): ties in mass go to the lower node.
                neighbours = np.sort(a.indices[a.indptr[node] : a.indptr[node + 1]])
                at, hit = self._at(neighbours)
                keep = hit & (mass[at] > 0) & ~seen[at]
                neighbours, at = neighbours[keep], at[keep]
                if not len(neighbours):
                    continue
                # Heaviest first (ties in node order); at least one, as a node-by-node walk adds one
                # before it checks the bound.
                order = np.argsort(-mass[at], kind="stable")[: max(1, PATH_VISITS - visits)]
                neighbours, at = neighbours[order], at[order]
                seen[at] = True
                parent.update(dict.fromkeys(neighbours.tolist(), node))
                reached.append(neighbours)
                visits += len(neighbours)
                yield node
                if visits >= PATH_VISITS:
                    return
            if not reached:
                return
            frontier = np.concatenate(reached).astype(np.int64)
            frontier = frontier[np.argsort(-mass[self._at(frontier)[0]], kind="stable")]

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
            if node is None and item_id not in self.delta_via:
                return []
            target = self.delta_via[item_id] if node is None else node
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
        if steps and steps[-1]["id"] != item_id and item_id in self.delta_via:
            # A passage written since the graph: one step from the entity that brought it the most.
            steps.append({"id": item_id, "type": "chunk", "via": steps[-1]["id"], "edge": "mentions"})
        return steps
