"""The knowledge graph, built at index time from entity mentions with no LLM.

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

Everything is stored as JSON (graph.json) and numpy (community_vectors.npy, entity_vectors.npy): no pickle. Every entity,
relation and community records the chunk and file ids it came from, so filters and deletions apply to it.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS
from hybridrag.indexing.analysis.entities import (
    DISAMBIGUATION,
    OTHER,
    TITLE_NAME_MAX_WORDS,
    Mention,
    casing_informative,
    normalize_name,
)
from hybridrag.indexing.analysis.phrases import NameDictionary, corpus_phrases
from hybridrag.indexing.analysis.text import content_hash, has_japanese

GRAPH_JSON = "graph.json"
# 2: entities record the chunks whose title names them (passage nodes of retrieval weigh those edges); an
# index with an older graph still serves, and `hybridrag index regraph` brings it up to date.
# 3: mentions are also linked to the title entities whose names they contain (`link_title_spans`).
# 4: document titles' names are found in the text whatever its letter case (`link_title_names`).
# 5: so are the corpus' case-free phrases (`link_corpus_phrases`).
# 6: the names found in English text without letter case type their chunks but make no node
# (`_graph_mentions`).
# 7: an entity records whether a document of the corpus is its article (`Entity.article`): from a passage,
# the walk goes mostly to the entities that have an article elsewhere.
GRAPH_FORMAT = 7
TITLE_SPAN_MIN_WORDS = 2
COMMUNITY_VECTORS = "community_vectors.npy"
ENTITY_VECTORS = "entity_vectors.npy"
# Chosen on HotpotQA-100 dev (benchmarks/README.md): e5's name vectors are crowded (median nearest neighbour
# 0.93), so only near-duplicates of a name ("Kerry Saxby-Junna" / "Kerry-Anne Saxby-Junna") pass 0.95.
SYNONYM_THRESHOLD = 0.95
SYNONYM_NEIGHBOURS = 5
SYNONYM_BLOCK = 2048
LEIDEN_SEED = 42
# Two passes (leidenalg's default) reach nearly all of the modularity; iterating to convergence took 35
# passes and ~40 s on SciFact's 22k entities for a marginal gain.
LEIDEN_ITERATIONS = 2
MAX_EVIDENCE = 3
MAX_REPORT_SENTENCES = 5


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

    def save(
        self,
        folder: Path,
        community_vectors: np.ndarray | None,
        entity_vectors: np.ndarray | None = None,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        entities = [asdict(e) for e in self.entities]
        for e in entities:
            e.pop("article")  # listed apart below: code that predates the flag still reads this file
        data = {
            "entities": entities,
            "articles": [e.id for e in self.entities if e.article],
            "relations": [asdict(r) for r in self.relations],
            "communities": [asdict(c) for c in self.communities],
            "synonyms": [asdict(s) for s in self.synonyms],
        }
        (folder / GRAPH_JSON).write_text(json.dumps(data, ensure_ascii=False), "utf-8")
        # The folder may be a copy of the previous version's: files this graph has none of must go.
        for name, vectors in ((COMMUNITY_VECTORS, community_vectors), (ENTITY_VECTORS, entity_vectors)):
            if vectors is not None:
                np.save(folder / name, vectors.astype(np.float32), allow_pickle=False)
            else:
                (folder / name).unlink(missing_ok=True)

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

    @classmethod
    def load(cls, folder: Path) -> tuple[GraphData, np.ndarray | None]:
        data = json.loads((folder / GRAPH_JSON).read_text("utf-8"))
        articles = set(data.get("articles", ()))
        graph = cls(
            [Entity(**e, article=e["id"] in articles) for e in data["entities"]],
            [Relation(**r) for r in data["relations"]],
            [Community(**c) for c in data["communities"]],
            [Synonym(**s) for s in data.get("synonyms", [])],
        )
        vectors_path = folder / COMMUNITY_VECTORS
        vectors = np.load(vectors_path, allow_pickle=False) if vectors_path.is_file() else None
        return graph, vectors

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


def entity_id(key: str) -> str:
    return "e-" + content_hash(key)


def link_title_spans(chunks: Sequence[ChunkMentions]) -> list[ChunkMentions]:
    """Link mentions to the title entities whose names they contain, corpus-wide.

    A capitalised-word extractor keeps "Trent Reznor of Nine Inch Nails" or "Michael Trent Reznor" as one
    name, while the documents about those things are titled "Trent Reznor" and "Nine Inch Nails". A mention
    whose words contain a document title's name of at least `TITLE_SPAN_MIN_WORDS` words (a whole-word
    run) also mentions that title's entity, in the same sentence: the walk then reaches the passage the
    name is about. Single-word titles link only by exact name ("Paris" inside "Paris Hilton" is someone
    else). Depends only on the whole set of mentions, so an incremental update links as a full build does.
    """
    # Title key -> the title's own mention: the linked mention takes its type, so a long name's type
    # ("... of Nine Inch Nails": organisation) never outvotes what the title entity is.
    titles: dict[str, Mention] = {}
    for c in chunks:
        for m in c.mentions:
            if m.sentence_start < 0 and len(m.key.split()) >= TITLE_SPAN_MIN_WORDS:
                titles.setdefault(m.key, m)
    if not titles:
        return list(chunks)
    out = []
    for c in chunks:
        added: list[Mention] = []
        have = {(m.key, m.sentence_start) for m in c.mentions}
        for m in c.mentions:
            words = m.key.split()
            if m.sentence_start < 0 or len(words) <= TITLE_SPAN_MIN_WORDS:
                continue
            surface_words = m.surface.split()
            for size in range(len(words) - 1, TITLE_SPAN_MIN_WORDS - 1, -1):
                for start in range(len(words) - size + 1):
                    key = " ".join(words[start : start + size])
                    if key in titles and (key, m.sentence_start) not in have:
                        have.add((key, m.sentence_start))
                        # The words of the long name that spell the title, as written in the text.
                        surface = (
                            " ".join(surface_words[start : start + size])
                            if len(surface_words) == len(words)
                            else titles[key].surface
                        )
                        added.append(
                            Mention(key, surface, titles[key].type, m.sentence_start, m.sentence_end)
                        )
        out.append(replace(c, mentions=[*c.mentions, *added]) if added else c)
    return out


TITLE_NAME_MIN_CHARS = 3  # a one- or two-letter title ("X", "Go") would match too much text


def link_title_names(chunks: Sequence[ChunkMentions]) -> list[ChunkMentions]:
    """Mentions of document titles' names wherever the text spells them, in any letter case.

    The corpus' own titles are a dictionary of what its documents are about (a wiki's article names, a
    catalogue's product names). Each sentence's word n-grams (up to `TITLE_NAME_MAX_WORDS`) are compared
    with the titles' names after name normalisation, which folds case: "scott derrickson directed…" and
    "SCOTT DERRICKSON DIRECTED…" link to the document titled "Scott Derrickson" as the capitalised text
    does. Linear in the words of the corpus; depends only on the whole set of chunks, so an incremental
    update links as a full build does. Japanese text keeps its morpheme-based names.
    """
    titles: dict[str, str] = {}
    for c in chunks:
        for m in c.mentions:
            if (
                m.sentence_start < 0
                and len(m.key) >= TITLE_NAME_MIN_CHARS
                and m.key not in ENGLISH_STOPWORDS
                and len(m.key.split()) <= TITLE_NAME_MAX_WORDS
                and not has_japanese(m.key)
            ):
                titles.setdefault(m.key, m.type)
    return _with_names(chunks, titles, proper=True)


def link_corpus_phrases(chunks: Sequence[ChunkMentions]) -> list[ChunkMentions]:
    """Mentions of the corpus' case-free phrases (`phrases.corpus_phrases`), chunks counted as documents."""
    found = corpus_phrases([(c.chunk_id, c.text) for c in chunks])
    return _with_names(chunks, dict.fromkeys(found, OTHER), proper=False)


def _with_names(chunks: Sequence[ChunkMentions], names: dict[str, str], proper: bool) -> list[ChunkMentions]:
    if not names:
        return list(chunks)
    dictionary = NameDictionary(names, proper)
    out = []
    for c in chunks:
        added = dictionary.find(c.text, c.mentions)
        out.append(replace(c, mentions=[*c.mentions, *added]) if added else c)
    return out


def _graph_mentions(chunk: ChunkMentions) -> ChunkMentions:
    """The chunk without the names that English sentences without letter case showed (the lexicon's
    countries, languages and nationalities, and the name tagger's people, organisations and places). They
    type the chunk for filters, but as nodes the lexicon's names joined case-less passages that share only a
    country or a nationality: on HotpotQA-100 upper-cased the graph alone fell from 0.932 to 0.920 nDCG@10
    with them (in cased text, where people and organisations are nodes too, they help). The graph of such
    text comes from the corpus' titles and phrases (`link_title_names`, `link_corpus_phrases`)."""
    kept = [
        m
        for m in chunk.mentions
        if m.sentence_start < 0 or _cased_or_japanese(chunk.text[m.sentence_start : m.sentence_end])
    ]
    return chunk if len(kept) == len(chunk.mentions) else replace(chunk, mentions=kept)


def _cased_or_japanese(sentence: str) -> bool:
    return casing_informative(sentence) or has_japanese(sentence)


def article_key(title: str) -> str:
    """The name a document's whole title spells, less a trailing disambiguation ("Mercury (planet)"),
    normalised as names are; "" for no title."""
    return normalize_name(DISAMBIGUATION.sub("", title).strip()) if title.strip() else ""


def build_graph(chunks: Iterable[ChunkMentions]) -> GraphData:
    """Aggregate mentions into entities and sentence co-occurrence relations, then detect communities."""
    # Case-less sentences' names leave before the links: a title's name found in case-less text stays.
    chunks = link_title_spans(link_corpus_phrases(link_title_names([_graph_mentions(c) for c in chunks])))
    types: dict[str, Counter[str]] = defaultdict(Counter)
    node_types: dict[str, Counter[str]] = defaultdict(Counter)  # of node-only mentions
    surfaces: dict[str, Counter[str]] = defaultdict(Counter)
    entity_chunks: dict[str, dict[str, None]] = defaultdict(dict)
    entity_files: dict[str, dict[str, None]] = defaultdict(dict)
    entity_title_chunks: dict[str, dict[str, None]] = defaultdict(dict)
    descriptions: dict[str, str] = {}
    pair_count: Counter[tuple[str, str]] = Counter()
    pair_chunks: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)
    pair_evidence: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    articles: set[str] = set()  # names a document's whole title spells
    sentence_count = 0
    entity_sentences: Counter[str] = Counter()
    sentences_by_chunk: dict[str, list[tuple[str, set[str]]]] = {}
    for chunk in chunks:
        by_sentence: dict[tuple[int, int], set[str]] = defaultdict(set)
        title_keys = {m.key for m in chunk.mentions if m.sentence_start < 0}
        if title_keys and (whole := article_key(chunk.title)) in title_keys:
            articles.add(whole)
        for m in chunk.mentions:
            (node_types if m.node_only else types)[m.key][m.type] += 1
            surfaces[m.key][m.surface] += 1
            entity_chunks[m.key][chunk.chunk_id] = None
            entity_files[m.key][chunk.file_id] = None
            if m.sentence_start >= 0:
                by_sentence[(m.sentence_start, m.sentence_end)].add(m.key)
                descriptions.setdefault(m.key, chunk.text[m.sentence_start : m.sentence_end])
        for key in title_keys:
            descriptions.setdefault(key, chunk.text[:200])
            entity_title_chunks[key][chunk.chunk_id] = None
        chunk_sentences = []
        for (start, end), in_sentence in sorted(by_sentence.items()):
            sentence = chunk.text[start:end]
            present = in_sentence | title_keys
            sentence_count += 1
            entity_sentences.update(present)
            chunk_sentences.append((sentence, present))
            ordered = sorted(present)
            for i, a in enumerate(ordered):
                for b in ordered[i + 1 :]:
                    pair = (a, b)
                    pair_count[pair] += 1
                    pair_chunks[pair][chunk.chunk_id] = None
                    if len(pair_evidence[pair]) < MAX_EVIDENCE:
                        # Offsets into the chunk text, not a copy of the sentence: the graph stays small.
                        pair_evidence[pair].append({"chunkId": chunk.chunk_id, "start": start, "end": end})
        sentences_by_chunk[chunk.chunk_id] = chunk_sentences

    keys = sorted(types.keys() | node_types.keys())  # stable node order
    entities = []
    for key in keys:
        name = surfaces[key].most_common(1)[0][0]
        # Majority type of the typed mentions (of the node-only ones where none is typed); ties resolved by
        # a fixed preference so builds are reproducible.
        counted = types.get(key) or node_types[key]
        top = max(counted.items(), key=lambda kv: (kv[1], kv[0] != "other", kv[0]))[0]
        entities.append(
            Entity(
                id=entity_id(key),
                name=name,
                type=top,
                mentions=sum(types.get(key, {}).values()) + sum(node_types.get(key, {}).values()),
                chunk_ids=list(entity_chunks[key]),
                file_ids=list(entity_files[key]),
                description=descriptions[key],
                aliases=sorted(s for s in surfaces[key] if s != name),
                title_chunk_ids=list(entity_title_chunks[key]),
                article=key in articles,
            )
        )
    relations = []
    total = max(1, sentence_count)
    for (a, b), count in sorted(pair_count.items()):
        pmi = math.log((count * total) / (entity_sentences[a] * entity_sentences[b]))
        relations.append(
            Relation(
                id="r-" + content_hash(a, b),
                source=entity_id(a),
                target=entity_id(b),
                count=count,
                pmi=round(pmi, 4),
                chunk_ids=list(pair_chunks[(a, b)]),
                evidence=pair_evidence[(a, b)],
            )
        )
    communities = detect_communities(entities, relations, sentences_by_chunk, {entity_id(k): k for k in keys})
    return GraphData(entities, relations, communities)


def synonym_pairs(
    entities: Sequence[Entity],
    vectors: np.ndarray,
    threshold: float = SYNONYM_THRESHOLD,
    neighbours: int = SYNONYM_NEIGHBOURS,
) -> list[Synonym]:
    """Entity pairs with close name vectors: each entity's `neighbours` nearest at cosine >= `threshold`.

    Exact search in blocks of rows (memory stays at block x entities); the work is quadratic in the number of
    entities, which is why synonyms are an option of the build (the README states what they cost and gave).
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    n = len(entities)
    pairs: dict[tuple[int, int], float] = {}
    k = min(neighbours + 1, n)
    for start in range(0, n, SYNONYM_BLOCK):
        sims = vectors[start : start + SYNONYM_BLOCK] @ vectors.T
        for row in range(sims.shape[0]):
            sims[row, start + row] = -1.0  # not its own synonym
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (len(sims), 1))
        for row, candidates in enumerate(top):
            i = start + row
            for j in candidates:
                sim = float(sims[row, j])
                if sim >= threshold:
                    pairs[(min(i, int(j)), max(i, int(j)))] = round(sim, 4)
    return [Synonym(entities[i].id, entities[j].id, sim) for (i, j), sim in sorted(pairs.items())]


def detect_communities(
    entities: list[Entity],
    relations: list[Relation],
    sentences_by_chunk: dict[str, list[tuple[str, set[str]]]],
    key_of: dict[str, str],
) -> list[Community]:
    """Leiden communities (modularity, fixed seed) over entities that have at least one relation."""
    if not relations:
        return []
    import igraph as ig
    import leidenalg

    index = {e.id: i for i, e in enumerate(entities)}
    graph = ig.Graph(n=len(entities), edges=[(index[r.source], index[r.target]) for r in relations])
    graph.es["weight"] = [float(r.count) for r in relations]
    partition = leidenalg.find_partition(
        graph,
        leidenalg.ModularityVertexPartition,
        weights="weight",
        seed=LEIDEN_SEED,
        n_iterations=LEIDEN_ITERATIONS,
    )
    degree: defaultdict[str, float] = defaultdict(float)
    for r in relations:
        degree[r.source] += r.count
        degree[r.target] += r.count
    by_entity = {e.id: e for e in entities}
    groups = sorted(
        (sorted(entities[i].id for i in members) for members in partition if len(members) >= 2),
        key=lambda ids: (-len(ids), ids),
    )
    group_of = {m: gi for gi, members in enumerate(groups) for m in members}
    inner_relations: dict[int, list[Relation]] = defaultdict(list)
    for r in relations:
        gi = group_of.get(r.source)
        if gi is not None and group_of.get(r.target) == gi:
            inner_relations[gi].append(r)
    out = []
    for gi, members in enumerate(groups):
        keys = {key_of[m] for m in members}
        ranked = sorted(members, key=lambda m: (-degree[m], by_entity[m].name))
        inner = sorted(inner_relations[gi], key=lambda r: (-r.count, -r.pmi, r.id))
        chunk_ids = list(dict.fromkeys(c for m in ranked for c in by_entity[m].chunk_ids))
        file_ids = list(dict.fromkeys(f for m in ranked for f in by_entity[m].file_ids))
        scored: list[tuple[int, int, str]] = []
        seen: set[str] = set()
        for order, chunk_id in enumerate(chunk_ids):
            for sentence, skeys in sentences_by_chunk.get(chunk_id, []):
                hits = len(skeys & keys)
                if hits and sentence not in seen:
                    seen.add(sentence)
                    scored.append((-hits, order, sentence))
        sentences = [s for _h, _o, s in sorted(scored)[:MAX_REPORT_SENTENCES]]
        title = " / ".join(by_entity[m].name for m in ranked[:3])
        names = lambda r: f"{by_entity[r.source].name} — {by_entity[r.target].name}"  # noqa: E731
        report = "\n".join(
            [
                title,
                "Key entities: "
                + ", ".join(f"{by_entity[m].name} ({by_entity[m].type})" for m in ranked[:10]),
                "Key relations: " + "; ".join(f"{names(r)} ({r.count})" for r in inner[:5]),
                *sentences,
            ]
        )
        out.append(
            Community(
                id="cm-" + content_hash(*members),
                level=0,
                title=title,
                entity_ids=ranked,
                relation_ids=[r.id for r in inner],
                chunk_ids=chunk_ids,
                file_ids=file_ids,
                report=report,
            )
        )
    return out
