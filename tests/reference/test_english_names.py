"""English names found by letter case (`indexing.analysis.english_names`): what the capitalisation rules
find and type, and what the tagger settles among their candidates (a sentence's first word, a heading's
label, an office before a name, a number after one, a joining word between two)."""

from __future__ import annotations

import numpy as np
import pytest

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.english_names import EnglishNames
from hybridrag.indexing.analysis.entities import EntityExtractor, chunk_types
from hybridrag.indexing.analysis.name_tagger import NameTagger, SpanReading
from tests.reference.stand_in_taggers import ReadingTagger, outside_tagger

ANALYZER = Analyzer()
TYPED = EntityExtractor(ANALYZER)
RULES = EntityExtractor(ANALYZER, rules_only=True)


@pytest.mark.parametrize(
    ("sentence", "names"),
    [
        # "The" capitalised within a sentence belongs to the name; at the start it is the sentence's.
        ("The song was covered by The Rolling Stones in 1965.", ["The Rolling Stones"]),
        ("The Rolling Stones covered the song.", ["Rolling Stones"]),
        # So after an opening quote within a sentence (a work's title); not after a bracket, nor at the
        # start of a quoted sentence.
        ('He wrote " The Old Mill stands " then.', ["The Old Mill"]),
        ("He left ( The Times said so ).", ["Times"]),
        ('" The Old Mill stands " he wrote.', ["Old Mill"]),
        ("He spoke to the Rolling Stones.", ["Rolling Stones"]),
        ("# The Tokaido Shinkansen", ["Tokaido Shinkansen"]),
        # "&" joins the words of one name.
        ("He bought shares of Procter & Gamble.", ["Procter & Gamble"]),
        (
            "He produced Paul Revere & the Raiders and Wilkin & Sons.",
            ["Paul Revere & the Raiders", "Wilkin & Sons"],
        ),
    ],
)
def test_a_capitalised_the_and_an_ampersand_belong_to_the_name(sentence: str, names: list[str]) -> None:
    found = RULES.english.spans(sentence)
    assert [span.name for span in found] == names
    for span in found:  # the models read the name's own words, without "The"
        assert sentence[span.start : span.end] == span.name.removeprefix("The ")


@pytest.mark.parametrize(
    ("sentence", "names"),
    [
        # Within a sentence an ordinal, a determiner or a pronoun before another capitalised word is the name's.
        ("She organised units during the First World War.", ["First World War"]),
        (
            "He fought in the Third Mithridatic War, and his son sang Her Music.",
            ["Third Mithridatic War", "Her Music"],
        ),
        # At the sentence's start it is the sentence's; days, months and prepositions never start one.
        ("First Union bought it.", ["Union"]),
        ("In May Smith said Monday First Union will buy it.", ["Smith", "First Union"]),
        ("It rose with increasing crime In Germany last year.", ["Germany"]),
        # A lone word does not become a name.
        ("Then the results were, Several times, the same.", []),
        # A company's legal form after a comma is its name's; alone it names nothing.
        ("Toyota Motor Co., Ltd. was founded in 1937.", ["Toyota Motor Co., Ltd"]),
        ("He joined Ferris, Baker Watts, Inc. in May.", ["Ferris", "Baker Watts, Inc"]),
        # Capitalised words an en dash or an ampersand joins are one word; a range of months is no name.
        (
            "She studied at Texas A&M University–Corpus Christi from November–December on.",
            ["Texas A&M University–Corpus Christi"],
        ),
        ("He derived the Stefan–Boltzmann law.", ["Stefan–Boltzmann"]),
        ("Smith–the famous one–said so at AT&T.", ["AT&T"]),
    ],
)
def test_a_name_within_a_sentence_keeps_its_first_word_and_its_legal_form(
    sentence: str, names: list[str]
) -> None:
    found = RULES.english.spans(sentence)
    assert [span.name for span in found] == names
    for span in found:
        assert sentence[span.start : span.end] == span.name
    legal = [span for span in found if span.name.endswith(("Ltd", "Inc"))]
    assert all(span.rule_type == "organization" for span in legal)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        # A compound's first part says what the whole is: a university's campus, not a place.
        ("University of Wisconsin–River Falls", "organization"),
        ("Texas A&M University–Corpus Christi", "organization"),
        ("San Francisco–Oakland Bay Bridge", "place"),
        ("Burmese–Siamese War", "other"),
    ],
)
def test_a_compound_name_is_typed_by_its_first_part_first(name: str, kind: str) -> None:
    assert EnglishNames.sure_type(name.split()) == kind


@pytest.mark.parametrize(
    ("sentence", "names"),
    [
        ('It is named after the song " Sympathy for the Devil " by the band.', ["Sympathy for the Devil"]),
        ("She read “The Lord of the Rings” twice.", ["The Lord of the Rings"]),
        ('She sang "Songs of Love and Hate," then left.', ["Songs of Love and Hate"]),
        # Within a sentence, a quoted phrase whose every word is capitalised.
        ('It peaked with the single " Melissa " in May.', ["Melissa"]),
        ('The album " At Fillmore East " sold well.', ["At Fillmore East"]),
        # Not a title in title case: a species' name, a sentence quoted, a letter, a quote that opens the
        # sentence.
        ('The genus " Acer capillipes " grows.', []),
        ('He said "Come in and sit down" to her.', []),
        ('It is shaped like the letter " A " here.', []),
        ('" Melissa " was a hit.', []),
    ],
)
def test_a_quoted_title_is_one_name_of_a_work(sentence: str, names: list[str]) -> None:
    """A quoted phrase in title case with small words inside is one name, a work's ("other"); without the
    rule, capitalisation found its pieces ("Sympathy", "Devil")."""
    quoted = [span for span in RULES.english.spans(sentence) if span.known]
    assert [span.name for span in quoted] == names
    for span in quoted:
        assert span.rule_type == "other" and sentence[span.start : span.end] == span.name
    found = EntityExtractor(ANALYZER).extract(sentence)
    assert [(m.surface, m.type) for m in found if m.surface in names] == [(n, "other") for n in names]


def test_a_lone_first_word_is_a_name_only_where_the_tagger_reads_one() -> None:
    """One capitalised word that starts a sentence ("Acme grew fast.") is a name where the tagger reads it
    as one (its "O" probability at most `INITIAL_NAME_MAX_OUTSIDE`), typed as any other; otherwise it is
    only the sentence's start. Without the tagger's types the rules skip it, as they always did."""
    from hybridrag.indexing.analysis.entities import INITIAL_NAME_MAX_OUTSIDE

    outside = {
        "Acme": 0.1,
        "Shares": 0.95,
        "Bolt": INITIAL_NAME_MAX_OUTSIDE,
        "Crux": INITIAL_NAME_MAX_OUTSIDE + 0.01,
    }
    organization = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)
    tagger = ReadingTagger(lambda text, a, b: SpanReading(organization, outside[text[a:b]]))
    text = "Acme grew fast. Shares fell. Bolt grew too. Crux did not."
    found = EntityExtractor(ANALYZER, tagger=tagger).extract(text)  # type: ignore[arg-type]
    assert [(m.surface, m.type, m.node_only) for m in found] == [
        ("Acme", "organization", False),
        ("Bolt", "organization", False),
    ]
    for without in (
        EntityExtractor(ANALYZER, tagger=tagger, tagger_types=False),  # type: ignore[arg-type]
        EntityExtractor(ANALYZER, rules_only=True),
    ):
        assert without.extract(text) == []
    # A title's first word was never skipped, and is not read for it.
    assert [m.surface for m in EntityExtractor(ANALYZER, tagger=tagger).extract_title("Shares")] == ["Shares"]  # type: ignore[arg-type]


def test_a_first_word_that_only_starts_the_sentence_is_left_out_of_the_name() -> None:
    """A name of several capitalised words that starts its sentence ("Besides Amasia", "Teammate Russell
    Ingall") loses its first word where the tagger's "O" probability for that word is at least
    `FIRST_WORD_MIN_OUTSIDE`, and is whole otherwise ("Guru Dutt"), as it is within a sentence, in a quoted
    title and without the tagger's types. So does a first word before "of" ("Activation of AMPK" is "AMPK",
    whose capital is its own even alone), unless it says what the name is ("Port of Spain")."""
    from hybridrag.indexing.analysis.english_names import FIRST_WORD_MIN_OUTSIDE

    outside = {
        "Besides": 0.998,
        "Guru": 0.58,
        "Twelver": FIRST_WORD_MIN_OUTSIDE,
        "Nearly": 0.94,
        "RESULTS": 0.99,
        "BACKGROUND": 0.99,
        "Patients": 0.9,
        "Port": 0.999,
        "Activation": 0.999,
        "Loss": 0.999,
        "Students": 0.94,
        "Tet2": 0.6,  # alone at a sentence's start, no name (`INITIAL_NAME_MAX_OUTSIDE`)
    }

    tagger = outside_tagger(outside, "place")
    text = (
        "Besides Amasia Smith, few came. Guru Dutt was overlooked. Twelver Jones spoke. "
        "Nearly Anna Brown left. Port of Spain grew. He met Besides Amasia there. "
        "Activation of AMPK followed. Loss of Tet2 followed. Students of Matanzas High School came."
    )
    found = EntityExtractor(ANALYZER, tagger=tagger).extract(text)  # type: ignore[arg-type]
    assert [m.surface for m in found] == [
        "Amasia Smith",
        "Guru Dutt",
        "Jones",
        "Nearly Anna Brown",
        "Port of Spain",
        "Besides Amasia",
        "AMPK",
        "Tet2",
        "Students of Matanzas High School",
    ]
    assert [m.surface for m in EntityExtractor(ANALYZER, tagger=tagger).extract("Tet2 followed.")] == []  # type: ignore[arg-type]
    # What is left starts the sentence in its turn: a small word there is no name's, and one word is a
    # name only where the tagger reads one (`INITIAL_NAME_MAX_OUTSIDE`).
    labelled = "RESULTS We found it. BACKGROUND Patients came. BACKGROUND Acme grew."
    found = EntityExtractor(ANALYZER, tagger=tagger).extract(labelled)  # type: ignore[arg-type]
    assert [m.surface for m in found] == ["Acme"]
    for without in (
        EntityExtractor(ANALYZER, tagger=tagger, tagger_types=False),  # type: ignore[arg-type]
        EntityExtractor(ANALYZER, rules_only=True),
    ):
        assert "Besides Amasia Smith" in [m.surface for m in without.extract(text)]
    # A quoted title's words follow an opening quote, where a capital may start a sentence: it stays whole.
    sentence = 'He sang " Besides Amasia Smith " there.'
    assert [m.surface for m in EntityExtractor(ANALYZER, tagger=tagger).extract(sentence)] == [  # type: ignore[arg-type]
        "Besides Amasia Smith"
    ]


def test_a_plural_initialism_is_a_node_that_types_nothing() -> None:
    """ "HSCs", "RCTs" name kinds of things: graph nodes that claim no type for their chunk, however sure the
    tagger is of a name; "NASA" and "CD4" beside them are names as before."""
    tagger = outside_tagger({}, "organization")
    text = "Several HSCs from RCTs were sent to NASA with CD4 cells."
    found = EntityExtractor(ANALYZER, tagger=tagger).extract(text)  # type: ignore[arg-type]
    assert [(m.surface, m.type, m.node_only) for m in found] == [
        ("HSCs", "organization", True),
        ("RCTs", "organization", True),
        ("NASA", "organization", False),
        ("CD4", "organization", False),
    ]
    assert chunk_types(found) == ["organization"]


def test_saint_begins_a_name_where_a_title_is_left_out() -> None:
    """ "St." and "Saint" are a name's first word ("St. Louis", "St Albans", "St. Paul's Cathedral", "Saint
    Peter"), as the gold files have them, not a personal title that the name leaves out ("Dr. Watson"),
    with the tagger's types or without."""
    text = (
        "He moved from St. Louis to St Albans and prayed at St. Paul's Cathedral. "
        "Dr. Watson stayed with Saint Peter."
    )
    names = ["St. Louis", "St Albans", "St. Paul's Cathedral", "Watson", "Saint Peter"]
    for extractor in (
        EntityExtractor(ANALYZER),
        EntityExtractor(ANALYZER, english_tagger=False),
        EntityExtractor(ANALYZER, rules_only=True),
    ):
        assert [m.surface for m in extractor.extract(text)] == names


def test_an_office_before_a_persons_name_is_left_out_of_it() -> None:
    """An office's words before a person's name ("Prime Minister", "Lieutenant Colonel", "Baron") are left
    out of it where the tagger's mean "O" probability over them is at least `OFFICE_MIN_OUTSIDE`: the rest is
    a person's name, a name the lexicon knows before the office stays one ("Israeli"), and one word left is a
    name only where the tagger reads one. The name stays whole where the tagger reads the office's words as
    a name's ("Cardinal Health", "Captain Jack"), where "of" follows them, where what follows says it is no
    person's ("Duke Energy Corp"), and without the tagger's types."""
    from hybridrag.indexing.analysis.english_names import OFFICE_MIN_OUTSIDE

    outside = {
        "Prime Minister": 0.99,
        "Lieutenant Colonel": 0.99,
        "Baron": OFFICE_MIN_OUTSIDE,
        "Dame": 0.7,  # left out at 0.5; a first word would be kept (`FIRST_WORD_MIN_OUTSIDE`)
        "Sunshine": 0.9,
        "Cardinal": 0.01,
        "Captain": OFFICE_MIN_OUTSIDE - 0.01,
        "Governor": 0.99,
        "Duke": 0.99,
    }

    tagger = outside_tagger(outside, "organization")
    extractor = EntityExtractor(ANALYZER, tagger=tagger)  # type: ignore[arg-type]
    expected = {
        "Israeli Prime Minister Benjamin Netanyahu spoke.": [
            ("Israeli", "other"),
            ("Benjamin Netanyahu", "person"),
        ],
        "Lieutenant Colonel Edward Braddock marched.": [("Edward Braddock", "person")],
        "He met Baron Churchill there.": [("Churchill", "person")],
        "He met Dame Sunshine there.": [],
        "Cardinal Health cut jobs.": [("Cardinal Health", "organization")],
        "He met Captain Jack there.": [("Captain Jack", "organization")],
        "He met the Governor of Florida there.": [("Governor of Florida", "organization")],
        "He met Duke Energy Corp there.": [("Duke Energy Corp", "organization")],
    }
    for sentence, names in expected.items():
        assert [(m.surface, m.type) for m in extractor.extract(sentence)] == names, sentence
    without = EntityExtractor(ANALYZER, tagger=tagger, tagger_types=False)  # type: ignore[arg-type]
    sentence = "Israeli Prime Minister Benjamin Netanyahu spoke."
    assert [m.surface for m in without.extract(sentence)] == ["Israeli Prime Minister Benjamin Netanyahu"]


def test_the_shipped_tagger_leaves_offices_out_of_names() -> None:
    """With the shipped tagger, an office before a person's name is left out of it, and a company named
    with an office's word is whole."""
    text = "Israeli Prime Minister Benjamin Netanyahu met Vice President Al Gore. General Motors cut jobs."
    found = EntityExtractor(ANALYZER).extract(text)
    assert [(m.surface, m.type) for m in found] == [
        ("Israeli", "other"),
        ("Benjamin Netanyahu", "person"),
        ("Al Gore", "person"),
        ("General Motors", "organization"),
    ]


def test_a_species_latin_name_is_one_name_of_type_other() -> None:
    """A capitalised genus with a Latin ending and a lower-case epithet with one ("Saccharomyces cerevisiae",
    "Aulacorhynchus prasinus") are one name, typed `other`, at a sentence's start too; not where either word
    is a common one ("Drosophila larvae", "Nashville fans"), the epithet names a disease or a process
    ("Drosophila meiosis"), an English plural ("Anopheles mosquitoes"), or the genus is a name the lexicon
    knows ("Florida panthers"). Without the tagger (which tells common words) nothing changes."""
    text = (
        "Saccharomyces cerevisiae and Plasmodium falciparum were grown. The emerald toucanet ( Aulacorhynchus "
        "prasinus ) lives in Mexico. Drosophila larvae and Anopheles mosquitoes were studied with Drosophila "
        "meiosis in Florida panthers."
    )
    found = {(m.surface, m.type) for m in EntityExtractor(ANALYZER).extract(text) if not m.node_only}
    species = {"Saccharomyces cerevisiae", "Plasmodium falciparum", "Aulacorhynchus prasinus"}
    assert {(name, "other") for name in species} <= found, found
    surfaces = {surface for surface, _kind in found}
    assert (
        not {"Drosophila larvae", "Anopheles mosquitoes", "Drosophila meiosis", "Florida panthers"} & surfaces
    )
    rules = {m.surface for m in EntityExtractor(ANALYZER, rules_only=True).extract(text)}
    assert not species & rules and "Plasmodium" in rules, rules


def test_a_species_name_with_its_genus_cut_to_an_initial_is_the_whole_names() -> None:
    """ "S. cerevisiae", "E. coli", "M. tuberculosis" are species' names, `other`, whatever their epithet;
    in a text that spells one out first, the cut name is that name's (one graph node). "U.S." and a
    person's initial are not such names; without the tagger nothing changes."""
    text = (
        "Saccharomyces cerevisiae is a yeast. Here S. cerevisiae grew beside E. coli and M. tuberculosis, "
        "in U.S. cities, as John F. Kennedy said."
    )
    found = [(m.surface, m.key, m.type) for m in EntityExtractor(ANALYZER).extract(text) if not m.node_only]
    assert found == [
        ("Saccharomyces cerevisiae", "saccharomyces cerevisiae", "other"),
        ("S. cerevisiae", "saccharomyces cerevisiae", "other"),
        ("E. coli", "e. coli", "other"),
        ("M. tuberculosis", "m. tuberculosis", "other"),
        ("U.S.", "u.s.", "place"),
        ("John F. Kennedy", "john f. kennedy", "person"),
    ]
    rules = {m.surface for m in EntityExtractor(ANALYZER, rules_only=True).extract(text)}
    assert not {"S. cerevisiae", "E. coli", "M. tuberculosis"} & rules, rules


def test_a_word_a_participle_ends_ends_the_name_before_it() -> None:
    """A capitalised word that a participle ends after a hyphen ("Chicago-based", "Opel-based",
    "German-born") is not part of the name after it, with the tagger's types or by the rules alone; a short
    ending is a name's own ("Qaleh-ye Abbas Bek")."""
    text = (
        "Chicago-based Motorola Inc said it would sell the Opel-based Catera to German-born Albert Einstein. "
        "He lived in Qaleh-ye Abbas Bek. He met the Paris-based de Gaulle Institute."
    )
    names = {"Motorola Inc", "Catera", "Albert Einstein", "Qaleh-ye Abbas Bek", "Gaulle Institute"}
    for extractor in (EntityExtractor(ANALYZER), EntityExtractor(ANALYZER, rules_only=True)):
        surfaces = [m.surface for m in extractor.extract(text)]
        assert names <= set(surfaces), surfaces
        assert not [s for s in surfaces if "-based " in s or "-born " in s], surfaces
        # A piece between two such words that opens with a joining word is kept too.
        between = [
            m.surface
            for m in extractor.extract("The Paris-based de Gaulle Institute-funded Ford Foundation.")
        ]
        assert "Ford Foundation" in between and any("Gaulle" in s for s in between), between


def test_a_heading_label_in_capitals_is_no_name() -> None:
    """A label in capitals that opens a sentence of mixed case (a structured abstract's "MAIN OUTCOME
    MEASURES The ...", "DESIGN, SETTING, AND PARTICIPANTS ...") is left out of names where the tagger's mean
    "O" probability over its words is at least `LABEL_MIN_OUTSIDE`, and kept where the tagger reads a name
    ("NASCAR Kart Racing"). What follows it starts the sentence in its turn, and a number after it is no
    name's ("RESULTS 20 of the 29 cases"). Not a label: a word the tagger's vocabulary lacks ("COPD"), a
    word of three letters, a label before more capitals; without the tagger's types nothing changes."""
    from hybridrag.indexing.analysis.english_names import LABEL_MIN_OUTSIDE

    outside = {
        "MAIN OUTCOME MEASURES": 0.99,
        "RESULTS": 0.99,
        "DESIGN": 0.99,
        "PURPOSE": 0.7,  # a label still; a first word would keep it (`FIRST_WORD_MIN_OUTSIDE`)
        "SETTING": LABEL_MIN_OUTSIDE,
        "AND PARTICIPANTS": 0.99,
        "Microsimulation": 0.9,
        "Two": 0.99,
        "To": 0.99,
        "NASCAR": 0.03,
        "BACKGROUND": LABEL_MIN_OUTSIDE - 0.01,
        "COPD": 0.9,  # a label at that, not a first word (`FIRST_WORD_MIN_OUTSIDE`)
        "Patients": 0.99,
    }

    tagger = outside_tagger(outside, "organization")
    extractor = EntityExtractor(ANALYZER, tagger=tagger)  # type: ignore[arg-type]
    gone = [
        "MAIN OUTCOME MEASURES The rate of stroke fell.",
        "RESULTS 20 of the 29 cases were positive.",
        "RESULTS Of 153 papers, 14 met the criteria.",
        "DESIGN, SETTING, AND PARTICIPANTS Microsimulation of a cohort.",
        "SETTING Two hospitals took part.",
        "PURPOSE To test it.",
    ]
    for sentence in gone:
        assert extractor.extract(sentence) == [], sentence
    kept = {
        "DESIGN, SETTING, AND PARTICIPANTS Acme ran a cohort.": ["Acme"],
        "NASCAR Kart Racing is a video game.": ["NASCAR Kart Racing"],
        "BACKGROUND Stroke is common.": ["BACKGROUND Stroke"],  # whole, as the tagger is unsure
        "COPD Patients were treated.": ["COPD Patients"],
        "RESULTS COPD Patients were treated.": ["COPD Patients"],
        "SETTING Wuxi, Eastern China.": ["Wuxi", "Eastern China"],
    }
    for sentence, names in kept.items():
        assert [m.surface for m in extractor.extract(sentence)] == names, sentence
    # Without the tagger's types the capitals are names, as they always were.
    without = EntityExtractor(ANALYZER, tagger=tagger, tagger_types=False)  # type: ignore[arg-type]
    assert [m.surface for m in without.extract(gone[0])] == ["MAIN OUTCOME MEASURES The"]


def test_the_shipped_tagger_reads_structured_abstracts_labels_as_no_names() -> None:
    """With the shipped tagger, a structured abstract's labels make no names or graph nodes, and a name in
    capitals that opens a sentence stays one."""
    extractor = EntityExtractor(ANALYZER)
    text = (
        "BACKGROUND Stroke is common in Finland. MAIN OUTCOME MEASURES The incidence of stroke. "
        "RESULTS 20 of the 29 cases (69%) were positive. METHODS AND FINDINGS We studied 300 adults. "
        "NASCAR Kart Racing is a kart racing video game."
    )
    assert [m.surface for m in extractor.extract(text)] == ["Finland", "NASCAR Kart Racing"]


def test_the_shipped_tagger_leaves_an_action_out_of_the_name_it_acts_on() -> None:
    """With the shipped tagger, an abstract's "Activation of AMPK ..." names AMPK (it was "Activation of
    AMPK", an organisation), and a species' name after "of" is whole; "University of Amsterdam" and "Port
    of Spain" stay whole."""
    extractor = EntityExtractor(ANALYZER)
    found = {
        "Activation of AMPK reduces the growth of tumors.": ["AMPK"],
        "Deletion of Cxcl12 in mice reduced stem cells.": ["Cxcl12"],
        "University of Amsterdam researchers found it.": ["University of Amsterdam"],
        "Port of Spain is the capital.": ["Port of Spain"],
        "Strains of Saccharomyces cerevisiae were grown.": ["Saccharomyces cerevisiae"],
    }
    for sentence, names in found.items():
        assert [m.surface for m in extractor.extract(sentence)] == names, sentence


def test_the_taggers_vocabulary_is_read_without_its_model() -> None:
    """Its common words (heading labels, species' names; asked in typer-only builds too, which never tag)
    come from the tokenizer alone: no model is loaded for them."""
    tagger = NameTagger()
    assert tagger.common_word("RESULTS") and tagger.common_word("setting") and not tagger.common_word("COPD")
    assert tagger._loaded is None


def test_a_number_or_a_joining_word_links_names_where_the_tagger_reads_it_so() -> None:
    """A number written after a name and before a lower-case word or a clause's end is a candidate for the
    name ("Apollo 13"), as is a joining word between two names ("Temple of the Dog"); it is kept where the
    tagger reads the number or the word as inside a name (its "O" probability at most
    `LINK_MAX_OUTSIDE`), and dropped otherwise (a scorecard's "Younis 31", "France and Germany"), each
    part typed by its own reading. A name kept with its number is a thing's (`other`, whatever the tagger
    reads: `sure_type`); a joined one is typed by the reading of the whole. Without the tagger's types it
    is never kept."""
    from hybridrag.indexing.analysis.entities import LINK_MAX_OUTSIDE

    outside = {"13": 0.1, "31": 0.95, "7": LINK_MAX_OUTSIDE, "of the": 0.1, "and": 0.99, "and the": 0.1}
    kinds = {"Apollo 13": 1, "Apollo": 1, "Younis 31": 3, "Younis": 0, "Bolt 7": 0, "Temple of the Dog": 1}

    def read(text: str, a: int, b: int) -> SpanReading:
        types = np.zeros(4, dtype=np.float32)
        types[kinds.get(text[a:b], 2)] = 1.0
        return SpanReading(types, outside.get(text[a:b], 0.0))

    tagger = ReadingTagger(read)
    text = (
        "He flew on Apollo 13 in spring. It was Younis 31 at tea. He drove a Bolt 7 once. "
        "He played in Temple of the Dog in France and Germany. "
        # Two names whose own words settle them are two names, however the tagger reads the word between.
        "He fought in the Crimean War and the Boer War."
    )
    found = EntityExtractor(ANALYZER, tagger=tagger).extract(text)  # type: ignore[arg-type]
    assert [(m.surface, m.type) for m in found] == [
        ("Apollo 13", "other"),
        ("Younis", "person"),
        ("Bolt 7", "other"),
        ("Temple of the Dog", "organization"),
        ("France", "place"),
        ("Germany", "place"),
        ("Crimean War", "other"),
        ("Boer War", "other"),
    ]
    for without in (
        EntityExtractor(ANALYZER, tagger=tagger, tagger_types=False),  # type: ignore[arg-type]
        EntityExtractor(ANALYZER, rules_only=True),
    ):
        names = [m.surface for m in without.extract(text)]
        assert names == [
            "Apollo",
            "Younis",
            "Bolt",
            "Temple",
            "Dog",
            "France",
            "Germany",
            "Crimean War",
            "Boer War",
        ]
    # Before a capital, a digit or a dash the number is a score, a date or a column: never a candidate.
    for sentence in ("Chelsea 2 Arsenal won.", "He won in Kuopio 25 November 2001.", "Iran 1 – 0 Oman."):
        assert all(not span.parts for span in RULES.english.spans(sentence, links=True))


@pytest.mark.parametrize(
    ("words", "kind"),
    [
        ("Currier Museum of Art", "place"),  # the head before "of", a building
        ("Bank of America Stadium", "place"),  # the last head first
        ("Royal Bank of Scotland", "organization"),
        ("Battle of Amorgos", "other"),
        ("Gulf of Mexico", "place"),
        ("Apollo 13", "other"),  # a number at the end: a mission, a product, an event
        ("Xbox 360", "other"),
        ("U.S. Route 62", "place"),  # but a route is a place
        ("Moreirense F.C.", "organization"),  # a club's initialism, after its name or before
        ("FC Pune City", "organization"),
        ("Pune City", "place"),
        # A family, a subfamily or an order of living things
        ("Kotlassiidae", "other"),
        ("Scrophulariaceae", "other"),
        ("Araneomorphae", "other"),
        ("Cryptocephalinae", "other"),
        ("Gonzales", None),  # a surname, whatever its ending
        ("Idae", None),
    ],
)
def test_a_names_own_words_settle_its_type(words: str, kind: str | None) -> None:
    assert EnglishNames.sure_type(words.split()) == kind


@pytest.mark.parametrize(
    ("sentence", "name", "kind"),
    [
        ("It acts on a Hilbert space of functions.", "Hilbert", "person"),
        ("By Raoult's law, some of it will vaporize.", "Raoult's", "person"),
        ("By Raoult 's law , some of it will vaporize .", "Raoult", "person"),
        ("He has had Parkinson's disease since 2001.", "Parkinson's", "person"),
        ("It follows from the Fourier transform of the signal.", "Fourier", "person"),
        ("For example, Galois theory links fields and groups.", "Galois", "person"),
        ("It forms the Cartan matrix of the algebra.", "Cartan", "person"),
        # A word may stand between the name and the thing ...
        ("It is the Helmholtz free energy of the system.", "Helmholtz", "person"),
        ("It obeys the Pauli exclusion principle there.", "Pauli", "person"),
        # ... and a possessive may have no "s".
        ("This is known as Hess' law.", "Hess'", "person"),
        ("This is known as Hess ' law .", "Hess", "person"),
        # Not a word that makes a name someone's, or one that does so only after a possessive.
        ("He installed a Debian distribution there.", "Debian", None),
        ("It broke Acme law in 2001.", "Acme", None),
        # Not a joining word between them, nor a verb after a word between ("rivers transform").
        ("He saw Lyon and theory met practice.", "Lyon", None),
        ("Its waters and Tigris rivers transform the plain.", "Tigris", None),
    ],
)
def test_a_name_before_a_word_named_after_someone_is_a_persons(
    sentence: str, name: str, kind: str | None
) -> None:
    """One capitalised word before "space", "theorem", "transform" (or, after a possessive, "law",
    "disease") names the person the thing is named after, as WikiNEuRal's and CoNLL-2003's gold labels
    have it ("Hilbert space", "Crohn's disease"); the tagger, fitted on news, read many as organisations."""
    [span] = [span for span in RULES.english.spans(sentence) if span.name == name]
    assert (span.rule_type if span.known else None) == kind


@pytest.mark.parametrize(
    ("sentence", "names"),
    [
        ("He moved to the U.S. in 1990.", ["U.S."]),
        ("He joined Moreirense F.C. in 2010, then Benfica.", ["Moreirense F.C.", "Benfica"]),
        ("He met J.R.R. Tolkien at Oxford.", ["J.R.R. Tolkien", "Oxford"]),
        ("He lived in Washington, D.C.", ["Washington", "D.C."]),
        # Every Latin capital starts a name; a Greek one is a symbol.
        ("He beat Slobodan Živojinović in Łódź.", ["Slobodan Živojinović", "Łódź"]),
        ("Its ΔG in Paris was low.", ["Paris"]),
        # An era beside a year is no name.
        ("It was fought in 322 BC near Amorgos, and Pompeii in AD 79.", ["Amorgos", "Pompeii"]),
        # So is one after the century it counts.
        ("By the first century BC, Zoroastrianism had spread to Armenia.", ["Zoroastrianism", "Armenia"]),
        ("He worked for AD Industries in 500 B.C. and after.", ["AD Industries"]),
    ],
)
def test_an_initialism_with_full_stops_is_one_word_of_a_name(sentence: str, names: list[str]) -> None:
    """An initialism written with full stops ("U.S.", "F.C.") is a word of a name, its last stop included;
    before, capitalisation broke it at each stop ("S.", "Moreirense F"). A name starts at any Latin capital
    ("Živojinović" was lost before). "BC" and "AD" beside a year are eras, no names."""
    found = RULES.english.spans(sentence)
    assert [span.name for span in found] == names
    for span in found:
        assert sentence[span.start : span.end] == span.name


@pytest.mark.parametrize(
    ("sentence", "names"),
    [
        ("He played at the 2010 FIFA World Cup in Durban.", ["2010 FIFA World Cup", "Durban"]),
        ("It was Yugoslavia's 1990 World Cup squad.", ["Yugoslavia's", "1990 World Cup"]),
        ("She ran at the 1988 Summer Olympics twice.", ["1988 Summer Olympics"]),
        # Not an event, or no "the" before the year.
        ("With the 1991 Red Sox he won.", ["Red Sox"]),
        ("In 1994 Summer Olympics were held.", ["Summer Olympics"]),
    ],
)
def test_an_events_year_after_the_is_its_names(sentence: str, names: list[str]) -> None:
    """The rules alone: an event's head word types it `other`, and its year after "the" is its name's."""
    assert [m.surface for m in RULES.extract(sentence)] == names


@pytest.mark.parametrize(
    ("sentence", "names"),
    [
        # The models type these `other` (no event word says so): the year is theirs after "the" or "his".
        ("He lost the final of the 2014 French Open to Nadal.", ["2014 French Open", "Nadal"]),
        ("He finished second in his 1953 Indianapolis 500 .", ["1953 Indianapolis 500"]),
        ("Their 2012 Summer Olympics team won gold.", ["2012 Summer Olympics"]),
        # Not before a team, and not without "the" or a possessive before the year.
        ("He pitched for the 1991 Boston Red Sox in August.", ["Boston Red Sox"]),
        ("In 2014 French Open tickets sold out.", ["French Open"]),
        # Nor before a people's word, which describes the words after it.
        ("It began with the 1941 German bombing of Belgrade.", ["German", "Belgrade"]),
    ],
)
def test_a_years_name_follows_its_type(sentence: str, names: list[str]) -> None:
    """With the shipped models, a year between "the" (or a possessive) and a name is the name's when the
    name is typed `other`, as Wikipedia names events ("the 2014 French Open"; WikiNEuRal's gold: 24 of 32
    such years after "the"), and not when it is a person's, an organisation's or a place's."""
    found = TYPED.extract(sentence)
    assert [m.surface for m in found if not m.node_only] == names
    assert {m.type for m in found if m.surface[:1].isdigit()} <= {"other"}


def test_the_packaged_tagger_links_names_by_a_number_or_a_joining_word() -> None:
    """With the shipped tagger, "Apollo 13" and "PlayStation 2" keep their numbers and "Trinidad and
    Tobago" is one name; a batsman's score on a scorecard does not join his name, nor "and" two
    countries."""
    found = EntityExtractor(ANALYZER).extract_many(
        [
            "The Apollo 13 astronauts returned safely.",
            "It came out for the PlayStation 2 in Japan.",
            "Mushtaq Ahmed 44 not out, Waqar Younis 31.",
            "He visited Trinidad and Tobago, then France and Germany.",
        ]
    )
    assert [[m.surface for m in one] for one in found] == [
        ["Apollo 13"],
        ["PlayStation 2", "Japan"],
        ["Mushtaq Ahmed", "Waqar Younis"],
        ["Trinidad and Tobago", "France", "Germany"],
    ]


def test_the_packaged_tagger_finds_a_name_that_starts_a_sentence() -> None:
    """With the shipped tagger, "Einstein" starting a sentence is a person and "Toyota" an organisation;
    "Researchers" and "However" starting theirs are no names. "Teammate" and "Besides" before a name at a
    sentence's start are not the name's; "New York" and "Guy Ritchie" keep their first words."""
    extractor = EntityExtractor(ANALYZER)
    found = extractor.extract_many(
        [
            "Einstein was born in Ulm.",
            "Toyota makes cars in Japan.",
            "Researchers found that Paris grew. However, Smith disagreed.",
            "Teammate Russell Ingall finished second in the championship.",
            "Besides Amasia and a few other cities, the interior was dominated by villages.",
            "New York is a large city.",
            "Guy Ritchie directed the film in London.",
        ]
    )
    assert [[(m.surface, m.type) for m in one] for one in found] == [
        [("Einstein", "person"), ("Ulm", "place")],
        [("Toyota", "organization"), ("Japan", "place")],
        [("Paris", "place"), ("Smith", "person")],
        [("Russell Ingall", "person")],
        [("Amasia", "place")],
        [("New York", "place")],
        [("Guy Ritchie", "person"), ("London", "place")],
    ]


def test_the_packaged_tagger_reads_a_subject_as_no_name() -> None:
    """The shipped tagger on the sample's Curie text: "Chemistry" in "the Nobel Prize in Chemistry" (a
    subject the capitalisation rules take for a name, typed an organisation before) is read as no name
    and types nothing; the people and the prize's city in the same text keep their types."""
    from hybridrag.indexing.analysis.name_tagger import packaged_tagger

    tagger = packaged_tagger()
    assert tagger is not None
    text = (
        "In 1911 she received the Nobel Prize in Chemistry for isolating radium. She later founded the "
        "Radium Institute in Paris."
    )
    sentence = text.split(". ")[0] + "."
    at = sentence.index("Chemistry")
    (reading,) = tagger.span_readings([sentence], [[(at, at + len("Chemistry"))]])[0]
    assert reading is not None and reading.outside >= 0.9
    found = {m.surface: m for m in EntityExtractor(ANALYZER).extract(text)}
    assert found["Chemistry"].node_only
    assert not found["Paris"].node_only and found["Paris"].type == "place"
    assert not found["Radium Institute"].node_only and found["Radium Institute"].type == "organization"
