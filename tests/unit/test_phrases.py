"""Case-free names: corpus phrases and title names found the same in any letter case."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hybridrag.indexing.analysis.entities import normalize_name
from hybridrag.indexing.analysis.phrases import NameDictionary, _span_key, corpus_phrases, sentence_words

DOCS = [
    ("a", "Interleukin IL-6 drives tumor necrosis in mice. The BRCA1 gene was not involved."),
    ("b", "Tumor necrosis follows IL-6 signalling. BRCA1 carriers were excluded."),
    ("c", "In this cohort tumor necrosis was rare; IL-6 was high."),
    ("d", "The weather was fine and the study ran for a year."),
]


def test_phrases_are_the_same_in_any_letter_case() -> None:
    found = corpus_phrases(DOCS)
    assert found == {"il-6": 3, "brca1": 2}
    # Plain words are no identifier, nor are numbers alone; one passage links nothing.
    assert corpus_phrases([("a", "The A380 flew in 1937."), ("b", "It flew in 1937.")]) == {}
    for recase in (str.lower, str.upper):
        assert corpus_phrases([(i, recase(t)) for i, t in DOCS]) == found


def test_a_phrase_in_too_many_documents_links_nothing() -> None:
    docs = [(str(i), f"Report {i}: COVID-19 was measured again in cohort {i}.") for i in range(200)]
    docs += [(f"x{i}", "IL-6 and BRCA1 in one place.") for i in range(3)]
    found = corpus_phrases(docs)
    assert "covid-19" not in found  # in every passage of 203 (more than the 1% share, floor 20)
    assert set(found) == {"il-6", "brca1"}


def test_names_are_found_in_any_case_with_sentence_offsets() -> None:
    names = {"scott derrickson": "person", "paris": "place"}
    for text in (
        "Scott Derrickson directed it.",
        "scott derrickson directed it.",
        "SCOTT DERRICKSON DIRECTED IT.",
    ):
        (m,) = NameDictionary(names, proper=True).find(text, [])
        assert (
            m.key == "scott derrickson"
            and m.type == "person"
            and (m.sentence_start, m.sentence_end) == (0, 29)
        )
        assert m.surface.lower() == "scott derrickson"
    assert [s.keys for s in sentence_words("Derrickson's film. 東京の話。")] == [["derrickson", "film"]]
    # Where case says something, a name is capitalised: "the paris office" is no mention of Paris.
    proper, terms = NameDictionary(names, proper=True), NameDictionary(names, proper=False)
    assert proper.find("We met at the paris office.", []) == []
    assert [m.key for m in proper.find("we met at the paris office.", [])] == ["paris"]
    assert [m.key for m in terms.find("We met at the paris office.", [])] == ["paris"]


def test_ascii_sentences_fold_as_any_other_sentence() -> None:
    """ASCII sentences take a shorter path (their words lower-cased, not the sentence folded and split
    again): the same words and keys as the general path, which a non-ASCII word sends a sentence down."""
    sentences = [
        "James's boss's report on IL-6 and the U.S.'s A380 fleet.",
        "O'NEIL'S CAR WAS 'NEW' with Covid-19 cases.",
        "it's the dog's bone...and 's alone",
    ]
    for sentence in sentences:
        (plain,) = sentence_words(sentence)
        (general,) = sentence_words("Zürich " + sentence)
        assert plain.words == general.words[1:] and plain.keys == general.keys[1:]
        assert plain.keys == [normalize_name(w) for w in plain.words]
        # A span of folded words is looked up by its key without asking the name cache when it is ASCII.
        for keys in (plain.keys, general.keys, [*plain.keys, "x's"]):
            spans = [" ".join(keys[i:j]) for i in range(len(keys)) for j in range(i + 1, len(keys) + 1)]
            assert [_span_key(span) for span in spans] == [normalize_name(span) for span in spans]


@given(
    st.lists(st.sampled_from([*"aZ9_ .'-\n!", "'s", "'S", "..", "x.y", "Il-6", "it's", "--"]), max_size=30)
)
@settings(max_examples=400, deadline=None)
def test_ascii_words_are_the_runs_of_word_characters_stripped(pieces: list[str]) -> None:
    """An ASCII sentence's words are found by one pattern that leaves out the leading and trailing full
    stops and apostrophes: the runs of word characters, hyphens, apostrophes and stops, stripped of those,
    and the empty ones dropped; its keys are the words lower-cased (a possessive dropped)."""
    import re

    text = "".join(pieces)
    for s in sentence_words(text):
        sentence = text[s.start : s.end]
        words = [w for w in (w.strip(".'") for w in re.findall(r"[\w\-'.]+", sentence)) if w]
        assert s.words == words
        assert s.keys == [
            k[:-2] if k.endswith("'s") and len(k) > 2 else k for k in (w.lower() for w in words)
        ]


def test_a_word_block_keeps_its_ids_from_block_to_block_and_through_pickle() -> None:
    import pickle

    from hybridrag.indexing.analysis.phrases import WordBlock

    block = WordBlock(surfaces=True)
    block.add(sentence_words("Tumour necrosis factor. The tumour grows."))
    block.add(sentence_words("NECROSIS again."))
    words, sentence, chunk = block.word_arrays()
    spelled = block.spelled()
    assert [spelled[w] for w in words.tolist()] == [
        *"tumour necrosis factor the tumour grows necrosis again".split()
    ]
    assert sentence.tolist() == [0, 0, 0, 1, 1, 1, 2, 2] and chunk.tolist() == [0, 0, 1]
    assert list(block.sentence_span) == [0, 23, 24, 41, 0, 15]
    assert len(block.surface_ids or ()) == 8  # "NECROSIS" is written otherwise than "necrosis"
    block.clear()
    sent = pickle.loads(pickle.dumps(block))
    for b in (block, sent):  # a known word keeps its id, a new one takes the next
        b.add(sentence_words("factor cells"))
        assert b.word_arrays()[0].tolist() == [2, 6] and b.new_words(6) == ["cells"]
        assert b.word_arrays()[2].tolist() == [0]
    plain = WordBlock()
    plain.add(sentence_words("Tumour necrosis."))
    assert plain.surface_ids is None and len(plain.surfaces) == 0 and len(plain.sentence_span) == 0
