"""The knowledge graph's records, as a build makes them: entities, relations, communities, synonyms, and the
name and report vectors (numpy). How they are built from mentions is `builds.graph_build`; how they are
stored, and how a replica reads them, `stores.graph_arrays` and `stores.graph_index`.

What the records hold (built at index time from entity mentions, with no LLM):

* Entities: merged by normalised name; the type is the majority of their mentions' types.
* Relations: co-occurrence in a sentence (a document's title entities co-occur with every sentence of it),
  weighted by count and PMI, with the chunk ids and sentence offsets that support them (evidence).
* Context: which chunks mention an entity, and which chunks' document titles name it (`title_chunk_ids`):
  retrieval walks passage -> entity -> passage over these, and a title marks the passage an entity is about.
* Synonyms (optional, `BuildConfig.graph_synonyms`): entity pairs whose embedded names are close
  (cosine >= SYNONYM_THRESHOLD, each entity's SYNONYM_NEIGHBOURS nearest), with the name vectors kept so a
  query can reach entities by meaning as well as by spelling.
* Communities: Leiden (leidenalg on igraph) with a fixed seed over a stable (sorted) node order.
* Community reports (extractive): a title from the top entities, key entities and relations, and the most
  representative sentences, embedded like chunks so that global queries can find them.

Stored once, as the Arrow tables and numpy arrays the service maps (`graph/arrays/`, format 7), plus
community_vectors.npy and entity_vectors.npy: no pickle. Versions written before held a JSON record beside
them (graph.json.gz, gzipped; graph.json before that): `load` still reads it. Every entity, relation and
community records the chunk and file ids it came from, so filters and deletions apply to it.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.indexing.analysis.entities import Mention

GRAPH_JSON = "graph.json"  # the record as plain JSON: versions written before 2026-11-28
GRAPH_RECORD = "graph.json.gz"  # the same JSON, gzip level 1: versions written before graph arrays format 7
ARRAYS = "arrays"  # `graph_arrays.FOLDER`: the graph itself from format 7
# 2: entities record the chunks whose title names them (passage nodes of retrieval weigh those edges); an
# index with an older graph still serves, and `hybridrag index regraph` brings it up to date.
# 3: mentions are also linked to the title entities whose names they contain (`link_title_spans`).
# 4: document titles' names are found in the text whatever its letter case (`graph_build.title_names`).
# 5: so are the corpus' case-free phrases (`graph_build.link_corpus_names`).
# 6: the names found in English text without letter case type their chunks but make no node
# (`_graph_mentions`).
# 7: an entity records whether a document of the corpus is its article (`Entity.article`): from a passage,
# the walk goes mostly to the entities that have an article elsewhere.
# 8: concepts (`analysis.concepts`: word pairs and specific words, any letter case) are nodes too,
# node-only and typed `other` (`Entity.concept`), and the walk weighs them by specificity.
# 9: the name tagger's names in English text without letter case are nodes (the lexicon's still are not).
# 10: a quoted phrase read there as a title types its chunk but makes no node (`entities.case_free_title`).
GRAPH_FORMAT = 10
COMMUNITY_VECTORS = "community_vectors.npy"
ENTITY_VECTORS = "entity_vectors.npy"


def as_record(item: Any) -> dict[str, Any]:
    """A dataclass's fields as a shallow dict (what JSON and Arrow need): `dataclasses.asdict` copies every
    nested list and dict on the way, which was ~40 s of SciFact's graph stage."""
    return {name: getattr(item, name) for name in item.__dataclass_fields__}


@dataclass(slots=True)
class Entity:
    id: str
    name: str
    type: str
    mentions: int
    chunk_ids: list[str]
    file_ids: list[str]
    description: str
    aliases: list[str] = field(default_factory=list)
    # Chunks whose document title names this entity (graphs built before this field read as none).
    title_chunk_ids: list[str] = field(default_factory=list)
    # A document's whole title is this name: the corpus has an article about it (older graphs: False).
    # graph.json lists these entities apart ("articles"), so code that predates the flag still loads it.
    article: bool = False
    # A concept of the corpus, no name (`concepts`); listed apart too ("concepts").
    concept: bool = False


@dataclass(slots=True)
class Synonym:
    source: str
    target: str
    similarity: float


@dataclass(slots=True)
class Relation:
    id: str
    source: str
    target: str
    count: int
    pmi: float
    chunk_ids: list[str]
    evidence: list[dict[str, Any]]


@dataclass(slots=True)
class Community:
    id: str
    level: int
    title: str
    entity_ids: list[str]
    relation_ids: list[str]
    chunk_ids: list[str]
    file_ids: list[str]
    report: str


@dataclass(slots=True)
class GraphData:
    entities: list[Entity]
    relations: list[Relation]
    communities: list[Community]
    synonyms: list[Synonym] = field(default_factory=list)

    def save_vectors(
        self,
        folder: Path,
        community_vectors: np.ndarray | None,
        entity_vectors: np.ndarray | None = None,
    ) -> None:
        """The reports' and names' vectors; the graph itself is its arrays (`GraphArrays.save`). A record an
        older version held in the folder (a hard-linked copy) goes: it would describe another graph."""
        folder.mkdir(parents=True, exist_ok=True)
        for name in (GRAPH_JSON, GRAPH_RECORD, COMMUNITY_VECTORS, ENTITY_VECTORS):
            (folder / name).unlink(missing_ok=True)
        for name, vectors in ((COMMUNITY_VECTORS, community_vectors), (ENTITY_VECTORS, entity_vectors)):
            if vectors is not None:
                np.save(folder / name, vectors.astype(np.float32), allow_pickle=False)

    def to_networkx(self) -> Any:
        """The graph as a networkx Graph (node and edge attributes included), for analysis and export.

        Retrieval does not use it: PageRank runs on a CSR matrix built once, and Leiden on igraph.
        """
        import networkx as nx

        g = nx.Graph()
        for e in self.entities:  # stable node order: entities are sorted by normalised name
            g.add_node(e.id, name=e.name, type=e.type, mentions=e.mentions)
        for r in self.relations:
            g.add_edge(r.source, r.target, id=r.id, weight=r.count, pmi=r.pmi)
        for c in self.communities:
            for eid in c.entity_ids:
                g.nodes[eid]["community"] = c.id
        return g

    @staticmethod
    def present(folder: Path) -> bool:
        """True when `folder` holds a graph: its arrays, or a record (compressed, or plain from before)."""
        return (
            (folder / ARRAYS / "meta.json").is_file()
            or (folder / GRAPH_RECORD).is_file()
            or (folder / GRAPH_JSON).is_file()
        )

    @staticmethod
    def read_record(folder: Path) -> dict[str, Any]:
        """The graph record as stored (JSON), from `graph.json.gz` or, in an older version, `graph.json`."""
        if (folder / GRAPH_RECORD).is_file():
            with gzip.open(folder / GRAPH_RECORD, "rb") as packed:
                return dict(json.loads(packed.read().decode("utf-8")))
        return dict(json.loads((folder / GRAPH_JSON).read_text("utf-8")))

    @classmethod
    def load(cls, folder: Path) -> tuple[GraphData, np.ndarray | None]:
        """The graph of a version written before graph arrays format 7 (its JSON record), and its reports'
        vectors; `graph_arrays.load_graph` reads any version's."""
        data = cls.read_record(folder)
        articles = set(data.get("articles", ()))
        concepts = set(data.get("concepts", ()))
        graph = cls(
            [Entity(**e, article=e["id"] in articles, concept=e["id"] in concepts) for e in data["entities"]],
            [Relation(**r) for r in data["relations"]],
            [Community(**c) for c in data["communities"]],
            [Synonym(**s) for s in data.get("synonyms", [])],
        )
        return graph, cls.load_community_vectors(folder)

    @staticmethod
    def load_community_vectors(folder: Path) -> np.ndarray | None:
        path = folder / COMMUNITY_VECTORS
        return np.load(path, mmap_mode="r", allow_pickle=False) if path.is_file() else None

    @staticmethod
    def load_entity_vectors(folder: Path) -> np.ndarray | None:
        path = folder / ENTITY_VECTORS
        return np.load(path, allow_pickle=False) if path.is_file() else None


@dataclass(frozen=True, slots=True)
class ChunkMentions:
    chunk_id: str
    file_id: str
    text: str
    mentions: Sequence[Mention]
    title: str = ""  # the chunk's document title
