"""English names in text without letter case: which sentences the case-less tagger reads, how its names are
found, bounded and typed, and what the lexicon still shows."""

from __future__ import annotations

import numpy as np
import pytest

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import TAGGER_ROLE, EntityExtractor
from hybridrag.indexing.analysis.name_tagger import NameTagger, SpanReading, Tag
from tests.reference.stand_in_taggers import SureTagger

ANALYZER = Analyzer()
TYPED = EntityExtractor(ANALYZER)
RULES = EntityExtractor(ANALYZER, rules_only=True)


def _types(extractor: EntityExtractor, text: str) -> dict[str, str]:
    return {m.surface: m.type for m in extractor.extract(text)}


def test_text_without_letter_case_still_shows_the_names_the_lexicon_knows() -> None:
    """Countries, languages and nationalities are found in all-lower and all-capitals text alike; words that
    are also ordinary English ("turkey", "polish") and political camps are not looked for there by the
    lexicon (the case-less tagger reads "polish republicans" from the sentence as a name, as CoNLL-2003's
    annotators label such words; where it is sure of "china" or "turkey", so is the extraction: see
    `test_a_case_less_name_that_is_an_ordinary_word_too_needs_a_surer_tagger`)."""
    sentence = "he moved from india to new zealand, spoke hindi and ate turkey with polish republicans."
    expected = {"india": "place", "new zealand": "place", "hindi": "other"}
    assert _types(EntityExtractor(ANALYZER, english_tagger=False), sentence) == expected
    found = _types(TYPED, sentence)
    assert expected.items() <= found.items() and "polish" not in found
    assert _types(TYPED, sentence.upper()) == {k.upper(): v for k, v in found.items()}
    # Written with capitals, a capital letter tells the nationality from the verb.
    assert _types(TYPED, "He moved from India, spoke Hindi and met Polish voters in Turkey.") == {
        "India": "place",
        "Hindi": "other",
        "Polish": "other",
        "Turkey": "place",
    }


def test_the_tagger_finds_names_in_text_without_letter_case() -> None:
    """All-lower and all-capitals sentences get the same names, typed, where the rules see none."""
    sentence = "yesterday barack obama met angela merkel at the white house in washington."
    lower = _types(TYPED, sentence)
    assert lower == {"barack obama": "person", "angela merkel": "person", "washington": "place"} | {
        k: v for k, v in lower.items() if k == "white house"
    }
    assert _types(TYPED, sentence.upper()) == {k.upper(): v for k, v in lower.items()}
    assert _types(RULES, sentence) == {"washington": "place"}  # the lexicon's name alone


def test_case_less_sentences_go_to_the_case_less_tagger() -> None:
    """With a case-less tagger beside the other, sentences without letter case are read by it alone and
    cased sentences' names by the other alone; the version names both. Given one tagger, it does both."""

    class Stand:
        kinds = ("person", "organization", "place", "other")

        def __init__(self, version: str, kind: int) -> None:
            self.version, self.kind = version, kind
            self.tagged: list[str] = []
            self.read: list[str] = []

        def tag(self, texts: list[str]) -> list[list[Tag]]:
            self.tagged += texts
            return [[Tag(0, 3, self.kinds[self.kind], 0.9)] for _ in texts]

        def span_readings(
            self, texts: list[str], spans: list[list[tuple[int, int]]]
        ) -> list[list[SpanReading]]:
            self.read += texts
            sure = np.eye(4, dtype=np.float32)[self.kind]
            return [[SpanReading(sure, 0.0) for _ in s] for s in spans]

    cased, caseless = Stand("tagger-cased", 1), Stand("tagger-caseless", 0)
    extractor = EntityExtractor(ANALYZER, tagger=cased, caseless=caseless)  # type: ignore[arg-type]
    text = "Alice Smith met Bob in Paris. zoe met bob."
    found = extractor.extract(text)
    assert caseless.tagged == ["zoe met bob."] and caseless.read == []
    assert cased.tagged == [] and cased.read == ["Alice Smith met Bob in Paris."]
    assert {m.surface: m.type for m in found} == {
        "Alice Smith": "organization",
        "Bob": "organization",
        "Paris": "organization",
        "zoe": "person",
    }
    assert extractor.version.split("+")[2:4] == [f"tagger-cased-{TAGGER_ROLE}", "tagger-caseless-caseless"]
    alone = Stand("tagger-alone", 2)
    one = EntityExtractor(ANALYZER, tagger=alone)  # type: ignore[arg-type]
    assert {m.surface: m.type for m in one.extract(text)}["zoe"] == "place"
    assert alone.tagged == ["zoe met bob."] and "caseless" not in one.version


def test_a_head_word_alone_is_no_case_less_name() -> None:
    """In text without letter case, a word that says what a name is ("corporation", "river") names nothing
    by itself, however sure the tagger is; with a name before it, or "the olympics", it is kept."""

    sentence = "the motor corporation by the river sent toyota motor corporation to the olympics."

    class Sure:
        version, kinds = "tagger-sure", ("person", "organization", "place", "other")

        def tag(self, texts: list[str]) -> list[list[Tag]]:
            spans = [
                ("corporation", "organization"),
                ("river", "place"),
                ("toyota motor corporation", "organization"),
            ]
            found = [Tag(sentence.index(w), sentence.index(w) + len(w), k, 0.99) for w, k in spans]
            at = sentence.index("olympics")
            return [[*found, Tag(at, at + len("olympics"), "other", 0.99)] for _ in texts]

    extractor = EntityExtractor(ANALYZER, caseless=Sure())  # type: ignore[arg-type]
    assert {m.surface: m.type for m in extractor.extract(sentence)} == {
        "toyota motor corporation": "organization",
        "olympics": "other",
    }


def test_a_case_less_name_that_is_an_ordinary_word_too_needs_a_surer_tagger() -> None:
    """In text without letter case a name the lexicon knows that is an ordinary word too ("china", "turkey")
    is one where the tagger is at least `ORDINARY_NAME_MIN_CONFIDENCE` sure; any other name at
    `TAG_MIN_CONFIDENCE`."""
    from hybridrag.indexing.analysis.entities import ORDINARY_NAME_MIN_CONFIDENCE, TAG_MIN_CONFIDENCE

    sentence = "exports to china rose, toyota sold more and we ate turkey."
    between = (TAG_MIN_CONFIDENCE + ORDINARY_NAME_MIN_CONFIDENCE) / 2
    spans = [("china", "place", ORDINARY_NAME_MIN_CONFIDENCE), ("toyota", "organization", between)]
    spans.append(("turkey", "place", between))

    class Between:
        version, kinds = "tagger-between", ("person", "organization", "place", "other")

        def tag(self, texts: list[str]) -> list[list[Tag]]:
            return [
                [Tag(sentence.index(w), sentence.index(w) + len(w), k, c) for w, k, c in spans] for _ in texts
            ]

    extractor = EntityExtractor(ANALYZER, caseless=Between())  # type: ignore[arg-type]
    assert {m.surface: m.type for m in extractor.extract(sentence)} == {
        "china": "place",
        "toyota": "organization",
    }
    # The packaged case-less tagger tells the country from the porcelain, the polish and a guinea worm (0.86);
    # not the country from the bird ("we ate turkey": 0.99, a place).
    assert _types(TYPED, "exports to china rose by ten percent.") == {"china": "place"}
    assert _types(TYPED, "EXPORTS TO CHINA ROSE BY TEN PERCENT.") == {"CHINA": "place"}
    for sentence in (
        "she bought a set of fine china plates.",
        "the table was cleaned with furniture polish.",
        "diseases such as onchocerciasis, guinea worm and leprosy.",
    ):
        assert _types(TYPED, sentence) == {}, sentence


def test_a_case_less_name_is_found_by_its_words_name_mass_then_typed_by_them_together() -> None:
    """The tagger bounds names by each word's mass of "opens a name" / "goes on with one" / "O", whatever the
    type, and types each by its words together: a word whose mass is split between two types is a name even
    where "O" is its single most probable label, and a name whose words' labels change type is one name. Its
    confidence is the mean of 1 - P("O") over its words; its type confidence, its type's share of the types'
    products."""
    from hybridrag.indexing.analysis.name_tagger import CASELESS_FOLDER, MISC_LABELS

    tagger = NameTagger(CASELESS_FOLDER)  # reads model.json; no model is loaded to decode
    assert tagger.labels == list(MISC_LABELS)
    # [CLS] in tokyo tsushin kogyo and kyoto [SEP], a word piece a word.
    offsets = [(0, 0), (0, 2), (3, 8), (9, 16), (17, 22), (23, 26), (27, 32), (0, 0)]
    probs = np.full((len(offsets), len(MISC_LABELS)), 0.0, dtype=np.float32)

    def word(at: int, **mass: float) -> None:
        probs[at, MISC_LABELS.index("O")] = 1.0 - sum(mass.values())
        for label, p in mass.items():
            probs[at, MISC_LABELS.index(label.replace("_", "-"))] = p

    word(1)
    word(2, B_LOC=0.6, B_ORG=0.35)  # read label by label: a place of one word ...
    word(3, I_ORG=0.9)  # ... then an organisation
    word(4, I_ORG=0.8, I_LOC=0.1)
    word(5)
    word(6, B_LOC=0.35, B_ORG=0.25)  # "O" (0.4) is its most probable label
    tags = tagger._decode(probs, offsets, list(range(1, 7)))
    assert [(t.start, t.end, t.type) for t in tags] == [(3, 22, "organization"), (27, 32, "place")]
    org = 0.35 * 0.9 * 0.8
    loc = 0.6 * 0.0 * 0.1  # no I-LOC at "tsushin": a place ends before it
    assert tags[0].confidence == pytest.approx((0.95 + 0.9 + 0.9) / 3, abs=1e-6)
    assert tags[0].type_confidence == pytest.approx(org / (org + loc), abs=1e-4)
    assert tags[1].confidence == pytest.approx(0.6, abs=1e-6)
    assert tags[1].type_confidence == pytest.approx(0.35 / 0.6, abs=1e-4)
    assert tagger._decode(probs[:2], offsets[:2], []) == []


def test_a_case_less_name_the_tagger_cannot_type_is_no_name() -> None:
    """In text without letter case a tagger's name is one where it is sure the words are a name's
    (`TAG_MIN_CONFIDENCE`) and sure of its type (`TAG_MIN_TYPE_CONFIDENCE`): a name typed wrong costs typed
    F1 more than a name left out."""
    from hybridrag.indexing.analysis.entities import TAG_MIN_CONFIDENCE, TAG_MIN_TYPE_CONFIDENCE

    sentence = "she met hiroshi tanaka of sony in osaka."
    below = TAG_MIN_TYPE_CONFIDENCE - 0.01
    spans = [
        ("hiroshi tanaka", "person", TAG_MIN_CONFIDENCE, TAG_MIN_TYPE_CONFIDENCE),
        ("sony", "organization", 0.99, below),
        ("osaka", "place", TAG_MIN_CONFIDENCE - 0.01, 0.99),
    ]

    class Unsure:
        version, kinds = "tagger-unsure", ("person", "organization", "place", "other")

        def tag(self, texts: list[str]) -> list[list[Tag]]:
            return [
                [Tag(sentence.index(w), sentence.index(w) + len(w), k, c, t) for w, k, c, t in spans]
                for _ in texts
            ]

    extractor = EntityExtractor(ANALYZER, caseless=Unsure())  # type: ignore[arg-type]
    assert {m.surface: m.type for m in extractor.extract(sentence)} == {"hiroshi tanaka": "person"}


def test_a_case_less_name_before_a_thing_named_after_someone_is_a_persons() -> None:
    """Without letter case as with it: one word before a thing named after someone is a person's ("hilbert
    space", "galois theory"), and a family of living things is `other`, whatever type the tagger gave; a
    name of two words, or one before no such thing, keeps the tagger's."""
    sentences = [
        "it acts on a hilbert space and uses galois theory.",
        "IT ACTS ON A HILBERT SPACE AND USES GALOIS THEORY.",
        "the spiders of kotlassiidae met acme corp in zorbia.",
    ]
    tagged = {
        "hilbert": "organization",
        "galois": "other",
        "kotlassiidae": "place",
        "acme corp": "organization",
        "zorbia": "place",
    }

    class Tagging:
        version, kinds = "tagger-tagging", ("person", "organization", "place", "other")

        def tag(self, texts: list[str]) -> list[list[Tag]]:
            return [
                [
                    Tag(t.lower().index(name), t.lower().index(name) + len(name), kind, 0.99, 0.99)
                    for name, kind in tagged.items()
                    if name in t.lower()
                ]
                for t in texts
            ]

    extractor = EntityExtractor(ANALYZER, caseless=Tagging())  # type: ignore[arg-type]
    found = [{m.surface.lower(): m.type for m in extractor.extract(s)} for s in sentences]
    assert found[0] == found[1] == {"hilbert": "person", "galois": "person"}
    assert found[2] == {"kotlassiidae": "other", "acme corp": "organization", "zorbia": "place"}


def test_a_case_less_name_cut_at_a_hyphen_is_made_whole() -> None:
    """The tagger's words end at every hyphen, so in text without letter case it tags pieces of hyphenated
    names ("bcl-" of "bcl-2", "-gamma" of "ifn-gamma", "-" alone): such a name takes the letters and digits
    beyond its hyphen, up to the next hyphen; a name with no letter or digit is none; a name already whole
    ("il-6", "anti-" before a space) is kept as it is."""

    sentence = "bcl-2 and ifn-gamma raise il-6 in x-y cells, and anti- or toll-like receptors + tnf."
    pieces = [("bcl-", 0), ("-gamma", 0), ("il-6", 0), ("-", 1), ("anti-", 0), ("-like", 0), ("+", 0)]

    class Pieces:
        version, kinds = "tagger-pieces", ("person", "organization", "place", "other")

        def tag(self, texts: list[str]) -> list[list[Tag]]:
            found = []
            for piece, nth in pieces:
                at = sentence.index(piece, sentence.index("x-y") if nth else 0)
                found.append(Tag(at, at + len(piece), "other", 0.99))
            return [found for _ in texts]

    extractor = EntityExtractor(ANALYZER, caseless=Pieces())  # type: ignore[arg-type]
    assert [m.surface for m in extractor.extract(sentence)] == [
        "bcl-2",
        "ifn-gamma",
        "il-6",
        "x-y",
        "anti-",
        "toll-like",
    ]


def test_a_case_less_name_holding_a_lexicon_name_is_the_longer_name() -> None:
    """In text without letter case a sure name of the tagger that holds one of the lexicon's names and more
    is that longer name ("new york city", "united states air force academy"), not the lexicon's; one that
    only overlaps a lexicon name ("york." of the last "new york.") still gives way to it, and a name the
    tagger ends before an initialism's last full stop takes it ("u.s." of "a u.s. senator")."""
    sentence = "new york city sent cadets to the united states air force academy, and a u.s. senator went to new york."
    spans = [
        ("new york city", "place"),
        ("united states air force academy", "organization"),
        ("u.s", "place"),
        ("york.", "place"),
    ]

    extractor = EntityExtractor(ANALYZER, caseless=SureTagger(spans))  # type: ignore[arg-type]
    assert sorted((m.surface, m.type) for m in extractor.extract(sentence)) == [
        ("new york", "place"),
        ("new york city", "place"),
        ("u.s.", "place"),
        ("united states air force academy", "organization"),
    ]
    # The packaged case-less tagger reads the city whole.
    assert _types(TYPED, "he moved to new york city in 1990.") == {"new york city": "place"}


def test_a_quoted_phrase_without_letter_case_is_a_title() -> None:
    """In text without letter case a quoted phrase of two words or more within a sentence is a work's title,
    one name of type `other` (or what its own words say: "... university"), in place of the tagger's names
    inside it; a name the tagger found as the whole phrase keeps its type, one across the quotes blocks
    it, and one quoted word ("eaten", scare quotes), a quote that opens the sentence (speech) or one with a
    bracket inside is no title. A tagger's name of digits alone is none."""
    sentence = (
        '"we won" he said: she starred in the film " the tunnel of love " with gig young, in "it happened to '
        'jane," in 1959 and at the "open air university"; the "new york times" called it "eaten", and "the '
        'x (1959) show" ran in "grand central station" later.'
    )
    spans = [
        ("tunnel of love", "other"),
        ("gig young", "person"),
        ("jane", "person"),
        ("1959", "other"),
        ("new york times", "organization"),
        ('central station" later', "place"),
    ]

    extractor = EntityExtractor(ANALYZER, caseless=SureTagger(spans))  # type: ignore[arg-type]
    assert sorted((m.surface, m.type) for m in extractor.extract(sentence)) == [
        ('central station" later', "place"),
        ("gig young", "person"),
        ("it happened to jane", "other"),
        ("new york times", "organization"),
        ("open air university", "organization"),
        ("the tunnel of love", "other"),
    ]
    # The same in capitals (read without letter case too); with letter case the capitalisation rules read it.
    assert ("THE TUNNEL OF LOVE", "other") in {
        (m.surface, m.type) for m in extractor.extract(sentence.upper())
    }
