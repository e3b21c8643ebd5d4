"""Concepts: graph nodes from the corpus' own statistics when text has no names, titles or capitals."""

from __future__ import annotations

import json
import math
import pickle
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import jsonl_corpus

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS
from hybridrag.indexing.analysis.concepts import (
    MAX_CHUNK_SHARE,
    MAX_CHUNKS_FLOOR,
    MIN_CHUNKS,
    MIN_NPMI,
    ConceptCounter,
    _concept_word,
    corpus_concepts,
)
from hybridrag.indexing.analysis.phrases import SentenceWords, sentence_words
from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
from hybridrag.indexing.builds.graph_build import build_graph
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.graph import ChunkMentions
from hybridrag.indexing.stores.graph_arrays import load_graph

ABSTRACTS = [
    ("a", "tumour necrosis factor drives inflammation in rheumatoid arthritis synovium."),
    ("b", "blocking tumour necrosis factor reduced synovium swelling in mice with arthritis."),
    ("c", "autophagy protects neurons of the substantia nigra from oxidative stress."),
    ("d", "loss of dopaminergic neurons in the substantia nigra follows impaired autophagy."),
    ("e", "the committee met on tuesday and adjourned."),
]


def test_concepts_are_recurring_pairs_and_specific_words_in_any_letter_case() -> None:
    found = corpus_concepts(ABSTRACTS)
    assert {"tumour necrosis", "substantia nigra", "autophagy", "synovium", "arthritis", "neurons"} <= set(
        found
    )
    assert found["tumour necrosis"] == 2 and found["substantia nigra"] == 2
    # Nothing from one chunk alone, no stopword, no short word.
    assert not {"committee", "tuesday", "the", "of", "in"} & set(found)
    upper = corpus_concepts([(i, t.upper()) for i, t in ABSTRACTS])
    assert upper == found  # the same concepts whatever the letter case
    # A concept in every chunk links nothing in particular (share limit with a floor for small corpora).
    crowd = [(str(i), f"shared phrase in chunk {i} about thing{i % 7}") for i in range(3000)]
    assert "shared phrase" not in corpus_concepts(crowd)


def _chunks(texts: list[tuple[str, str]]) -> list[ChunkMentions]:
    return [ChunkMentions(cid, f"f-{cid}", text, [], "") for cid, text in texts]


def test_concepts_are_typeless_nodes_that_link_passages_without_names() -> None:
    graph = build_graph(_chunks([(i, t.upper()) for i, t in ABSTRACTS]))
    by_name = {e.name.lower(): e for e in graph.entities}
    assert by_name["tumour necrosis"].concept and by_name["tumour necrosis"].type == "other"
    assert set(by_name["substantia nigra"].chunk_ids) == {"c", "d"}
    assert all(e.concept for e in graph.entities)  # upper-cased text names nothing: concepts alone
    # A name that is also a concept is a name (cased text): it keeps its type and is no concept.
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.analysis.entities import EntityExtractor

    extractor = EntityExtractor(Analyzer())
    texts = [
        "Scott Derrickson directed it. Scott Derrickson was born in Denver.",
        "A film by Scott Derrickson.",
    ]
    cased = build_graph(
        [ChunkMentions(f"c{i}", "f", t, extractor.extract(t), "") for i, t in enumerate(texts)]
    )
    assert not any(e.concept for e in cased.entities if e.name.lower() == "scott derrickson")


TITLES = {"c": "Substantia Nigra", "d": "Dopaminergic Neurons"}


def test_a_concept_spelled_as_a_title_is_the_titles_entity_and_only_related_entities_form_communities() -> (
    None
):
    # Upper-cased text: the title "Substantia Nigra" is found case-free in "c" and "d", in the same linking
    # pass as the concepts, and the pair is then no concept (a concept is left to a name the chunks mention);
    # in "d" it relates to that passage's own title.
    chunks = [
        ChunkMentions(cid, f"f-{cid}", text.upper(), [], TITLES.get(cid, "")) for cid, text in ABSTRACTS
    ]
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.analysis.entities import EntityExtractor

    extractor = EntityExtractor(Analyzer())
    chunks = [
        ChunkMentions(
            c.chunk_id,
            c.file_id,
            c.text,
            [*extractor.extract_title(c.title), *extractor.extract(c.text)],
            c.title,
        )
        for c in chunks
    ]
    graph = build_graph(chunks)
    by_name = {e.name.lower(): e for e in graph.entities}
    nigra = by_name["substantia nigra"]
    assert not nigra.concept and set(nigra.chunk_ids) == {"c", "d"}
    assert by_name["tumour necrosis"].concept
    # Communities hold only entities with a relation (concepts have none; Leiden is not given them).
    related = {r.source for r in graph.relations} | {r.target for r in graph.relations}
    assert graph.communities and all(set(c.entity_ids) <= related for c in graph.communities)
    assert any(e.concept for e in graph.entities)


def test_concept_mentions_type_no_chunk_and_survive_save_and_load(tmp_path: Path) -> None:
    """Built into an index: concept nodes in the graph, no entity type on the chunks they sit in (an
    `entityTypes` filter is never met by a concept), the flag stored with the graph."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "d.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": "", "text": t.upper()}) + "\n" for i, t in ABSTRACTS), "utf-8"
    )
    IndexBuilder(tmp_path / "index", BuildConfig(embedding_model=None)).build(folder)
    path = versions.current_version(tmp_path / "index").path
    graph, _ = load_graph(path / "graph")
    assert any(e.concept for e in graph.entities)
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.analysis.entities import EntityExtractor, chunk_types
    from hybridrag.indexing.stores.tables import CHUNKS, read_version_table

    # A chunk's types are its names' (the extractor's), whatever concepts it holds.
    extractor = EntityExtractor(Analyzer())
    table = read_version_table(path, CHUNKS)
    for text, types in zip(
        table.column("text").to_pylist(), table.column("entity_types").to_pylist(), strict=True
    ):
        assert types == chunk_types(extractor.extract(text)), text


def test_the_walk_follows_specific_concepts_more_than_common_ones() -> None:
    from hybridrag.indexing.stores.graph_arrays import GraphArrays
    from hybridrag.indexing.stores.graph_order import ListOrder

    texts = [
        (
            f"c{i}",
            " ".join(["common words" if i < 15 else "filler", "rare pairing" if i < 2 else "", f"item{i}"]),
        )
        for i in range(40)
    ]
    graph = build_graph(_chunks(texts))
    arrays = GraphArrays.derive(graph, ListOrder([c for c, _t in texts]))
    index = {e.name: i for i, e in enumerate(graph.entities)}
    ne = len(graph.entities)
    step = arrays.transition
    rare, common = index["rare pairing"], index["common words"]
    assert step[ne + 0, rare] > 5 * step[ne + 0, common] > 0


def test_an_incremental_add_gives_the_concepts_a_full_build_gives(tmp_path: Path) -> None:
    def folder(name: str, rows: list[tuple[str, str]]) -> Path:
        return jsonl_corpus(tmp_path / name, [{"_id": i, "title": "", "text": t.upper()} for i, t in rows])

    full = tmp_path / "full"
    IndexBuilder(full, BuildConfig(embedding_model=None)).build(folder("all", ABSTRACTS))
    step = tmp_path / "step"
    builder = IndexBuilder(step, BuildConfig(embedding_model=None))
    builder.build(folder("first", ABSTRACTS[:3]))
    builder.add(folder("rest", ABSTRACTS[3:]))
    builder.delete(["e"])
    IndexBuilder(tmp_path / "less", BuildConfig(embedding_model=None)).build(folder("less", ABSTRACTS[:4]))

    def concepts(index_dir: Path) -> dict[str, list[str]]:
        graph, _ = load_graph(versions.current_version(index_dir).path / "graph")
        return {e.name: sorted(e.chunk_ids) for e in graph.entities if e.concept}

    assert concepts(step) == concepts(tmp_path / "less")
    assert "SUBSTANTIA NIGRA" in concepts(step)
    assert np.all([len(v) >= 2 for v in concepts(full).values()])


def test_names_linked_in_shards_side_by_side_are_those_one_process_links() -> None:
    """`link_corpus_names` and `build_graph` over shards of the chunks in child processes (`builds.shards`)
    give every chunk the mentions one process gives it (titles' names in any case, phrases, concepts, in
    their order) and the same graph."""
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.analysis.entities import EntityExtractor
    from hybridrag.indexing.builds.graph_build import link_corpus_names
    from hybridrag.indexing.builds.shards import PARALLEL_MIN_ITEMS, shard_workers

    extractor = EntityExtractor(Analyzer())
    texts = [
        *(t for _i, t in ABSTRACTS),
        *(t.upper() for _i, t in ABSTRACTS),
        "IL-6 and BRCA1 were measured in the Substantia Nigra by Scott Derrickson's team in Denver.",
        "il-6 levels rose; brca1 did not. scott derrickson reported it from denver.",
        "SUBSTANTIA NIGRA NEURONS LOST AUTOPHAGY; IL-6 ROSE.",
    ]
    chunks = [
        ChunkMentions(
            f"c{i}",
            f"f{i % 4}",
            text,
            [*extractor.extract_title(TITLES.get("cd"[i % 2], "")), *extractor.extract(text)],
            TITLES.get("cd"[i % 2], ""),
        )
        for i, text in enumerate(texts * 3)
    ]
    alone = link_corpus_names(chunks, workers=1)
    assert any(m.concept for c in alone for m in c.mentions)  # the corpus has concepts...
    assert any(m.key == "il-6" and not m.concept for c in alone for m in c.mentions)  # ...and phrases
    assert any(m.key == "substantia nigra" and not m.concept for c in alone[5:10] for m in c.mentions)
    assert link_corpus_names(chunks, workers=3) == alone  # two children and this process
    few = chunks[9:12]  # shards of one chunk each
    assert link_corpus_names(few, workers=3) == link_corpus_names(few, workers=1)
    # The whole graph: the shards' tallies merged in chunk order are one process' tally.
    one, three = build_graph(chunks, workers=1), build_graph(chunks, workers=3)
    assert one.relations and one.communities and three == one
    # A shard's failure in a child is raised here, with what went wrong.
    from hybridrag.indexing.builds import graph_build
    from hybridrag.indexing.builds.shards import Shards

    with pytest.raises(RuntimeError, match="AttributeError"), Shards([chunks[0], 5], 2) as shards:
        shards.map(graph_build._count_names)
    # Side by side only where it pays: from PARALLEL_MIN_ITEMS chunks on, one process a core.
    assert shard_workers(10) == 1 and shard_workers(10, workers=4) == 4 and shard_workers(3, workers=8) == 3
    assert shard_workers(PARALLEL_MIN_ITEMS) >= 1


def test_concepts_found_a_block_at_a_time_tally_as_each_chunks_mentions_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ConceptFinder` (concepts found over a block's word arrays, added up by concept) gives the tally that
    linking each chunk's concept mentions one by one gives: counts, chunks, surfaces and their order, first
    descriptions, the other names' mentions and relations untouched."""
    from hybridrag.indexing.analysis.entities import Mention
    from hybridrag.indexing.builds import graph_build

    rng = np.random.default_rng(3)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    items = ["".join(rng.choice(letters, size=6)) for _ in range(120)] + [
        "tumour necrosis",
        "Tumour Necrosis tumour necrosis",  # the pair again in one sentence: its first word alone there
        "necrosis",
        "substantia nigra",
        "café crème",  # not ASCII: a pair's key of its own
        "il-6",
        "synovium's",
        "the",
        "of",
        "Neurons",
    ]
    chunks = []
    for i in range(100):
        sentences = [" ".join(rng.choice(items, size=5)) + "." for _ in range(2)]
        text = " ".join(s[0].upper() + s[1:] if i % 2 else s.lower() for s in sentences)
        if i % 3 == 0:  # sentences without a word between and after the others: a pair never spans them
            text = text.replace(". ", ". ... ", 1) + " ?!"
        # A title's name, linked where the text spells it; an extracted name in the first sentence.
        mentions = [Mention("neurons", "Neurons", "other", -1, -1)] if i % 9 == 0 else []
        if i % 7 == 0:
            mentions.append(Mention("il-6", "il-6", "other", 0, len(sentences[0])))
        chunks.append(ChunkMentions(f"c{i}", f"f{i % 5}", text, mentions))
    graph_chunks = [graph_build._graph_mentions(c) for c in chunks]
    titles = graph_build.span_titles(graph_chunks)

    class OneShard:
        def map(self, fn, *args):  # type: ignore[no-untyped-def]
            return [fn(graph_chunks, *args)]

    dictionaries = graph_build._corpus_dictionaries(graph_chunks, OneShard())  # type: ignore[arg-type]
    assert dictionaries[-1].concepts and {
        "tumour necrosis",
        "tumour",
        "café crème",
        "substantia nigra",
    } <= set(dictionaries[-1].names)
    expected = graph_build._Tally()
    for c in graph_chunks:
        expected.add(graph_build._with_title_spans(graph_build._with_names(c, dictionaries), titles))
    for block in (len(chunks), 16, 1):
        monkeypatch.setattr(graph_build, "CONCEPT_BLOCK", block)
        tally = graph_build._tallied(graph_chunks, dictionaries, titles)
        for name in graph_build._Tally.__dataclass_fields__:
            mine, theirs = getattr(tally, name), getattr(expected, name)
            assert mine == theirs, name
            if isinstance(theirs, dict):  # and each key's chunks and surfaces in the order they came
                assert all(list(mine[k]) == list(v) for k, v in theirs.items() if isinstance(v, dict)), name
    # The cases it has to get right were there: a pair again in one sentence (its first word found alone
    # there: "tumour" is never written alone), both casings of a pair, a pair not in ASCII.
    assert expected.node_types["tumour"] and expected.surfaces["café crème"]
    assert sum(not s.words for c in graph_chunks for s in sentence_words(c.text)) >= 60
    assert {"Tumour Necrosis", "tumour necrosis"} <= set(expected.surfaces["tumour necrosis"])


def _counted_word_by_word(sentences_of: list[list[SentenceWords]]) -> dict[str, int]:
    """`ConceptCounter.result` as the formula reads: every word and adjacent content-word pair counted one
    at a time, in plain Python."""
    words: Counter[str] = Counter()
    word_chunks: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    pair_chunks: Counter[tuple[str, str]] = Counter()
    total = 0
    for sentences in sentences_of:
        in_chunk: set[str] = set()
        pairs_in_chunk: set[tuple[str, str]] = set()
        for s in sentences:
            words.update(s.keys)
            in_chunk.update(s.keys)
            total += len(s.keys)
            for a, b in zip(s.keys, s.keys[1:], strict=False):
                if all(len(w) >= 2 and w not in ENGLISH_STOPWORDS and not w.isdigit() for w in (a, b)):
                    pairs[(a, b)] += 1
                    pairs_in_chunk.add((a, b))
        word_chunks.update(in_chunk)
        pair_chunks.update(pairs_in_chunk)
    most = max(MAX_CHUNKS_FLOOR, int(MAX_CHUNK_SHARE * len(sentences_of)))
    out = {w: n for w, n in word_chunks.items() if MIN_CHUNKS <= n <= most and _concept_word(w)}
    for (a, b), n in pairs.items():
        p = n / total
        if not (MIN_CHUNKS <= pair_chunks[(a, b)] <= most and p < 1.0):
            continue
        if math.log(p / ((words[a] / total) * (words[b] / total))) / -math.log(p) >= MIN_NPMI:
            out[f"{a} {b}"] = pair_chunks[(a, b)]
    return out


def test_concepts_counted_a_block_at_a_time_and_merged_are_those_counted_word_by_word(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(7)
    # Rare words (a share limit of 20 chunks at this size) and 30 collocations, each in 4 or 5 chunks.
    vocabulary = [
        *"the of in and a to 1999 42 x é café naïve o'neill's well-known".split(),
        *("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 8))) for _ in range(1500)),
    ]
    collocations = [
        f"{a} {b}" for a, b in zip(rng.sample(vocabulary, 30), rng.sample(vocabulary, 30), strict=True)
    ]
    texts = []
    for i in range(400):
        sentences = [
            " ".join(rng.choices(vocabulary, k=rng.randint(1, 14))) for _ in range(rng.randint(1, 4))
        ]
        sentences[0] += " " + collocations[i // 3 % 30] if i % 3 == 0 else ""
        texts.append(". ".join(s.upper() if i % 5 == 0 else s for s in sentences) + ".")
    texts += ["", "...", "tumour necrosis"]  # no words at all, and a chunk of one pair
    sentences_of = [list(sentence_words(t)) for t in texts]
    expected = _counted_word_by_word(sentences_of)
    assert sum(" " in k for k in expected) >= 10 and sum(" " not in k for k in expected) >= 100, expected
    # Blocks of a few hundred words (many blocks, a chunk never split), and the corpus in three parts
    # counted apart, one of them sent through pickle as a shard's counter is, merged in order.
    monkeypatch.setattr(ConceptCounter, "BLOCK_WORDS", 300)
    parts = [ConceptCounter() for _ in range(3)]
    for i, sentences in enumerate(sentences_of):
        parts[i * 3 // len(sentences_of)].add(sentences)
    parts[1] = pickle.loads(pickle.dumps(parts[1]))
    for part in parts[1:]:
        parts[0].merge(part)
    assert parts[0].result() == expected
    one = ConceptCounter()
    for sentences in sentences_of:
        one.add(sentences)
    assert one.result() == expected
    assert list(one.result()) == list(parts[0].result())  # the same order too
    assert ConceptCounter().result() == {}
