"""Building the knowledge graph from entity mentions, with no LLM: link names across the corpus, aggregate
entities and sentence co-occurrence relations, synonym pairs, Leiden communities and their reports.

The records it makes are `stores.graph`'s; `builds.build` calls `build_graph` at every build, update and
regraph, and `stores.graph_arrays` derives what the service maps from them.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS, Analyzer
from hybridrag.indexing.analysis.concepts import ConceptCounter
from hybridrag.indexing.analysis.entities import (
    DISAMBIGUATION,
    OTHER,
    TITLE_NAME_MAX_WORDS,
    Mention,
    case_free_title,
    casing_informative,
    lexicon_name,
    normalize_name,
)
from hybridrag.indexing.analysis.phrases import (
    ConceptFinder,
    FoundConcept,
    NameDictionary,
    PhraseCounter,
    SentenceWords,
    sentence_words,
)
from hybridrag.indexing.analysis.text import content_hash, has_japanese, reads_as_japanese
from hybridrag.indexing.builds.shards import Shards, shard_workers
from hybridrag.indexing.stores.csr import index_type
from hybridrag.indexing.stores.graph import ChunkMentions, Community, Entity, GraphData, Relation, Synonym
from hybridrag.indexing.stores.graph_arrays import GraphArrays
from hybridrag.indexing.stores.graph_delta import DELTA_SCHEMA
from hybridrag.indexing.stores.graph_index import entities_named

TITLE_SPAN_MIN_WORDS = 2
# Chosen on HotpotQA-100 dev (benchmarks/README.md): e5's name vectors are crowded (median nearest neighbour
# 0.93), so only near-duplicates of a name ("Kerry Saxby-Junna" / "Kerry-Anne Saxby-Junna") pass 0.95.
SYNONYM_THRESHOLD = 0.95
SYNONYM_NEIGHBOURS = 5
LEIDEN_SEED = 42
# Two passes (leidenalg's default) reach nearly all of the modularity; iterating to convergence took 35
# passes and ~40 s on SciFact's 22k entities for a marginal gain.
LEIDEN_ITERATIONS = 2
SYNONYM_BLOCK = 2048
MAX_EVIDENCE = 3
MAX_REPORT_SENTENCES = 5
# Chunks whose concept mentions are found together (`_tallied`): the arrays of their words, ~70 bytes a word.
CONCEPT_BLOCK = 50_000


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
    titles = span_titles(chunks)
    return [_with_title_spans(c, titles) for c in chunks] if titles else list(chunks)


def span_titles(chunks: Iterable[ChunkMentions]) -> dict[str, Mention]:
    """The titles' names `link_title_spans` links (of `TITLE_SPAN_MIN_WORDS` words or more): key -> the
    title's own mention, whose type the linked mention takes, so a long name's type ("... of Nine Inch
    Nails": organisation) never outvotes what the title entity is."""
    titles: dict[str, Mention] = {}
    for c in chunks:
        for m in c.mentions:
            if m.sentence_start < 0 and len(m.key.split()) >= TITLE_SPAN_MIN_WORDS:
                titles.setdefault(m.key, m)
    return titles


def _with_title_spans(c: ChunkMentions, titles: dict[str, Mention]) -> ChunkMentions:
    """The chunk with its mentions of the `span_titles` that its longer names contain."""
    if not titles:
        return c
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
                    added.append(Mention(key, surface, titles[key].type, m.sentence_start, m.sentence_end))
    return replace(c, mentions=[*c.mentions, *added]) if added else c


TITLE_NAME_MIN_CHARS = 3  # a one- or two-letter title ("X", "Go") would match too much text


def title_names(chunks: Sequence[ChunkMentions]) -> dict[str, str]:
    """The corpus' document titles' names (key -> type), to be linked wherever text spells them, in any
    letter case.

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
    return titles


def link_corpus_names(chunks: Sequence[ChunkMentions], workers: int | None = None) -> list[ChunkMentions]:
    """Mentions of the corpus-wide names in every chunk, in this order: the titles' names (`title_names`),
    the corpus' case-free phrases (`phrases.corpus_phrases`, chunks counted as documents), then its
    concepts (`concepts.corpus_concepts`: node-only, typed `other`).

    A concept spelled as a name the chunks mention is left to the name, whose own rules say where it links
    (a one-word title by its exact name only: "Paris Hilton" does not mention the city). Two passes over
    the corpus' words: one counts the phrases and concepts, one links titles, phrases and concepts; both
    run over shards of the chunks side by side (`shards`; `workers`: how many, by default one a core from
    `shards.PARALLEL_MIN_ITEMS` chunks on), with the result of one process.

    One linking pass is enough because the names the linking finds cannot be concepts unless the chunks
    already mention them: a title's name is a title mention's key, and a phrase is one word with a digit or
    an inner hyphen, while a concept is one word of letters or two words."""
    with Shards(chunks, shard_workers(len(chunks), workers)) as shards:
        dictionaries = _corpus_dictionaries(chunks, shards)
        return [c for part in shards.map(_linked, dictionaries) for c in part]


def _corpus_dictionaries(
    chunks: Sequence[ChunkMentions], shards: Shards[ChunkMentions]
) -> list[NameDictionary]:
    """The corpus' titles, phrases and concepts to link (`link_corpus_names`), counted shard by shard."""
    counted = shards.map(_count_names)
    phrases, concepts = counted[0]
    for their_phrases, their_concepts in counted[1:]:  # in chunk order: the counters' order is one process'
        phrases.merge(their_phrases)
        concepts.merge(their_concepts)
    names = {m.key for c in chunks for m in c.mentions}
    return [
        d
        for d in (
            NameDictionary(title_names(chunks), proper=True),
            NameDictionary(dict.fromkeys(phrases.result(), OTHER), proper=False),
            NameDictionary(
                {k: OTHER for k in concepts.result() if k not in names}, proper=False, concepts=True
            ),
        )
        if d.names
    ]


def _count_names(shard: Sequence[ChunkMentions]) -> tuple[PhraseCounter, ConceptCounter]:
    """A shard's phrase and concept counts (chunks counted as documents)."""
    phrases, concepts = PhraseCounter(), ConceptCounter()
    for c in shard:
        sentences = list(sentence_words(c.text))
        phrases.add(c.chunk_id, sentences)
        concepts.add(sentences)
    return phrases, concepts


def _with_names(
    c: ChunkMentions,
    dictionaries: Sequence[NameDictionary],
    sentences: Sequence[SentenceWords] | None = None,
) -> ChunkMentions:
    """The chunk with its mentions of the dictionaries' names, in dictionary order (a later dictionary sees
    what an earlier one found: a name found once is not found again). `sentences`: `sentence_words` of its
    text, when the caller has them."""
    if not dictionaries:
        return c
    if sentences is None:
        sentences = list(sentence_words(c.text))
    for dictionary in dictionaries:
        added = dictionary.find(c.text, c.mentions, sentences)
        if added:
            c = replace(c, mentions=[*c.mentions, *added])
    return c


def _linked(shard: Sequence[ChunkMentions], dictionaries: Sequence[NameDictionary]) -> list[ChunkMentions]:
    return [_with_names(c, dictionaries) for c in shard]


def _tallied(
    shard: Sequence[ChunkMentions], dictionaries: Sequence[NameDictionary], titles: dict[str, Mention]
) -> _Tally:
    """A shard's chunks linked (`link_corpus_names`, `link_title_spans`) and tallied: the titles' and
    phrases' mentions one chunk at a time, the concepts' (a dozen a sentence, most of the mentions) found and
    added up a block of chunks at a time by a `ConceptFinder`. The tally is the one of every chunk's linked
    mentions: a concept's key is no other mention's (`link_corpus_names`), and its mentions add to its
    entity alone (no relation, no sentence's names)."""
    tally = _Tally()
    names = [d for d in dictionaries if not d.concepts]
    finder = next((ConceptFinder(d) for d in dictionaries if d.concepts), None)
    for start in range(0, len(shard), CONCEPT_BLOCK):
        block = shard[start : start + CONCEPT_BLOCK]
        for c in block:
            sentences = list(sentence_words(c.text)) if dictionaries else []
            tally.add(_with_title_spans(_with_names(c, names, sentences), titles))
            if finder is not None:
                finder.add(sentences)
        if finder is not None:
            tally.merge(_concept_tally(finder.found(), block))
    return tally


def _concept_tally(found: Sequence[FoundConcept], block: Sequence[ChunkMentions]) -> _Tally:
    """The tally of a block's concept mentions, as `_Tally.add` makes it of their `Mention`s (node-only,
    typed `other`: `_corpus_dictionaries`)."""
    tally = _Tally()
    for f in found:
        chunk, start, end = f.first
        tally.node_types[f.key] = Counter({OTHER: f.mentions})
        tally.surfaces[f.key] = Counter(f.surfaces)
        tally.chunks[f.key] = [block[i].chunk_id for i in f.chunks]
        tally.descriptions[f.key] = block[chunk].text[start:end]
    return tally


def _graph_mentions(chunk: ChunkMentions) -> ChunkMentions:
    """The chunk without the lexicon's names that English sentences without letter case showed (countries,
    languages, nationalities; "china" too, where the tagger was sure of it). They type the chunk for
    filters, but as nodes they joined case-less passages that share only a country or a nationality: on
    HotpotQA-100 upper-cased the graph alone fell from 0.932 to 0.920 nDCG@10 with them (graph format 6).
    The name tagger's people, organisations, places and other names in such sentences are nodes, as
    capitalised names are in cased text (format 9): on HotpotQA-100 without titles, lower-cased, the graph
    alone rose from 0.851 to 0.871 with them (benchmarks/docs/concepts.md, "Concepts"). A quoted phrase such a
    sentence reads as a title types the chunk but is no node either (`entities.case_free_title`: about half
    of them are names; as nodes, HotpotQA-100 without titles lost 0.002 nDCG@10 hybrid). The rest of such
    text's graph comes from the corpus' titles, phrases and concepts (`link_corpus_names`)."""
    kept = [
        m
        for m in chunk.mentions
        if m.sentence_start < 0
        or _cased_or_japanese(chunk.text[m.sentence_start : m.sentence_end])
        or not (
            lexicon_name(m.surface)
            or case_free_title(chunk.text[m.sentence_start : m.sentence_end], m.surface)
        )
    ]
    return chunk if len(kept) == len(chunk.mentions) else replace(chunk, mentions=kept)


def _cased_or_japanese(sentence: str) -> bool:
    return casing_informative(sentence) or reads_as_japanese(sentence)


def delta_links(arrays: GraphArrays, chunks: Sequence[ChunkMentions], analyzer: Analyzer) -> pa.Table:
    """Links of passages written after the graph was built (`stores.graph_delta`): to the graph's entities
    their mentions name as a build keeps them (`_graph_mentions`; a title mention marks the passage as
    about the entity) and to those whose names their text spells in any letter case (the titles, phrases
    and concepts a build's corpus-wide linking would find, `graph_index.entities_named`); a name the graph
    does not hold is kept by its key (a node the merge will make); a name the passage's whole title spells
    is marked, as the build makes it an article. A passage without any keeps one row without an entity."""
    rows: list[dict[str, Any]] = []
    for chunk in chunks:
        whole = article_key(chunk.title)
        # Entity id -> (its key when the graph lacks it, about: a title mention, article: the whole title).
        linked: dict[str, tuple[str | None, bool, bool]] = {}
        for m in _graph_mentions(chunk).mentions:
            eid = entity_id(m.key)
            key = None if arrays.entity_row(eid) is not None else m.key
            _k, about, article = linked.get(eid, (key, False, False))
            title = m.sentence_start < 0
            linked[eid] = (key, about or title, article or (title and m.key == whole))
        for row in entities_named(arrays, chunk.text, analyzer):
            linked.setdefault(arrays.entity_id(row), (None, False, False))
        if not linked:
            rows.append({"chunk_id": chunk.chunk_id})
        rows += [
            {"chunk_id": chunk.chunk_id, "entity_id": e, "key": k, "about": a, "article": t}
            for e, (k, a, t) in linked.items()
        ]
    return pa.Table.from_pylist(rows, schema=DELTA_SCHEMA)


def article_key(title: str) -> str:
    """The name a document's whole title spells, less a trailing disambiguation ("Mercury (planet)"),
    normalised as names are; "" for no title."""
    return normalize_name(DISAMBIGUATION.sub("", title).strip()) if title.strip() else ""


def build_graph(chunks: Iterable[ChunkMentions], workers: int | None = None) -> GraphData:
    """Aggregate mentions into entities and sentence co-occurrence relations, then detect communities.

    The corpus' names are linked and the mentions tallied over shards of the chunks side by side (`shards`;
    `workers` as `link_corpus_names`), the shards' tallies merged in chunk order: the graph of one process.
    """
    # Case-less sentences' names leave before the links: a title's name found in case-less text stays.
    graph_chunks = [_graph_mentions(c) for c in chunks]
    titles = span_titles(graph_chunks)  # title mentions come from the titles, not from the linking
    with Shards(graph_chunks, shard_workers(len(graph_chunks), workers)) as shards:
        dictionaries = _corpus_dictionaries(graph_chunks, shards)
        tallies = shards.map(_tallied, dictionaries, titles)
    tally = tallies[0]
    for other in tallies[1:]:
        tally.merge(other)
    keys = sorted(tally.types.keys() | tally.node_types.keys())  # stable node order
    ids = {key: entity_id(key) for key in keys}
    file_of = {c.chunk_id: c.file_id for c in graph_chunks}
    entities = [tally.entity(key, ids[key], file_of) for key in keys]
    relations = tally.relations(ids)
    texts = {c.chunk_id: c.text for c in graph_chunks}
    communities = detect_communities(
        entities, relations, tally.sentences_by_chunk, {i: k for k, i in ids.items()}, texts
    )
    return GraphData(entities, relations, communities)


@dataclass(slots=True)
class _Tally:
    """What the chunks' mentions add up to, by normalised name: the entities' types, surfaces and chunks
    (their files follow from the chunks: `entity`), and the sentence co-occurrences that become relations."""

    types: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    node_types: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))  # node-only
    surfaces: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    # The chunks of a name (and of a title's), each once, in chunk order: lists (8 bytes a chunk, against ~50 for
    # the dicts they were), since a chunk is tallied once and its entries are appended together (`add`).
    chunks: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    title_chunks: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    descriptions: dict[str, str] = field(default_factory=dict)
    articles: set[str] = field(default_factory=set)  # names a document's whole title spells
    named: set[str] = field(default_factory=set)  # keys some mention names (not only as a concept)
    # A chunk's sentences with names: their offsets in its text (not copies: the shards send their tallies
    # to be merged) and the names in each, sorted (a tuple: a set is ~200 bytes more, for every such
    # sentence). The relations are counted from them once every chunk is in (`relations`), as arrays.
    sentences_by_chunk: dict[str, list[tuple[int, int, tuple[str, ...]]]] = field(default_factory=dict)

    def add(self, chunk: ChunkMentions) -> None:
        by_sentence: dict[tuple[int, int], set[str]] = defaultdict(set)
        title_keys = {m.key for m in chunk.mentions if m.sentence_start < 0}
        if title_keys and (whole := article_key(chunk.title)) in title_keys:
            self.articles.add(whole)
        chunk_id, descriptions = chunk.chunk_id, self.descriptions
        # Bound once a chunk: this loop runs for every mention of the corpus. A count goes up by `get` (a
        # `Counter`'s missing key costs a call in Python).
        types, node_types, named, surfaces, chunks = (
            self.types,
            self.node_types,
            self.named,
            self.surfaces,
            self.chunks,
        )
        for m in chunk.mentions:
            key = m.key
            typed = (node_types if m.node_only else types)[key]
            typed[m.type] = typed.get(m.type, 0) + 1
            if not m.concept:
                named.add(key)
            written = surfaces[key]
            written[m.surface] = written.get(m.surface, 0) + 1
            held = chunks[key]
            if not held or held[-1] != chunk_id:  # this chunk's entry is the last one if it has one
                held.append(chunk_id)
            if m.sentence_start >= 0:
                # Concepts relate to nothing: a sentence holds a dozen of them, and their pairs would outnumber
                # every other edge (SciFact: a graph.json of 471 MB); they link passages through mentions.
                if not m.concept:
                    by_sentence[(m.sentence_start, m.sentence_end)].add(key)
                if key not in descriptions:
                    descriptions[key] = chunk.text[m.sentence_start : m.sentence_end]
        for key in title_keys:
            descriptions.setdefault(key, chunk.text[:200])
            self.title_chunks[key].append(chunk_id)
        self.sentences_by_chunk[chunk_id] = [
            (start, end, tuple(sorted(in_sentence | title_keys)))
            for (start, end), in_sentence in sorted(by_sentence.items())
        ]

    def merge(self, other: _Tally) -> None:
        """Add the tally of chunks that come after this one's: every count, list and first occurrence
        (type, surface, description) ends as one tally of all the chunks in order would."""
        # Per key: counters add up (`update`); chunk lists append the other's, whose chunks are other
        # chunks (a shard's, a block's concepts', whose keys no name has: `_tallied`).
        counted: tuple[tuple[dict[Any, Any], dict[Any, Any]], ...] = (
            (self.types, other.types),
            (self.node_types, other.node_types),
            (self.surfaces, other.surfaces),
        )
        for mine, theirs in counted:
            for key, part in theirs.items():
                mine[key].update(part)
        listed: tuple[tuple[dict[Any, list[str]], dict[Any, list[str]]], ...] = (
            (self.chunks, other.chunks),
            (self.title_chunks, other.title_chunks),
        )
        for ours, theirs in listed:
            for key, part in theirs.items():
                ours[key].extend(part)
        for key, text in other.descriptions.items():
            self.descriptions.setdefault(key, text)
        self.articles |= other.articles
        self.named |= other.named
        self.sentences_by_chunk.update(other.sentences_by_chunk)

    def entity(self, key: str, eid: str, file_of: Mapping[str, str]) -> Entity:
        """`file_of`: each chunk's file. A name's files are those of its chunks in the order they came (a
        chunk id is one file's: a build skips a document id seen twice), so the tally need not hold them
        beside its chunks for every name."""
        name = self.surfaces[key].most_common(1)[0][0]
        # Majority type of the typed mentions (of the node-only ones where none is typed); ties resolved by a
        # fixed preference so builds are reproducible.
        counted = self.types.get(key) or self.node_types[key]
        top = max(counted.items(), key=lambda kv: (kv[1], kv[0] != "other", kv[0]))[0]
        return Entity(
            id=eid,
            name=name,
            type=top,
            mentions=sum(self.types.get(key, {}).values()) + sum(self.node_types.get(key, {}).values()),
            chunk_ids=self.chunks[key],  # the tally's own list: not copied (millions of ids at 1M chunks)
            file_ids=list(dict.fromkeys(map(file_of.__getitem__, self.chunks[key]))),
            description=self.descriptions[key],
            aliases=sorted(s for s in self.surfaces[key] if s != name),
            title_chunk_ids=list(self.title_chunks[key]),
            article=key in self.articles,
            concept=key not in self.named,
        )

    def relations(self, ids: dict[str, str]) -> list[Relation]:
        """The sentence co-occurrences as relations, in key order; `ids`: every key's entity id, in key
        order. A pair's count is the sentences that name both, its chunks those sentences' (each once, in
        chunk order), its evidence the first `MAX_EVIDENCE` of them (offsets into the chunk's text, not
        copies: the graph stays small), its PMI over the sentences with names."""
        pairs = co_occurrences(self.sentences_by_chunk, {key: rank for rank, key in enumerate(ids)})
        total = max(1, pairs.sentences)
        keys, eids, chunk_ids = list(ids), list(ids.values()), list(self.sentences_by_chunk)
        in_sentences = pairs.entity_sentences.tolist()
        bounds, chunk_bounds = pairs.bounds.tolist(), pairs.chunk_bounds.tolist()
        pair_chunks = [chunk_ids[c] for c in pairs.chunks.tolist()]
        evidence = [
            {"chunkId": chunk_ids[c], "start": start, "end": end}
            for c, start, end in zip(
                pairs.evidence_chunk.tolist(),
                pairs.evidence_start.tolist(),
                pairs.evidence_end.tolist(),
                strict=True,
            )
        ]
        evidence_bounds = pairs.evidence_bounds.tolist()
        out = []
        for p, (a, b) in enumerate(zip(pairs.first.tolist(), pairs.second.tolist(), strict=True)):
            count = bounds[p + 1] - bounds[p]
            pmi = math.log((count * total) / (in_sentences[a] * in_sentences[b]))
            out.append(
                Relation(
                    id="r-" + content_hash(keys[a], keys[b]),
                    source=eids[a],
                    target=eids[b],
                    count=count,
                    pmi=round(pmi, 4),
                    chunk_ids=pair_chunks[chunk_bounds[p] : chunk_bounds[p + 1]],
                    evidence=evidence[evidence_bounds[p] : evidence_bounds[p + 1]],
                )
            )
        return out


@dataclass(frozen=True, slots=True)
class CoOccurrences:
    """The names' sentence co-occurrences (`co_occurrences`), pairs in (first, second) order. Pair p is named
    together by `bounds[p + 1] - bounds[p]` sentences, in the chunks `chunks[chunk_bounds[p]:chunk_bounds[p
    + 1]]` (each once, in order), and its first `MAX_EVIDENCE` sentences are the entries
    `evidence_bounds[p]:evidence_bounds[p + 1]` of `evidence_chunk`, `evidence_start` and `evidence_end`."""

    first: np.ndarray  # each pair's names' ranks, first < second
    second: np.ndarray
    bounds: np.ndarray
    chunk_bounds: np.ndarray
    chunks: np.ndarray
    evidence_bounds: np.ndarray
    evidence_chunk: np.ndarray
    evidence_start: np.ndarray
    evidence_end: np.ndarray
    entity_sentences: np.ndarray  # each name's sentences
    sentences: int  # sentences with names


def co_occurrences(
    sentences_by_chunk: Mapping[str, Sequence[tuple[int, int, Sequence[str]]]], rank: Mapping[str, int]
) -> CoOccurrences:
    """Every pair of names that share a sentence, counted as arrays. Chunks are numbered in the order given
    and so are sentences (each chunk's in the order it lists them); names by `rank`, which must order each
    sentence's names as the sentence lists them.

    A tally kept pair by pair in dicts was most of a large build's graph memory (three dict entries, a
    tuple and lists for each of the corpus' distinct pairs), and the shards sent it to be merged; the
    sentences with their names say the same. Sentences with n names are gathered n at a time and paired by
    index, the pairs' occurrences sorted by (pair, sentence): counts, chunks and first sentences are runs.
    """
    lengths: list[int] = []
    chunk_of: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    flat: list[int] = []
    for c, held in enumerate(sentences_by_chunk.values()):
        for start, end, keys in held:
            lengths.append(len(keys))
            chunk_of.append(c)
            starts.append(start)
            ends.append(end)
            flat.extend(map(rank.__getitem__, keys))
    sentences = len(lengths)
    size = index_type(max(len(rank), sentences, len(flat)))
    names = np.asarray(flat, dtype=size)
    length = np.asarray(lengths, dtype=np.int64)
    del flat, lengths
    entity_sentences = np.bincount(names, minlength=len(rank))
    offsets = np.cumsum(length) - length
    codes, of_sentence = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=size)]
    for n in np.unique(length[length >= 2]).tolist():
        rows = np.flatnonzero(length == n)
        held = names[offsets[rows][:, None] + np.arange(n)]
        a, b = np.triu_indices(n, 1)
        # Row by row: each sentence's pairs together, as `of_sentence` repeats its number.
        codes.append(((held[:, a].astype(np.int64) << 32) | held[:, b]).ravel())
        of_sentence.append(np.repeat(rows.astype(size), len(a)))
    del names, offsets
    code, sentence = np.concatenate(codes), np.concatenate(of_sentence)
    del codes, of_sentence
    order = np.lexsort((sentence, code))
    code, sentence = code[order], sentence[order]
    del order
    new = np.ones(len(code), dtype=bool)
    np.not_equal(code[1:], code[:-1], out=new[1:])
    firsts = np.flatnonzero(new)
    bounds = np.append(firsts, len(code))
    pair = code[firsts]
    del code
    # A pair's sentences come in order, so do its chunks: a new one is unlike the entry before it.
    chunk = np.asarray(chunk_of, dtype=size)[sentence]
    np.not_equal(chunk[1:], chunk[:-1], out=new[1:])
    new[firsts] = True
    distinct = np.flatnonzero(new)
    within = np.arange(len(sentence)) - np.repeat(firsts, np.diff(bounds))
    shown = np.flatnonzero(within < MAX_EVIDENCE)
    evidence = sentence[shown]
    return CoOccurrences(
        first=(pair >> 32).astype(size),
        second=(pair & 0xFFFFFFFF).astype(size),
        bounds=bounds,
        chunk_bounds=np.searchsorted(distinct, bounds),
        chunks=chunk[distinct],
        evidence_bounds=np.searchsorted(shown, bounds),
        evidence_chunk=chunk[shown],
        evidence_start=np.asarray(starts, dtype=np.int64)[evidence],
        evidence_end=np.asarray(ends, dtype=np.int64)[evidence],
        entity_sentences=entity_sentences,
        sentences=sentences,
    )


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
    sentences_by_chunk: dict[str, list[tuple[int, int, tuple[str, ...]]]],
    key_of: dict[str, str],
    texts: dict[str, str],
) -> list[Community]:
    """Leiden communities (modularity, fixed seed) over entities that have at least one relation, each
    reported with the sentences (`sentences_by_chunk`: offsets into `texts`, each chunk's text) that name
    most of its entities."""
    if not relations:
        return []
    import igraph as ig
    import leidenalg

    # Only the entities with a relation are the partition's nodes (in entity order): the others could only
    # be communities of one, and Leiden spends its time on them (a 20k-chunk corpus has 64k concepts
    # without relations: 14.6 s with them, 3.0 s without, the same modularity).
    related = {r.source for r in relations} | {r.target for r in relations}
    nodes = [e for e in entities if e.id in related]
    index = {e.id: i for i, e in enumerate(nodes)}
    graph = ig.Graph(n=len(nodes), edges=[(index[r.source], index[r.target]) for r in relations])
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
        (sorted(nodes[i].id for i in members) for members in partition if len(members) >= 2),
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
            for start, end, skeys in sentences_by_chunk.get(chunk_id, []):
                hits = sum(1 for k in skeys if k in keys)
                if not hits:
                    continue
                sentence = texts[chunk_id][start:end]
                if sentence not in seen:
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
