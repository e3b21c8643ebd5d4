"""Entity extraction with no LLM and no model download.

* Japanese: Sudachi part-of-speech. Runs of nouns holding a proper noun, or ending in a name-forming head
  (省, 党, 航空…) after words of their own, become one entity; the type comes from the dictionary (人名
  person, 地名 place, 組織 organization) or from the head (大学, 銀行… an organisation; 市, 駅… a place).
* English: capitalised word sequences (with "of"/"de"/"von" inside) and acronyms, typed by rules: an
  organisation suffix or "University of", a personal title, a preceding "in/at/from" for places, and
  two or three capitalised words otherwise read as a person's name. Only where letter case says something
  (`casing_informative`): an all-capitals or all-lower-case sentence yields no rule-based names, and a
  short title in such a casing is one name as a whole. The graph build then finds every document title's
  name in the text whatever its case (`graph_build.title_names`), so the graph works on `text like this`
  and `TEXT LIKE THIS` as on `Text Like This`.

Surface forms are normalised (NFKC, case, possessive 's, whitespace) so that variants merge.
"""

from __future__ import annotations

import copy
import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS, Analyzer
from hybridrag.indexing.analysis.entity_types import ORGANIZATION, OTHER, PERSON, PLACE
from hybridrag.indexing.analysis.ja_rules import japanese_rules, people_of_places
from hybridrag.indexing.analysis.ja_tagger import JapaneseTagger, Morpheme, Pieces, packaged_japanese_tagger
from hybridrag.indexing.analysis.name_tagger import (
    NameTagger,
    SpanReading,
    Tag,
    packaged_caseless_tagger,
    packaged_tagger,
)
from hybridrag.indexing.analysis.span_typer import (
    TOKEN_PATTERN,
    SpanTyper,
    case_free_longest,
    case_free_names,
    ordinary_words,
    packaged_lexicon,
    packaged_typer,
    span_features,
)
from hybridrag.indexing.analysis.text import has_japanese, reads_as_japanese, split_sentences

_ORG_SUFFIX_EN = frozenset(
    (
        "inc ltd co corp corporation company companies university institute institution laboratory laboratories "
        "labs school college bank railways railway agency ministry party association society foundation group "
        "council committee army navy government academy works motors industries center centre "
        "organisation organization office department commission union federation club"
    ).split()
)
# Sports clubs' initialisms, before or after the club's name ("FC Barcelona", "Hertha BSC", "Moreirense F.C.").
_CLUB_EN = frozenset(
    "fc f.c afc a.f.c cf c.f sc s.c bsc cd c.d rcd ac a.c fk sk tsg vfb vfl sv rsc r.s.c".split()
)
# Not "St." or "Saint": in CoNLL-2003's, WikiANN's and WikiNEuRal's files it is a name's word 278 times in 279
# (its first word 208 times: "St. Louis", "St Pauli", "St. Mary's"), where a title is left out of the name.
_TITLES_EN = frozenset(
    "mr mrs ms dr prof professor president king queen sir lord lady emperor prince princess pope".split()
)
_EVENT_SUFFIX_EN = frozenset(
    (
        "prize award awards war wars act treaty protocol test games olympics revolution restoration conference "
        "championship championships cup festival expedition crisis massacre rebellion uprising battle "
        # and things made or found: machines, systems, results named after someone
        "engine engines machine machines system theorem equation algorithm principle effect paradox "
        "hypothesis conjecture syndrome"
    ).split()
)
# A name ending in one of these is a place: natural features, settlements and buildings.
_PLACE_SUFFIX_EN = frozenset(
    (
        "island islands isle river creek canal bridge lake lakes bay mount mountain mountains hill hills valley "
        "palace castle park street road avenue square county province prefecture district region peninsula "
        "ocean sea gulf strait harbour harbor airport station desert forest falls beach coast cathedral abbey "
        "tower stadium arena village town city borough parish glacier reservoir canyon route highway motorway "
        # buildings open to visitors: places in CoNLL-2003's gold labels as in WikiNEuRal's
        "museum hospital theatre theater"
    ).split()
)
_PLACE_PREFIX_EN = frozenset("mount lake cape fort port isle".split())
_SEQUEL = re.compile(r"^(?:[ivxl]+|\d+)$")  # "World War II", "Apollo 13"
# The endings zoology and botany give the names of families, subfamilies, orders and the like.
_TAXON = re.compile(
    r"^[A-Z][a-z]{2,}(?:idae|inae|aceae|oideae|oidea|morpha|morphae|formes|phyta|mycota|opsida)$"
)
# A species' two-word Latin name ("Saccharomyces cerevisiae", "Plasmodium falciparum"): a capitalised genus
# with a Latin ending, then a lower-case epithet with one (`EntityExtractor._binomial`). Neither word is
# common (`NameTagger.common_word`: "Nashville fans", "Drosophila larvae" are no species), the genus is no
# name the lexicon knows, and an epithet in "-osis", "-itis" ... is a disease or a process ("Drosophila
# meiosis"). Not "-es": English plurals ("Anopheles mosquitoes", "Chiluba shuffles").
_GENUS = re.compile(r"[A-Z][a-z]{3,}(?:us|um|a|es|is|ops|on|ax|ix|yx|er|as|os|ys)")
_EPITHET = re.compile(r"[ \t]+([a-z]{3,}(?:us|um|a|ae|i|is|ens|ans|ix|ax|er))\b(?![\-’'])")
_NOT_EPITHET = re.compile(r".*(?:osis|esis|itis|ysis|iasis)")
# The same name with its genus cut to an initial ("E. coli", "C. elegans", "S. aureus"), after the first
# mention spelled it out: written so, a capital letter and a full stop before a lower-case word with a Latin
# ending is a species' name whatever the epithet (SciFact: 405, all of them species; HotpotQA-100 and
# CoNLL-2003 train: none; WikiNEuRal dev: 7, species its gold leaves unnamed).
_WHOLE_SPECIES = re.compile(rf"({_GENUS.pattern}){_EPITHET.pattern}")  # the name an initial's stands for
_SPECIES_INITIAL = re.compile(rf"(?<![\w.])[A-Z]\.{_EPITHET.pattern}")
_NUMBER = re.compile(r"^\d{1,4}$")
# A word after one capitalised name that makes it someone's: a result or a thing named after a person
# ("Hilbert space", "Fourier transform", "Lewis acid"); after a possessive, also these ("Raoult's law",
# "Parkinson's disease").
_EPONYM_NOUNS = frozenset(
    (
        "theorem theorems lemma conjecture equation equations inequality integral transform operator space "
        "spaces symbol constant polynomial polynomials principle paradox acid filter filters effect "
        # mathematics' and the sciences' other things named after someone ("Galois theory", "Cartan
        # matrix", "Rayleigh scattering", "Krebs cycle")
        "theory symbols constants coefficient coefficients number numbers numbering numberings matrix matrices "
        "metric diagram diagrams algebra algebras energy arithmetic graph graphs quaternion quaternions "
        "identity decomposition formula lattice manifold approximation expansion criterion limit radius "
        "scattering reaction plot scale cycle"
    ).split()
)
_EPONYM_POSSESSIVE_NOUNS = frozenset("law laws disease syndrome hypothesis".split())
# Of those, the ones that are verbs too: after a word between ("the Tigris rivers transform"), not a name's.
_EPONYM_VERBS = frozenset(
    "transform filter filters effect number numbers limit scale cycle plot graph".split()
)
# The one or two words after the name, after a possessive if there is one ("Hess' law" too).
_EPONYM_NEXT = re.compile(r"(\s*['’]s?)?\s+([a-z]+)\b(?:\s+([a-z]+)\b)?")
_PLACE_PREP = frozenset("in at from near to across".split())
# The words that say what a name is by being its head or its first word; alone they name nothing ("the
# olympics" does: one event).
_HEAD_WORDS = (_ORG_SUFFIX_EN | _EVENT_SUFFIX_EN | _PLACE_SUFFIX_EN | _PLACE_PREFIX_EN) - {"olympics"}
_NOT_NAMES = frozenset(
    (
        "the a an this that these those he she it they we i you his her its their our my your there here "
        "however after before during when while although since then also in on at by for with from as of "
        "monday tuesday wednesday thursday friday saturday sunday january february march april may june july "
        "august september october november december later earlier today yesterday meanwhile finally first "
        "second third also thus hence both each every many most some several other another such"
    ).split()
)
# Of those, the ones a name may start with within a sentence, where a capital is the writer's choice ("the
# First World War", "the film Every Which Way", "Her Music"). Not days and months, capitalised anywhere, nor
# "the" (its own rule: `EntityExtractor.english_spans`), nor prepositions and sentence adverbs, which
# capitalised within a sentence mostly mean a lost full stop ("increasing crime In Germany").
_FIRST_WORDS_WITHIN = frozenset(
    "a an this that these those he she it they we you his her its their our my your there here first second "
    "third both each every many most some several other another such".split()
)
# A company's legal form, which a comma parts from the rest of its name ("Toyota Motor Co., Ltd.").
_LEGAL_FORMS = frozenset("ltd inc llc llp plc corp co gmbh ag nv bv pty".split())
_LEGAL_FORM_GAP = re.compile(r"\.?,\s+")
# Capitalised words in a row, joined by the lower-case particles of names ("Bank of England", "Ludwig van
# Beethoven") and by "&" ("Procter & Gamble", "Paul Revere & the Raiders": English dev typed F1 +0.002).
# Every Latin capital letter, not only A-Z ("Živojinović", "Árabe Unido", "Łódź"). Not Greek ones: in
# English text a capital "Δ" or "Ω" is a symbol ("ΔG", "Δ9-THC").
_CAPITAL = "A-Z" + "".join(
    re.escape(chr(c)) for c in range(0xC0, 0x250) if chr(c).isupper() and chr(c).lower() != chr(c)
)
# An initialism written with full stops ("U.S.", "F.C.") is one word, its last stop included.
_DOTTED = re.compile(r"(?:[A-Z]\.){2,}")
# Capitalised words an en dash or an ampersand joins are one word ("Wisconsin–Madison", "Stefan–Boltzmann",
# "A&M", "S&P"): WikiNEuRal dev's gold names hold all 5 such en-dash words, WikiANN train's 47 of 56 (the others
# mostly ranges of months, which `_function_word` leaves out); CoNLL-2003 train's all 16 ampersand words.
_EN_DASH = "\u2013"
_NAME_WORD = rf"(?:{_DOTTED.pattern}|[{_CAPITAL}][\w’'\-]*(?:[{_EN_DASH}&][{_CAPITAL}][\w’'\-]*)*)"
_CAP_SEQ = re.compile(
    rf"\b{_NAME_WORD}(?:\.?\s+(?:(?:&\s+the|of|de|da|del|von|van|der|du|la|le|&)\s+)?{_NAME_WORD})*"
)
# A capitalised word made an adjective by a participle after a hyphen ("Chicago-based", "Top-seeded",
# "Aramaic-speaking", "Japanese-style") ends the capitalised words before the name it describes
# (`_apart_at_participles`): CoNLL-2003's and WikiNEuRal's gold names hold none of the 40 such words before
# another capitalised word but one. Not a short ending ("Qaleh-ye Abbas", "Piran-e Kasmai").
_PARTICIPLE_WORD = re.compile(r"\S*-(?:[a-z]+(?:ed|ing)|born|style|made|held)")
# Era markers beside a year ("322 BC", "AD 79") are no names (WikiNEuRal's gold: 15 of 15).
_ERAS = frozenset("bc ad bce ce b.c. a.d. b.c.e. c.e.".split())
# What an era follows: a year, or the century or millennium it counts ("the first century BC").
_ERA_BEFORE = re.compile(r"(?:\d|\b(?:century|centuries|millennium|millennia))\s*$", re.IGNORECASE)
_DIGIT_AFTER = re.compile(r"\s*\d")
DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")
_LETTER = re.compile(r"[^\W\d_]")
_OPENERS = ('"', "(", "“")  # after one of these a capital starts a sentence, as at the sentence's start
# A quoted phrase in title case (`EntityExtractor._quoted_titles`): the words a title leaves in lower case.
_QUOTED = re.compile(rf"[\"“]\s*([{_CAPITAL}][^\"“”]{{0,100}}?)\s*[\"”]")
# Any quoted phrase, for text without letter case (`_case_free_titles`).
_QUOTED_ANY = re.compile(r"[\"“]\s*([^\"“”\s][^\"“”]{0,100}?)\s*[\"”]")
_QUOTED_MAX_WORDS = 8
_TITLE_SMALL_WORDS = frozenset(
    "a an the of for with in on at to and or from by as into is be are my your our me you it not no but so".split()
)
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,6}s?\b")
# A plural initialism ("HSCs", "RCTs", "MPs", "RBIs") names a kind of thing, not one thing: a graph node that
# types nothing (`EntityExtractor._english_read`). Of the three English files' gold names only CoNLL-2003's
# "ADRs" (5 times, as MISC) and WikiANN's "VDCs" (once, a place) are; SciFact's corpus has 2,146 typed such,
# 1,050 of them as organisations by the tagger, fitted on news.
_PLURAL_INITIALISM = re.compile(r"[A-Z][A-Z0-9]*[A-Z]s")
# A heading's label in capitals (`EntityExtractor._label_end`): its words, and the words that join them.
LABEL_MIN_LETTERS = 4
_LABEL_WORD = re.compile(rf"[A-Z]{{{LABEL_MIN_LETTERS},}}")
_LABEL_START = re.compile(rf"\s*[A-Z]{{{LABEL_MIN_LETTERS},}}\b")
_LABEL_JOINERS = frozenset({"AND", "OR", "OF", "&", ","})
_SPACED = re.compile(r"\S+")
# An office's words before a person's name (`EntityExtractor._role_candidate`): not the name's in CoNLL-2003's
# and WikiNEuRal's gold labels ("Prime Minister Benjamin Netanyahu" names "Benjamin Netanyahu"). Not
# "general", as often a name's own word ("General Practice Research Database", "General Motors"): SciFact's
# abstracts name such things.
_ROLE_WORDS = frozenset(
    (
        "minister chancellor governor lieutenant senator congressman congresswoman mayor colonel "
        "captain admiral commander sergeant marshal bishop archbishop cardinal reverend rev rabbi judge "
        "secretary ambassador baron baroness duke duchess earl countess viscount marquess marquis dame chairman "
        "coach"
    ).split()
)
# Words that make an office of the one after them ("Prime Minister", "Vice President"), and alone none ("WWF
# Prime Time Wrestling").
_ROLE_MODIFIERS = frozenset(
    "prime vice deputy acting foreign finance defence defense interior chief major rear field attorney".split()
)
_OFFICE_WORDS = _ROLE_WORDS | _TITLES_EN  # what `EntityExtractor._role_candidate` reads as an office's words
_CAPITALS_WORD = re.compile(r"\W*[A-Z][^a-z]*[A-Z][^a-z]*")  # two capitals or more and no small letter
# A year written between "the" (or a possessive) and a name typed `other`: the year is the name's ("the 2010
# FIFA World Cup", "Yugoslavia's 1990 World Cup", "the 2014 French Open", "his 1953 Indianapolis 500"), as
# Wikipedia names such events (`EntityExtractor._english_read`). Not before a person, an organisation or a
# place ("the 1991 Red Sox"), nor before a word the lexicon knows ("the 1941 German bombing").
_OWNED_YEAR = re.compile(r"(?:\b(?:[Tt]he|[Hh]is|[Hh]er|[Ii]ts|[Tt]heir)|['’]s)\s+((?:1\d|20)\d\d)\s+$")
# A number of up to four digits right after a name, then a lower-case word or the end of a clause
# ("Apollo 13 was", "UEFA Euro 2004 ,", "Windows 95 ."); not before a capital, a digit, a dash or a bracket,
# where it is a score, a date or a table's column ("Chelsea 2 Arsenal 1", "Kuopio 25 November", "Bahrain 6 – 0").
# The words that may join two names into one ("Trinidad and Tobago", "Temple of the Dog"; "of" alone
# joins them in `_CAP_SEQ`), where the tagger reads them as a name's (`EntityExtractor._joined`).
_JOINING = re.compile(r"[ \t]+(and|and the|for|for the|of the)[ \t]+")
_TRAILING_NUMBER = re.compile(r"[ \t]+(\d{1,4})(?=\s*(?:[.,;:!?\"”]|$)|\s+[a-z])")


@dataclass(frozen=True, slots=True)
class Mention:
    """An entity mention: normalised key, surface form, type, and the sentence (offsets in the chunk).

    Offsets of -1 mark a document-level mention (from the title). A `node_only` mention links its name in
    the graph but claims no type for its chunk: the Japanese rules' reading of a name that the tagger bounded
    otherwise (`JapaneseTagger.read`).
    """

    key: str
    surface: str
    type: str
    sentence_start: int
    sentence_end: int
    node_only: bool = False
    # A concept of the corpus (`concepts.corpus_concepts`), found at graph build and never stored.
    concept: bool = False

    def __reduce__(self) -> tuple[object, tuple[str, str, str, int, int, bool, bool]]:
        # Pickled as its fields: the graph build's shards send millions of mentions (`builds.shards`), and
        # a frozen slots dataclass' own pickling runs in Python at ~4x the time.
        fields = (self.key, self.surface, self.type, self.sentence_start, self.sentence_end)
        return (Mention, (*fields, self.node_only, self.concept))


def chunk_types(mentions: Iterable[Mention]) -> list[str]:
    """The entity types a chunk is filtered by: those its typed mentions claim (sorted)."""
    return sorted({m.type for m in mentions if not m.node_only})


class NameSpan(NamedTuple):
    """A name found in an English sentence."""

    name: str  # its words joined by single spaces: the mention's surface
    start: int  # sentence[start:end] is where it is written
    end: int
    rule_type: str  # the word-list rules' type
    titled: bool  # a personal title precedes it ("Dr.", "Queen")
    known: bool = False  # its type is the rules' own: its words settle it (`sure_type`), or a quoted title
    initial: bool = False  # one capitalised word that starts its sentence: a name only if the tagger says so
    # A candidate the tagger settles (`EntityExtractor._settle_links`): the words at `link` make one name of
    # it where the tagger reads them as inside one, else it is `parts`. A number after a name ("Apollo 13":
    # the part "Apollo"); a joining word between two ("Trinidad and Tobago": "Trinidad", "Tobago").
    parts: tuple[NameSpan, ...] = ()
    link: tuple[int, int] = (0, 0)
    # Set where the words at `link` may be capitalised for another reason than the name: the sentence's first
    # word (`EntityExtractor._first_word_candidate`: `FIRST_WORD_MIN_OUTSIDE`), a heading's label in capitals
    # (`_label_end`: `LABEL_MIN_OUTSIDE`), an office before a person's name (`_role_candidate`:
    # `OFFICE_MIN_OUTSIDE`). The name is then `parts` where the tagger's mean "O" probability over those words
    # is at least this, else whole (a number or a joining word is settled by `LINK_MAX_OUTSIDE` instead).
    left_out_at: float | None = None


TITLE_NAME_MAX_WORDS = 6  # a longer title in a casing that says nothing is a headline, not a name


# Bumped whenever the rules find or type names differently (an index extracted by older rules is then
# re-extracted by `bench`, and `index info` shows which extraction an index holds).
RULES_REVISION = 9
# The same for the English capitalisation rules alone, which the Japanese tagger (fitted on the rules'
# Japanese names: `RULES_REVISION`) does not read. 2 (2026-12-04): a capitalised "The" within a sentence and
# "&" belong to the name ("by The Rolling Stones", "Procter & Gamble"). 3 (2026-12-04): a quoted title is one
# name ("Sympathy for the Devil": `EntityExtractor._quoted_titles`). 4 (2026-12-04): an event's year after
# "the" belongs to its name ("the 2010 FIFA World Cup"). 5 (2026-12-04): so does a capitalised "The" after an
# opening quote within a sentence ('the film " The Glass Bottom Boat "'). 6 (2026-12-04): a quoted phrase within
# a sentence whose every word is capitalised is one name, a work's ('the single " Melissa "'). 7 (2026-12-04):
# every capital letter starts a name ("Živojinović"); an initialism with full stops is one word ("U.S.",
# "Moreirense F.C."); an era beside a year is no name ("322 BC"); a name's own words settle more types: the word
# before "of", a number at its end (`other`), buildings open to visitors (places), clubs' initialisms; and one
# word before a word named after someone is a person ("Hilbert space", "Raoult's law": `_eponym`). 8 (2026-12-05):
# a case-less name the tagger cuts at a hyphen is whole ("bcl-" of "bcl-2", "-gamma" of "ifn-gamma": `_whole`),
# and one with no letter or digit is none ("-"). 9 (2026-12-05): within a sentence an ordinal, a determiner or a
# pronoun before another capitalised word is the name's ("the First World War": `_FIRST_WORDS_WITHIN`), and a
# company's legal form after a comma is its name's ("Toyota Motor Co., Ltd.": `_with_legal_forms`), and
# capitalised words an en dash or an ampersand joins are one word ("Wisconsin–Madison", "A&M": `_NAME_WORD`),
# typed by the compound's first part first. 10 (2026-12-05): in a sentence without letter case, a name that is an
# ordinary word too ("china") is one where the tagger is sure of it (`ORDINARY_NAME_MIN_CONFIDENCE`). 11
# (2026-12-05): there, a tagger's name that holds a lexicon name and more is the longer name ("new york city"
# was "new york"), and one the tagger ends before an initialism's last full stop takes it ("u.s."). 12
# (2026-12-05): there, a quoted phrase of two words or more is a title, one name (`_case_free_titles`), and a
# name of digits alone is none ("2002"). 13 (2026-12-06): there, the tagger bounds names by their words' mass of
# any name before it types them (`NameTagger._decode`), and a name it cannot type is none
# (`TAG_MIN_TYPE_CONFIDENCE`). 14 (2026-12-06): more words after a name make it someone's ("Galois theory",
# "Cartan matrix"; a word may stand between, "Helmholtz free energy"; "Hess' law"), a zoological or botanical
# family is `other` ("Kotlassiidae": `_TAXON`), an era after a century is no name ("the first century BC"), and
# a name's first word at the sentence's start is left out where the tagger is sure it is no name's ("Besides
# Amasia": `_first_word_candidate`, `FIRST_WORD_MIN_OUTSIDE`). 15 (2026-12-06): the things named after someone
# and the families of living things type the tagger's names in sentences without letter case too (`_case_free`).
# 16 (2026-12-06): a heading's label in capitals that opens a sentence ("MAIN OUTCOME MEASURES The ...",
# "RESULTS 20 of the 29 cases ...") is no name where the tagger reads it as none (`_label_end`,
# `LABEL_MIN_OUTSIDE`).
# 17 (2026-12-06): "St." and "Saint" are a name's first word, not a personal title ("St. Louis", "St Pauli",
# "St. Paul's Cathedral" were "Louis", "Pauli", "Paul's Cathedral", typed person), as every gold file has them.
# 18 (2026-12-06): an office's words before a person's name are not the name's where the tagger reads them so
# ("Israeli Prime Minister Benjamin Netanyahu" names "Israeli" and "Benjamin Netanyahu": `_role_candidate`,
# `OFFICE_MIN_OUTSIDE`).
# 19 (2026-12-06): a capitalised word a participle ends after a hyphen ends the name before it ("Opel-based
# Catera" is "Opel-based" and "Catera": `_apart_at_participles`).
# 20 (2026-12-06): a piece between two such words may open with a joining word ("Paris-based de Gaulle
# Institute-funded Ford Foundation" kept no "Gaulle Institute-funded").
# 21 (2026-12-06): a species' two-word Latin name is one name, typed `other` ("Saccharomyces cerevisiae" was
# "Saccharomyces", often an organisation: `_binomial`).
# 22 (2026-12-06): a name that opens its sentence with a word and "of" loses both where the tagger is sure the
# first word is no name's ("Activation of AMPK", "Results of Major League" were organisations and events; now
# "AMPK" and "Major League"), unless that word says what the name is ("Port of Spain": `_of_candidate`); a
# plural initialism ("HSCs") is a graph node that types nothing (`_PLURAL_INITIALISM`); a species' name with
# its genus cut to an initial ("E. coli") is one name, `other`, the whole name's where the text spells it out
# (`_SPECIES_INITIAL`, `_resolve_aliases`).
# 23 (2026-12-06): a name whose most probable type is less likely than not claims none (`TYPE_MIN_PROBABILITY`).
# 24 (2026-12-06): a year after "the" or a possessive is the name's of any name typed `other`, not only an event
# word's ("the 2014 French Open": `_OWNED_YEAR`).
ENGLISH_RULES_REVISION = 24
# The same for what is done to the Japanese names after the rules and the tagger, which the tagger does not
# read either. 1 (2026-12-05): a place's people are `other` ("日本人", "東京都民": `ja_rules.people_of_places`).
JAPANESE_TYPES_REVISION = 1
RULES_VERSION = f"rules-{RULES_REVISION}-en{ENGLISH_RULES_REVISION}-ja{JAPANESE_TYPES_REVISION}"
# A tagger's name in text without letter case is one where its words are at least this surely a name's (the mean
# of 1 - P("O") over them) and its type at least `TAG_MIN_TYPE_CONFIDENCE` surely the one it has: the tagger also
# tags ordinary noun phrases, and a name it cannot type costs typed F1 a false name and a missed one, where
# leaving it out costs the missed one alone. Lower-cased English dev file, typed F1: 0.7219 at these; 0.7168 to
# 0.7204 at 0.88 / 0.92 a name and 0.6 / 0.8 a type; 0.716 at 0.85 a name; checked on CoNLL-2003's and WikiANN's
# training files' first 3,000 sentences (benchmarks/README.md, "A case-less name is found before it is typed").
# Before names were bounded apart from their types, one threshold on the mean probability of each word's most
# probable label, 0.75, was best (0.7133).
# (Where letter case says something the capitalisation rules find the names and the tagger only types them.)
TAG_MIN_CONFIDENCE = 0.9
TAG_MIN_TYPE_CONFIDENCE = 0.7
# A name the lexicon knows that is an ordinary English word too ("china", "turkey", "roman", "republicans":
# `ordinary_words`) is one in text without letter case where the tagger is at least this sure it is a name: it
# reads "exports to china" and "the page is numbered with roman numerals", not "fine china plates" or "cleaned
# with polish", nor "guinea worm" (a name's mass 0.97 there, but a place at 0.69: `TAG_MIN_TYPE_CONFIDENCE`);
# it does read the bird in "we ate turkey" as the country, a miss this threshold keeps. Measured with the tags
# of each word's most probable label (their mean probability): lower- / upper-cased typed F1, never 0.6722 /
# 0.6796 on the English dev file, 0.8358 / 0.8704 on CoNLL-2003 train's first 3,000 sentences; 0.9: 0.6782 /
# 0.6856 and 0.8420 / 0.8764; 0.75 (as any name): 0.6780 / 0.6854 and 0.8420 / 0.8765 (benchmarks/README.md).
# Of a name's mass (`TAG_MIN_CONFIDENCE`): 0.95, 0.7217 lower-cased;
# 0.9, no surer than any name, 0.7219.
ORDINARY_NAME_MIN_CONFIDENCE = 0.95
# What the English tagger does, recorded in the extraction version beside its weights' digest: since
# 2026-11-29 it also types the names the capitalisation rules find in sentences with letter case, with the
# typer (typed F1 0.606 -> 0.689 on the English dev file; benchmarks/README.md, "Cased names typed by the
# tagger and the typer together"); before, it read only sentences without letter case.
# Since 2026-12-04 ("types-gated") a name the tagger reads as no name types nothing (`NOT_A_NAME`), and
# ("-initials") a lone capitalised first word is a name where the tagger reads one (`INITIAL_NAME_MAX_OUTSIDE`),
# and ("-links") a number after a name or a joining word between two names is the name's where the tagger
# reads it so (`LINK_MAX_OUTSIDE`).
TAGGER_ROLE = "types-gated-initials-links"
# A name capitalisation finds whose words the tagger reads as "O" with at least this mean probability is a
# graph node only, typing nothing (`EntityExtractor._english_read`). English dev file, typed / untyped F1:
# never 0.689 / 0.843; 0.5: 0.703 / 0.835; 0.7: 0.701 / 0.842; 0.9: 0.701 / 0.846 (the fewest left
# untyped for the same typed F1).
NOT_A_NAME = 0.9
# A name whose most probable type (the tagger's and the typer's readings together, `_english_read`) is less
# likely than not is a graph node only, claiming no type: a type that is more likely wrong than right costs
# typed F1 a false name as well as the missed one. Typed F1 on WikiNEuRal dev / CoNLL-2003 train / WikiANN
# train (first 3,000 sentences each): never 0.7777 / 0.8922 / 0.4959; below 0.5: 0.7787 / 0.8926 / 0.4978;
# 0.6: 0.7815 / 0.8919 / 0.4988; 0.7: 0.7823 / 0.8909 / 0.5003; 0.8: 0.7815 / 0.8894 / 0.5031 (untyped
# 0.914, 0.908, 0.897, 0.886, 0.871 on WikiNEuRal dev). 0.5, the one setting that loses on none of them.
TYPE_MIN_PROBABILITY = 0.5
# A lone capitalised word that starts a sentence ("Einstein was born in Ulm.", "Researchers found ...") is a
# name where the tagger's mean "O" probability over it is at most this: more likely a name than not. English
# dev file, typed / untyped F1: never 0.701 / 0.846; 0.05: 0.707 / 0.857; 0.25: 0.706 / 0.860; 0.5:
# 0.705 / 0.861; 0.7: 0.705 / 0.861 (benchmarks/README.md, "A name that starts its sentence").
INITIAL_NAME_MAX_OUTSIDE = 0.5
# A number written after a name ("Apollo 13", "Windows 95"), or a joining word between two names ("Trinidad
# and Tobago"), is the name's where the tagger's mean "O" probability over it is at most this: more likely
# inside a name than not (`EntityExtractor._settle_links`). The tagger, fitted on CoNLL-2003, reads a
# scorecard's "Younis 31" and "France and Germany" as names apart. English dev file, typed / untyped F1:
# never 0.722 / 0.879; numbers at 0.5: 0.723 / 0.884; with the year rule (revision en4): 0.726 / 0.887;
# joins too: 0.727 / 0.889 (0.3 to 0.9 moved typed F1 by 0.001 at most), 0.728 / 0.889 without joining two
# names whose own words settle them. CoNLL-2003 and WikiANN train (first 3,000 sentences each), typed F1:
# 0.859 -> 0.861 and 0.491 -> 0.495.
LINK_MAX_OUTSIDE = 0.5
# A name's first word that starts its sentence is left out of it where the tagger's "O" probability for it
# is at least this ("Besides Amasia": 0.998, "Teammate Russell Ingall": 1.0), and kept where the tagger is
# less sure ("Guru Dutt": 0.58, "Worldwide Pants": 0.69, "National Register of Historic Places": 0.58-0.90).
FIRST_WORD_MIN_OUTSIDE = 0.95
# A heading's label in capitals is left out where the tagger's mean "O" probability over its words (in the
# name) is at least this: more likely no name's than a name's. Written in capitals and common words
# (`EntityExtractor._label_end`), a label is seldom a name; the tagger keeps those that are ("NASCAR Kart
# Racing is ...": 0.03). SciFact's corpus, 4,033 labels: 3,871 at 0.95 or more, 139 from 0.5 ("CONTEXT", "TRIAL
# REGISTRATION", "DATA SOURCES"; "FISH" and "FLAIR" too), 23 below ("COSMIC", "STAR", "CONTEXT").
LABEL_MIN_OUTSIDE = 0.5
# An office's words before a person's name ("Prime Minister", "Lieutenant Colonel", "Baron") are left out of it
# where the tagger's mean "O" probability over them is at least this: more likely no name's than a name's, as in
# CoNLL-2003's and WikiNEuRal's gold labels; the tagger keeps those of a name ("Duke Energy", "Duke
# Ellington", "Cardinal Health"). Typed F1 on WikiNEuRal dev / CoNLL-2003 and WikiANN train's first 3,000 sentences:
# never 0.7752 / 0.8818 / 0.4974; at 0.95 0.7772 / 0.8896 / 0.4974; at 0.5 0.7778 / 0.8898 / 0.4972.
OFFICE_MIN_OUTSIDE = 0.5
_WORD_RUN = re.compile(r"[^\W\d_]{2,}")  # two letters in a row


def extraction_version(
    typer: SpanTyper | None,
    tagger: NameTagger | None = None,
    japanese: JapaneseTagger | None = None,
    tagger_types: bool = True,
    caseless: NameTagger | None = None,
) -> str:
    parts = [RULES_VERSION]
    parts += [typer.version] if typer is not None else []
    if tagger is not None:
        parts.append(f"{tagger.version}-{TAGGER_ROLE}" if tagger_types else tagger.version)
    if caseless is not None and caseless is not tagger:
        parts.append(f"{caseless.version}-caseless")
    parts += [japanese.version] if japanese is not None else []
    return "+".join(parts)


def packaged_extraction_version(tagger_types: bool = True) -> str:
    """What a default `EntityExtractor` records, without building one (no Sudachi dictionary loaded)."""
    tagger = packaged_tagger()
    return extraction_version(
        packaged_typer(),
        tagger,
        packaged_japanese_tagger(RULES_REVISION, pieces=tagger_types),
        tagger_types,
        packaged_caseless_tagger() or tagger,
    )


def casing_informative(text: str) -> bool:
    """Whether letter case can tell names apart in `text`: it has both upper- and lower-case letters.

    All-capitals (OCR, telegrams, old reports) and all-lower-case text (chat, notes, preprocessed datasets)
    do not; capitalisation rules there find either nothing or whole sentences.
    """
    has_upper = has_lower = False
    for c in text:
        if c.isupper():
            has_upper = True
        elif c.islower():
            has_lower = True
        if has_upper and has_lower:
            return True
    return False


_POSSESSIVE = re.compile(r"['’][sS]$")
_SPACES = re.compile(r"\s+")


@functools.lru_cache(maxsize=1 << 18)
def normalize_name(name: str) -> str:
    """The folded key of a name (width, possessive, spaces, case). Cached: a graph build asks for the
    same few hundred thousand word spans millions of times (11.6M calls at 100k chunks)."""
    name = unicodedata.normalize("NFKC", name).strip()
    name = _POSSESSIVE.sub("", name)
    return _SPACES.sub(" ", name).lower()


class EntityExtractor:
    """Finds and types entity mentions.

    Args:
        analyzer: the index's analyzer (its Sudachi tokenizer reads Japanese).
        typer: types English titles' names (and every English name when there is no tagger); the
            packaged model when not given.
        tagger: types the English names the capitalisation rules find, from their sentence
            (`name_tagger`); the packaged one when not given and installed.
        caseless: finds and types English names where letter case says nothing; `tagger` when that is
            given, else the packaged case-less tagger (`CASELESS_FOLDER`), else the packaged tagger.
        japanese: finds and types Japanese names from the rules' names and the morphemes (`ja_tagger`);
            the packaged one when not given and installed.
        rules_only: name entities by the rules alone (what fitting the models starts from).
        english_tagger: False to leave the English taggers out (the typer types every English name, and
            case-less English gets the lexicon's names alone), as where the taggers cannot run.
        tagger_types: False to let the typer alone type the names capitalisation finds (no tagger pass
            over cased text: faster, less right; `BuildConfig.name_typing`), and the CRF alone read
            Japanese (no pass of the piece tagger, when `japanese` is not given).
    """

    def __init__(
        self,
        analyzer: Analyzer,
        typer: SpanTyper | None = None,
        tagger: NameTagger | None = None,
        japanese: JapaneseTagger | None = None,
        *,
        caseless: NameTagger | None = None,
        rules_only: bool = False,
        english_tagger: bool = True,
        tagger_types: bool = True,
    ) -> None:
        self._analyzer = analyzer
        self._typer = None if rules_only else (typer or packaged_typer())
        self._tagger = None if rules_only or not english_tagger else (tagger or packaged_tagger())
        self._caseless = (
            None
            if rules_only or not english_tagger
            else (caseless or tagger or packaged_caseless_tagger() or self._tagger)
        )
        self._japanese = (
            None
            if rules_only
            else (japanese or packaged_japanese_tagger(RULES_REVISION, pieces=tagger_types))
        )
        self._tagger_types = tagger_types
        # Only the tagger's reading can tell a lone first word that names something from one that merely
        # starts a sentence (`_english_read`).
        self._reads_initials = self._tagger is not None and tagger_types

    def on_cores(self, cores: int) -> EntityExtractor:
        """This extractor with its taggers run on at most `cores` cores (copies that load their own sessions
        on first use): a build's shard beside other shards, each with its share, since a runtime that takes
        every core in each shard's process makes the shards wait on one another (benchmarks/README.md, "Ten
        million"). The same version and mentions."""
        shared = copy.copy(self)
        shared._tagger = self._tagger.on_cores(cores) if self._tagger is not None else None
        if self._caseless is self._tagger:
            shared._caseless = shared._tagger
        else:
            shared._caseless = self._caseless.on_cores(cores) if self._caseless is not None else None
        shared._japanese = self._japanese.on_cores(cores) if self._japanese is not None else None
        return shared

    @property
    def version(self) -> str:
        """What finds and types the mentions: the rules' revision, the typer's weights (titles, and every
        English name when there is no tagger), the English tagger's and what it does, the case-less one's, and
        the Japanese tagger's
        ("rules-9-en15-ja1+typer-…+tagger-…-types-gated-initials-links+tagger-…-caseless+ja-…", digests of
        the weights). An index records it (`index regraph --reextract` brings one extracted by
        another up to date)."""
        return extraction_version(
            self._typer, self._tagger, self._japanese, self._tagger_types, self._caseless
        )

    def extract(self, text: str) -> list[Mention]:
        """Mentions per sentence of `text`, in order."""
        return self.extract_many([text])[0]

    def extract_many(self, texts: Sequence[str]) -> list[list[Mention]]:
        """`extract` of each text; the tagger reads their sentences together, in batches: those without
        letter case for their names, the others for the types of the names capitalisation finds."""
        plan: list[list[tuple[int, int, str, str]]] = []
        caseless: list[str] = []
        japanese: list[str] = []
        cased: dict[str, list[NameSpan]] = {}
        for text in texts:
            sentences = []
            for start, end in split_sentences(text):
                sentence = text[start:end]
                how = "japanese" if reads_as_japanese(sentence) else "cased"
                if how == "japanese":
                    japanese.append(sentence)
                if how == "cased":
                    sentence = unicodedata.normalize("NFKC", sentence)
                    if not casing_informative(sentence):
                        how = "caseless"
                        # Numbers and punctuation between sentences ("561.", "3).") name nothing.
                        if _WORD_RUN.search(sentence):
                            caseless.append(sentence)
                    elif sentence not in cased:
                        cased[sentence] = self.english_spans(
                            sentence, initials=self._reads_initials, links=self._reads_initials
                        )
                sentences.append((start, end, sentence, how))
            plan.append(sentences)
        unique = list(dict.fromkeys(caseless))  # a repeated sentence is read once
        tagged = (
            dict(zip(unique, self._caseless.tag(unique), strict=True)) if self._caseless is not None else {}
        )
        read = self._settle_links(cased, self._tagger_readings(cased))
        typed = self._typer_readings(cased)
        pieces: dict[str, Pieces | None] = {}
        if self._japanese is not None and japanese:
            distinct = list(dict.fromkeys(japanese))
            pieces = dict(zip(distinct, self._japanese.read_pieces(distinct), strict=True))
        out = []
        for sentences in plan:
            mentions: list[Mention] = []
            # The tagger's reading of each name it typed here (by the mention's position), for `_one_type`.
            readings: dict[int, np.ndarray] = {}
            for start, end, sentence, how in sentences:
                if how == "japanese":
                    mentions.extend(self._japanese_mentions(sentence, start, end, pieces.get(sentence)))
                    continue
                if how == "cased":
                    for surface, kind, reading, no_name in self._english_read(
                        sentence, cased[sentence], read.get(sentence), typed.get(sentence, {})
                    ):
                        if reading is not None and not no_name:
                            readings[len(mentions)] = reading
                        mentions.append(
                            Mention(normalize_name(surface), surface, kind, start, end, node_only=no_name)
                        )
                    continue
                found = self._case_free(sentence, tagged.get(sentence, ()))
                mentions.extend(Mention(normalize_name(s), s, t, start, end) for s, t in found)
            out.append(_resolve_aliases(self._one_type(mentions, readings)))
        return out

    def _one_type(self, mentions: list[Mention], readings: dict[int, np.ndarray]) -> list[Mention]:
        """A name the tagger typed more than once in one text gets one type: the most probable over all its
        readings there (their probabilities summed). A text names one thing by one name, and one
        sentence's reading can be wrong where the others are right ("Toyota" in the sample's
        toyota-en.md: a place in one sentence, an organisation in the others)."""
        if self._tagger is None or len(readings) < 2:
            return mentions
        totals: dict[str, np.ndarray] = {}
        for at, reading in readings.items():
            key = mentions[at].key
            totals[key] = totals[key] + reading if key in totals else reading
        kinds = self._tagger.kinds
        return [
            replace(m, type=kinds[int(np.argmax(totals[m.key]))]) if at in readings else m
            for at, m in enumerate(mentions)
        ]

    def extract_title(self, title: str) -> list[Mention]:
        """Entities named by a document title, as document-level mentions (sentence offsets -1).

        A title names what its document is about, so its entities relate to every entity of the document,
        as a link does in a wiki. A title's first word is not skipped as a sentence start would be.
        """
        return self.extract_titles([title])[0]

    def extract_titles(self, titles: Sequence[str]) -> list[list[Mention]]:
        """`extract_title` of each title; a title repeated is read once, and the Japanese ones' pieces are
        read together (the piece tagger's calls side by side)."""
        distinct = list(dict.fromkeys(titles))
        japanese = [t for t in distinct if t.strip() and has_japanese(t)]
        pieces: dict[str, Pieces | None] = {}
        if self._japanese is not None and japanese:
            pieces = dict(zip(japanese, self._japanese.read_pieces(japanese), strict=True))
        read = {t: self._title(t, pieces.get(t)) for t in distinct}
        return [read[t] for t in titles]

    def _title(self, title: str, pieces: Pieces | None) -> list[Mention]:
        if not title.strip():
            return []
        # A title is a name or a noun phrase: any Japanese in it ("LED照明") is read as Japanese.
        if has_japanese(title):
            mentions = self._japanese_mentions(title, -1, -1, pieces)
            if not mentions and len(title) <= 20:
                mentions = [Mention(normalize_name(title.strip()), title.strip(), OTHER, -1, -1)]
            return mentions
        found = self._english_title(unicodedata.normalize("NFKC", title).strip())
        return [Mention(normalize_name(s), s, t, -1, -1) for s, t in found]

    def _case_free(self, sentence: str, tags: Sequence[Tag]) -> list[tuple[str, str]]:
        """Names in a sentence whose letter case says nothing: the tagger's sure names (surer still for a word
        the lexicon knows as ordinary English too: "fine china", `ORDINARY_NAME_MIN_CONFIDENCE`) that are not
        a head word alone ("a motor corporation", "the river": what a name's head says it is names nothing by
        itself), and those the lexicon knows (countries, regions, languages, nationalities, religions; the
        longest match at each word) where no sure name holds them and more. A sure name that only overlaps a
        lexicon name gives way to it. The longer name first: WikiNEuRal dev lower- / upper-cased typed F1
        0.6782 / 0.6856 -> 0.6941 / 0.7018 (CoNLL-2003 train, first 3,000 sentences, +0.034 / +0.021). A
        quoted title (`_case_free_titles`) takes the place of the names inside it, unless one of them is all
        of it, and gives way to a name across its quotes. A name needs a letter ("2002" is none). One word
        before a thing named after someone is a person's ("hilbert space": `_eponym`), and a family of living
        things is `other` (`_TAXON`), as with letter case."""
        known = _lexicon_spans(sentence)
        ordinary = ordinary_words()
        sure: list[tuple[int, int, str]] = []
        for tag in tags:
            start, end = _whole(sentence, tag.start, tag.end)
            name = sentence[start:end]
            least = ORDINARY_NAME_MIN_CONFIDENCE if name.lower() in ordinary else TAG_MIN_CONFIDENCE
            if (
                tag.confidence >= least
                and tag.type_confidence >= TAG_MIN_TYPE_CONFIDENCE
                and _LETTER.search(name)
                and name.lower() not in _HEAD_WORDS
            ):
                kind = tag.type
                # As with letter case: one word before a thing named after someone is a person's
                # ("hilbert space"), a family of living things is `other` ("kotlassiidae"); a word the
                # lexicon knows keeps its type ("roman numbers").
                if " " not in name.strip() and packaged_lexicon().get(name.lower()) is None:
                    if _eponym(sentence.lower(), end, name.lower()):
                        kind = PERSON
                    elif _TAXON.match(name[:1].upper() + name[1:].lower()):
                        kind = OTHER
                sure.append((start, end, kind))
        # "new york city", "united states air force academy", "new france": as capitals would read them.
        known = [
            (s, e, k)
            for s, e, k in known
            if not any(ts <= s and e <= te and te - ts > e - s for ts, te, _ in sure)
        ]
        spans = known + [
            (st, en, kind) for st, en, kind in sure if not any(s < en and st < e for s, e, _k in known)
        ]
        # A quoted title is one name: it takes the place of the names inside it and gives way to one across it.
        for begin, end in _case_free_titles(sentence):
            inside = [x for x in spans if begin <= x[0] and x[1] <= end]
            across = [x for x in spans if x[0] < end and begin < x[1] and x not in inside]
            if across or any(x[:2] == (begin, end) for x in inside):
                continue
            words = sentence[begin:end].split()
            spans = [x for x in spans if x not in inside] + [(begin, end, self.sure_type(words) or OTHER)]
        return [(sentence[s:e], kind) for s, e, kind in spans]

    def _english_title(self, text: str) -> list[tuple[str, str]]:
        if casing_informative(text):
            return self._english(text, title_case=True)
        # No case to read names from: a short title names its subject, without a trailing disambiguation
        # ("scott howell (political consultant)"), as capitalisation would read it.
        text = DISAMBIGUATION.sub("", text)
        if len(text) < 2 or len(text.split()) > TITLE_NAME_MAX_WORDS:
            return []
        known = packaged_lexicon().get(text.lower())
        if known is not None or self._typer is None:
            return [(text, known or OTHER)]
        return [(text, self._typer.type_of(span_features(text, 0, len(text), OTHER, casing=False)))]

    def _tagger_readings(self, cased: dict[str, list[NameSpan]]) -> dict[str, list[SpanReading | None]]:
        """The tagger's reading (`NameTagger.span_readings`) of every name of these sentences, where one of
        them is a name whose type `_english` leaves to a model."""
        if self._tagger is None or not self._tagger_types:
            return {}
        asked = {
            s: spans
            for s, spans in cased.items()
            if any(_model_typed(span) or span.initial or span.parts or _apart(span) for span in spans)
        }
        if not asked:
            return {}
        sentences = list(asked)
        # After every name, for each one the tagger settles: its parts, then its linking words.
        read = self._tagger.span_readings(
            sentences,
            [
                [(sp.start, sp.end) for sp in asked[s]]
                + [
                    at
                    for sp in asked[s]
                    if sp.parts or _apart(sp)
                    for at in (*((p.start, p.end) for p in sp.parts), sp.link)
                ]
                for s in sentences
            ],
        )
        return dict(zip(sentences, read, strict=True))

    @staticmethod
    def _settle_links(
        cased: dict[str, list[NameSpan]], read: dict[str, list[SpanReading | None]]
    ) -> dict[str, list[SpanReading | None]]:
        """Each candidate with `NameSpan.parts` is one name where the tagger reads its linking words as
        inside a name (their mean "O" probability at most `LINK_MAX_OUTSIDE`: "Apollo 13", "Trinidad and
        Tobago"), and its parts otherwise ("Younis" in a scorecard's "Younis 31", "France" and "Germany"),
        or where the tagger did not read it. `cased`'s spans are settled in place; the readings returned
        are theirs, one a span."""
        settled: dict[str, list[SpanReading | None]] = dict(read)
        for sentence, spans in cased.items():
            if not any(span.parts or _apart(span) for span in spans):
                continue
            readings = read.get(sentence)
            extra = iter(readings[len(spans) :] if readings is not None else ())
            kept: list[NameSpan] = []
            kept_read: list[SpanReading | None] = []
            for k, span in enumerate(spans):
                whole = readings[k] if readings is not None else None
                if not span.parts and not _apart(span):
                    kept.append(span)
                    kept_read.append(whole)
                    continue
                parts = (
                    [next(extra) for _ in span.parts] if readings is not None else [None] * len(span.parts)
                )
                link = next(extra) if readings is not None else None
                if span.left_out_at is not None:
                    one = link is None or link.outside < span.left_out_at
                else:
                    one = link is not None and link.outside <= LINK_MAX_OUTSIDE
                if one:
                    kept.append(span._replace(parts=()))
                    kept_read.append(whole)
                else:
                    kept.extend(span.parts)
                    kept_read.extend(parts)
            cased[sentence] = kept
            if readings is not None:
                settled[sentence] = kept_read
        return settled

    def _typer_readings(
        self, cased: dict[str, list[NameSpan]]
    ) -> dict[str, dict[int, tuple[str, np.ndarray | None]]]:
        """The typer's reading of every name of these sentences whose type `_english_read` leaves to a
        model, by sentence and the name's place in it: its type, and its probabilities of the tagger's
        kinds (None unless the tagger types names). All of them scored together (`SpanTyper.scores_many`)."""
        typer = self._typer
        if typer is None:
            return {}
        asked = [
            (s, k, span) for s, spans in cased.items() for k, span in enumerate(spans) if _model_typed(span)
        ]
        if not asked:
            return {}
        scores = typer.scores_many(
            [span_features(s, span.start, span.end, span.rule_type, casing=True) for s, _k, span in asked]
        )
        kinds = [typer.classes[i] for i in np.argmax(scores, axis=1).tolist()]
        # Only a tagger's reading is multiplied by them (`_english_read`); typer typing has none.
        chances = None
        if self._tagger is not None and self._tagger_types:
            chances = typer.probabilities_many(scores, self._tagger.kinds)
        out: dict[str, dict[int, tuple[str, np.ndarray | None]]] = {}
        for n, (s, k, _span) in enumerate(asked):
            out.setdefault(s, {})[k] = (kinds[n], None if chances is None else chances[n])
        return out

    def _english(self, sentence: str, title_case: bool = False) -> list[tuple[str, str]]:
        return [
            (name, kind)
            for name, kind, _r, _n in self._english_read(sentence, self.english_spans(sentence, title_case))
        ]

    def _english_read(
        self,
        sentence: str,
        spans: list[NameSpan],
        readings: Sequence[SpanReading | None] | None = None,
        typed: dict[int, tuple[str, np.ndarray | None]] | None = None,
    ) -> list[tuple[str, str, np.ndarray | None, bool]]:
        """The names capitalisation found (`spans`) with their types, and the models' reading where they
        typed one. A personal title ("Dr.", "Queen") says person and a name the lexicon knows says its
        type, more surely than a model. Otherwise two models read the name: the tagger, from its whole
        sentence (`readings`, one per span, from `_tagger_readings`; fitted on CoNLL-2003's news), and the
        typer, from the name's words and its neighbours (fitted on WikiANN's Wikipedia names); the type
        is the most probable under the product of their probabilities, unweighted (typed F1 on the
        English dev file: the typer alone 0.606, the tagger alone 0.689, both 0.691, 0.689 with the int8
        export; benchmarks/README.md).
        Without the tagger, the typer alone. `typed`: the typer's readings (`_typer_readings`) when the
        caller has them.

        The last of each tuple says the tagger reads the name as no name at all (its words' mean "O"
        probability at least `NOT_A_NAME`): capitalisation finds words that are not names (a heading's
        words, a term written with a capital), and the type a model would give them is a claim with nothing
        behind it. Such a name is a graph node only (`Mention.node_only`): it still links passages, but
        claims no type for its chunk (benchmarks/README.md, "Names the tagger reads as no name").

        A lone first word (`NameSpan.initial`) is left out unless the tagger reads it as a name (mean "O"
        probability at most `INITIAL_NAME_MAX_OUTSIDE`); then it is typed as any other. A name typed `other`
        takes the year written before it after "the" or a possessive ("the 2014 French Open": `_OWNED_YEAR`)."""
        if typed is None:
            typed = self._typer_readings({sentence: spans}).get(sentence, {})
        found: list[tuple[str, str, np.ndarray | None, bool]] = []
        for k, span in enumerate(spans):
            kind, reading, no_name = span.rule_type, None, False
            read = readings[k] if readings is not None else None
            if span.initial and (read is None or read.outside > INITIAL_NAME_MAX_OUTSIDE):
                continue
            if _model_typed(span):
                reading = read.types if read is not None else None
                no_name = (read is not None and read.outside >= NOT_A_NAME) or bool(
                    _PLURAL_INITIALISM.fullmatch(span.name)
                )
                typer_kind, chances = typed.get(k, (None, None))
                if reading is not None and self._tagger is not None:
                    if chances is not None:
                        reading = reading * chances
                        reading = reading / max(float(reading.sum()), 1e-12)
                    kind = self._tagger.kinds[int(np.argmax(reading))]
                    no_name = no_name or float(reading.max()) < TYPE_MIN_PROBABILITY
                elif typer_kind is not None:
                    kind = typer_kind
            name = span.name
            # Once the type is known: the year before an event is its name's, before a team it is not, nor
            # before a people's word, which describes what follows it ("the 1941 German bombing").
            year = _OWNED_YEAR.search(sentence, 0, span.start) if kind == OTHER and not no_name else None
            if year is not None and not name[:1].isdigit() and packaged_lexicon().get(name.lower()) is None:
                name = f"{year.group(1)} {name}"
            found.append((name, kind, reading, no_name))
        return found

    def english_spans(
        self, sentence: str, title_case: bool = False, *, initials: bool = False, links: bool = False
    ) -> list[NameSpan]:
        """Capitalised names in an English sentence, with the rules' type. A lone capitalised word that
        starts the sentence is usually no name ("Researchers found ..."), so it is left out; with
        `initials`, it is kept as a candidate (`NameSpan.initial`) for the tagger to decide
        (`_english_read`). With `links`, a number written after a name ("Apollo 13") and a joining word
        between two ("Trinidad and Tobago") make candidates of one name, the names without them as their
        `NameSpan.parts`, for the tagger to decide (`_settle_links`)."""
        found = self._quoted_titles(sentence) + self._species_initials(sentence)
        quoted = [(span.start, span.end) for span in found]
        label = self._label_end(sentence) if links and not title_case else 0
        for match in _apart_at_participles(sentence, _CAP_SEQ.finditer(sentence)):
            if any(a < match.end() and match.start() < b for a, b in quoted):
                continue  # a word of a quoted title
            group = match.group()
            words = [w.rstrip(".") if w.rstrip(".").lower() in _TITLES_EN else w for w in group.split()]
            led_by_the = words[0] == "The"
            # Drop leading function words capitalised only because they start the sentence; within a
            # sentence, some start the name before another capitalised word (`_FIRST_WORDS_WITHIN`).
            within = _within(sentence, match.start())
            while (
                words
                and _function_word(words[0])
                and not (within and len(words) > 1 and words[0].lower() in _FIRST_WORDS_WITHIN)
            ):
                words = words[1:]
            if not words:
                continue
            title = words[0].rstrip(".").lower() in _TITLES_EN and len(words) > 1
            if title:
                words = words[1:]
            # Closing punctuation is not the name's, an initialism's last stop is ("Moreirense F.C.").
            closing = ",;:" if _DOTTED.fullmatch(words[-1]) else ".,;:"
            phrase = " ".join(words).rstrip(closing)
            if len(phrase) < 2 or phrase.lower() in ENGLISH_STOPWORDS:
                continue
            begin = match.start() + group.find(words[0])
            before = sentence[:begin]
            if phrase.lower() in _ERAS and (
                _ERA_BEFORE.search(before) or _DIGIT_AFTER.match(sentence, begin + len(phrase))
            ):
                continue
            kept = before.rstrip()
            at_start = not kept or kept.endswith(_OPENERS)
            initial = at_start and not title_case and len(words) == 1 and not _ACRONYM.fullmatch(phrase)
            if initial and not initials:
                continue
            # Where the name is written: the match less what was dropped before it ("The", a title) and
            # after it (closing punctuation).
            written = group.rstrip()
            end = match.end() - (len(written) - len(written.rstrip(closing)))
            end = max(end, begin + 1)
            sure = self.sure_type(words)
            if sure is None and not title and len(words) == 1 and _eponym(sentence, end, words[0]):
                sure = PERSON
            species = self._binomial(sentence, end, words) if sure is None and not title else None
            if species is not None:
                (phrase, end), sure, initial = species, OTHER, False
            kind = sure if sure is not None else self._context_type(words, kept, title)
            # "The" capitalised within a sentence is part of the name ("by The Rolling Stones", "the film
            # The Godfather", 'the film " The Glass Bottom Boat "'): the name keeps it, though the models read
            # the words after it. Not after an opening bracket, nor after marks alone (a heading's "#", a
            # list's "-"), where a capital starts a sentence.
            if led_by_the and not title and not title_case and len(group.split()) - len(words) == 1:
                opening = sentence[: match.start()].rstrip()
                if _LETTER.search(opening) and not opening.endswith("("):
                    phrase = "The " + phrase
            span = NameSpan(phrase, begin, end, kind, title, sure is not None, initial)
            # Not a heading label's number: "RESULTS 20 of the 29 cases" counts cases (`_label_end`).
            number = (
                _TRAILING_NUMBER.match(sentence, end) if links and not title_case and begin >= label else None
            )
            if number is not None:
                numbered = self.sure_type([*words, number.group(1)])
                span = span._replace(
                    name=f"{phrase} {number.group(1)}",
                    end=number.end(1),
                    rule_type=numbered or kind,
                    known=numbered is not None,
                    initial=False,
                    parts=(span,),
                    link=number.span(1),
                )
            found.append(span)
        found = _with_legal_forms(sentence, found)
        if not links or title_case:
            return found
        titles = set(quoted)  # a quoted title (a species' name) is one name as it stands
        out: list[NameSpan] = []
        for span in self._joined(sentence, found):
            if (span.start, span.end) in titles:
                out.append(span)
                continue
            # A heading's label is settled first: "METHODS The UK Prime Minister ..." opens with a label.
            office = self._role_candidate(sentence, span) if span.start >= label else None
            out.append(office or self._first_word_candidate(sentence, span, label))
        return out

    def _role_candidate(self, sentence: str, span: NameSpan) -> NameSpan | None:
        """A name that holds an office's words before a person's name ("Israeli Prime Minister Benjamin
        Netanyahu", "Lieutenant Colonel Edward Braddock", "Baron Churchill"), as a candidate for the tagger
        (`_settle_links`): the office's words (`_ROLE_WORDS` or personal titles, from the first to the last
        of them: "Prime Minister Sir") are its link, and its parts are the person's name after them (typed
        a person's, as after a personal title) and a name the lexicon knows before them ("Israeli",
        "Louisiana"). None where the name holds no such words, they end it, "of" follows them ("Governor of
        Florida"), what follows says it is no person's ("Duke Energy Corp"), or the name is settled
        otherwise."""
        if span.titled or span.parts or span.known:
            return None
        written = sentence[span.start : span.end]
        words = [(m.start() + span.start, m.end() + span.start, m.group()) for m in _SPACED.finditer(written)]
        if " ".join(w for _a, _b, w in words) != span.name:
            return None
        roles = [k for k, (_a, _b, w) in enumerate(words) if w.rstrip(".").lower() in _OFFICE_WORDS]
        if not roles:
            return None
        first, last = roles[0], roles[-1]
        while first and words[first - 1][2].lower() in _ROLE_MODIFIERS:
            first -= 1
        person = words[last + 1 :]
        if not person or any(not w[:1].isupper() for _a, _b, w in person):
            return None
        if self.sure_type([w for _a, _b, w in person]) is not None:
            return None
        parts: list[NameSpan] = []
        before = " ".join(w for _a, _b, w in words[:first])
        kind = packaged_lexicon().get(before.lower()) if first else None
        if kind is not None:
            parts.append(NameSpan(before, words[0][0], words[first - 1][1], kind, False, True))
        # One word left is a name only where the tagger reads one ("General Manager" leaves "Manager").
        name = " ".join(w for _a, _b, w in person)
        parts.append(NameSpan(name, person[0][0], person[-1][1], PERSON, True, initial=len(person) == 1))
        return span._replace(
            parts=tuple(parts), link=(words[first][0], words[last][1]), left_out_at=OFFICE_MIN_OUTSIDE
        )

    def _binomial(self, sentence: str, end: int, words: list[str]) -> tuple[str, int] | None:
        """The species' name that the one capitalised word ending at `end` begins as its genus ("Saccharomyces
        cerevisiae": `_GENUS`, `_EPITHET`), and where it ends; None where it begins none, or there is no
        tagger to tell common words."""
        if self._tagger is None or len(words) != 1 or not _GENUS.fullmatch(words[0]):
            return None
        epithet = _EPITHET.match(sentence, end)
        if epithet is None or _NOT_EPITHET.fullmatch(epithet.group(1)):
            return None
        genus = words[0].lower()
        if packaged_lexicon().get(genus) is not None or self._tagger.common_word(genus):
            return None
        if self._tagger.common_word(epithet.group(1)):
            return None
        return f"{words[0]} {epithet.group(1)}", epithet.end(1)

    def _label_end(self, sentence: str) -> int:
        """Where a heading's label that opens the sentence ends (0: none). A label is words in capitals
        alone, each of `LABEL_MIN_LETTERS` letters or more and a word the tagger's vocabulary holds whole
        (`NameTagger.common_word`: "RESULTS", not "COPD"), joined by commas, "AND", "OR", "OF" or "&",
        before text not in capitals (a word with a small letter, a number, a letter alone): a structured
        abstract's "MAIN OUTCOME MEASURES The ...", "DESIGN, SETTING, AND PARTICIPANTS Microsimulation ...",
        a notice's "UPDATE The ...". Written in capitals, its words are not capitalised for a name's sake,
        but one may still be a name ("NASCAR Kart Racing is ..."): the tagger decides
        (`_first_word_candidate`)."""
        if self._tagger is None or not _LABEL_START.match(sentence):
            return 0
        end = 0
        for match in _SPACED.finditer(sentence):
            word = match.group().rstrip(",;:")
            if word in _LABEL_JOINERS:
                continue
            if _LABEL_WORD.fullmatch(word) and self._tagger.common_word(word):
                end = match.start() + len(word)
                continue
            # The text after it is not in capitals: a word with a small letter, a number or one letter.
            return 0 if _CAPITALS_WORD.fullmatch(word) else end
        return 0

    def _first_word_candidate(self, sentence: str, span: NameSpan, label: int = 0) -> NameSpan:
        """A name of capitalised words that starts its sentence, as a candidate for the tagger
        (`_settle_links`): its first word may be capitalised only because the sentence starts there
        ("Besides Amasia", "Actors Barbra Streisand") or may be the name's ("New York"). Its part is the
        name without that word (and "of" after it: "Activation of AMPK", `_of_candidate`). Not a name with
        another small word after its first ("Ludwig van Beethoven"), a title's, one the lexicon knows whole
        ("United States"), or one already settled otherwise.

        A name that begins within a heading's label (`label`: where it ends, `_label_end`) is such a
        candidate whatever its place and length, the label's words taking the first word's place: its part
        is what follows the label, none if nothing does ("RESULTS Of" and "DESIGN" leave nothing)."""
        words = span.name.split()
        if span.start < label:
            if span.titled or span.parts or " ".join(sentence[span.start : span.end].split()) != span.name:
                return span
            link_end = min(label, span.end)
            rest = sentence[link_end : span.end].split()
        elif (
            len(words) < 2
            or span.titled
            or span.parts
            or packaged_lexicon().get(span.name.lower()) is not None
            or not (words[1][:1].isupper() or _of_candidate(words))
            or sentence[span.start : span.start + len(words[0])] != words[0]
            or sentence[: span.start].rstrip()[-1:] not in ("", *_OPENERS)
        ):
            return span
        else:
            link_end = span.start + len(words[0])
            rest = words[1:]
        # What is left starts the sentence in its turn: without a leading small word ("RESULTS We ..."),
        # and, if one word, a name only where the tagger reads one (`NameSpan.initial`).
        while rest and _function_word(rest[0]):
            rest = rest[1:]
        parts: tuple[NameSpan, ...] = ()
        if rest:
            begin = sentence.find(rest[0], link_end)
            if begin < 0 or begin >= span.end:
                return span
            sure = self.sure_type(rest)
            kind = sure if sure is not None else self._context_type(rest, sentence[:begin].rstrip(), False)
            # After "of" a word's capital is its own ("Loss of Tet2"), not the sentence's, and it may be a
            # species' genus ("Strains of Saccharomyces cerevisiae").
            own = span.start >= label and words[1] == "of"
            alone = len(rest) == 1 and not _ACRONYM.fullmatch(rest[0]) and not own
            name, end = " ".join(rest), span.end
            species = self._binomial(sentence, end, rest) if own and sure is None else None
            if species is not None:
                (name, end), kind, sure = species, OTHER, OTHER
            parts = (NameSpan(name, begin, end, kind, False, sure is not None, alone),)
        return span._replace(
            parts=parts,
            link=(span.start, link_end),
            left_out_at=LABEL_MIN_OUTSIDE if span.start < label else FIRST_WORD_MIN_OUTSIDE,
        )

    def _joined(self, sentence: str, found: list[NameSpan]) -> list[NameSpan]:
        """Two names with only a joining word between them ("and", "for", "of the") become a candidate of one
        name ("Trinidad and Tobago", "British Association for Shooting and Conservation"), the two its
        `NameSpan.parts`, for the tagger to settle; each name joins one other at most, and two names whose
        own words settle their types ("the Spanish Civil War and World War II") are two."""
        spans = sorted(found, key=lambda span: span.start)
        out: list[NameSpan] = []
        joined = False
        at = 0
        while at < len(spans):
            a = spans[at]
            b = spans[at + 1] if at + 1 < len(spans) else None
            link = _JOINING.fullmatch(sentence, a.end, b.start) if b is not None else None
            if b is None or link is None or a.parts or b.parts or b.titled or (a.known and b.known):
                out.append(a)
                at += 1
                continue
            words = [*a.name.split(), *link.group(1).split(), *b.name.split()]
            sure = self.sure_type(words)
            kind = (
                sure
                if sure is not None
                else self._context_type(words, sentence[: a.start].rstrip(), a.titled)
            )
            name = f"{a.name} {link.group(1)} {b.name}"
            out.append(
                NameSpan(name, a.start, b.end, kind, a.titled, sure is not None, False, (a, b), link.span(1))
            )
            joined = True
            at += 2
        return out if joined else found

    def _quoted_titles(self, sentence: str) -> list[NameSpan]:
        """Quoted phrases in title case with a small word inside ("Sympathy for the Devil", "The Lord of
        the Rings"): the title of a work, one name, where capitalisation alone would find its pieces. In
        the English dev file's first 2,000 sentences, 41 of the 44 such phrases are one gold name. So is a
        quoted phrase within a sentence whose every word is capitalised ('the film " The Glass Bottom
        Boat "', 'the single " Melissa "', '" At Fillmore East "'): the rules would drop its "The" or "At"
        and the models read a song as a person."""
        found = []
        for match, begin, end, words in _quoted(sentence, _QUOTED):
            small_inside = (
                words[-1] not in _TITLE_SMALL_WORDS
                and any(w in _TITLE_SMALL_WORDS for w in words)
                and all(w[0].isupper() or w in _TITLE_SMALL_WORDS or not w[0].isalpha() for w in words)
            )
            capitalised = all(w[0].isupper() or not w[0].isalpha() for w in words) and _phrase_within(
                sentence, match, begin, end
            )
            if not (small_inside or capitalised):
                continue
            # A work's title ("other"), unless its own words say otherwise ("... University").
            sure = self.sure_type(words)
            found.append(NameSpan(" ".join(words), begin, end, sure or OTHER, False, True))
        return found

    def _species_initials(self, sentence: str) -> list[NameSpan]:
        """Species' names with the genus cut to its initial ("E. coli": `_SPECIES_INITIAL`), `other`, one
        name each ("M. tuberculosis" too: no disease follows an initial); none without a tagger, as for the
        whole names (`_binomial`)."""
        if self._tagger is None:
            return []
        return [
            NameSpan(f"{match.group()[:2]} {match.group(1)}", match.start(), match.end(), OTHER, False, True)
            for match in _SPECIES_INITIAL.finditer(sentence)
        ]

    @staticmethod
    def sure_type(words: list[str]) -> str | None:
        """The type a name's own words settle: the lexicon knows the whole name (a country, a language, a
        nationality), a club's initialism is in it ("FC ..."), its head word says what it is ("...
        University", "... War II", "... Bridge", "Battle of ..."), or a number ends it ("Apollo 13": a
        thing's)."""
        lowered = [w.lower().rstrip(".,") for w in words]
        known = packaged_lexicon().get(" ".join(lowered))
        if known is not None:
            return known
        if len(lowered) > 1 and (lowered[0] in _CLUB_EN or lowered[-1] in _CLUB_EN):
            return ORGANIZATION  # "FC Pune City", before "City" says place
        # A compound's first part says what the whole is ("University of Wisconsin–River Falls": a
        # university's campus, not a place), so its head words come first.
        dash = next((at for at, word in enumerate(words) if _EN_DASH in word), None)
        first = [*words[:dash], words[dash].split(_EN_DASH, 1)[0]] if dash is not None else []
        for head in [*_heads(first), *_heads(words)]:
            if head in _ORG_SUFFIX_EN:
                return ORGANIZATION
            if head in _EVENT_SUFFIX_EN:
                return OTHER
            if head in _PLACE_SUFFIX_EN:
                return PLACE
        if len(lowered) > 1 and lowered[0] in _PLACE_PREFIX_EN:
            return PLACE
        # A name with a number at its end is a thing's: a mission, a product, an event ("Apollo 13",
        # "Xbox 360", "Euro 96"), as CoNLL-2003's gold labels have it 37 times in 44.
        if len(lowered) > 1 and _NUMBER.match(lowered[-1]):
            return OTHER
        # A family, a subfamily or an order of living things is no organisation and no place
        # ("Kotlassiidae", "Scrophulariaceae", "Araneomorphae").
        if len(words) == 1 and _TAXON.match(words[0]):
            return OTHER
        return None

    @classmethod
    def rule_type(cls, words: list[str], before: str, title: bool) -> str:
        sure = cls.sure_type(words)
        return sure if sure is not None else cls._context_type(words, before, title)

    @staticmethod
    def _context_type(words: list[str], before: str, title: bool) -> str:
        """The rules' type where a name's own words settle none: a title, a preceding place preposition,
        the shape of a personal name."""
        if title:
            return PERSON
        # The last word, not the whole prefix split (a long sentence's names each read it).
        previous = before.rsplit(None, 1)[-1].lower() if before.strip() else ""
        if previous in _PLACE_PREP:
            return PLACE
        if 2 <= len(words) <= 3 and all(w[:1].isupper() and w[1:].islower() for w in words):
            return PERSON
        return OTHER

    def japanese(self, sentence: str) -> list[tuple[str, str]]:
        """Names in a Japanese sentence, with their types: the Japanese tagger's reading of the rules' names
        (the rules' alone without it)."""
        return self._japanese_names(sentence)[0]

    def _japanese_names(
        self, sentence: str, pieces: Pieces | None = None
    ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """`japanese`'s names, and the rules' names the tagger did not keep (graph nodes only); `pieces`:
        the piece tagger's reading of the sentence, when read already (with others, in `extract_many`)."""
        morphemes = self._analyzer.japanese.morphemes(sentence)
        names = self.japanese_rules(sentence, morphemes)
        if self._japanese is None:
            return people_of_places(names), []
        kept, nodes = self._japanese.read(sentence, morphemes, names, pieces)
        return people_of_places(kept), people_of_places(nodes)

    def _japanese_mentions(
        self, sentence: str, start: int, end: int, pieces: Pieces | None = None
    ) -> list[Mention]:
        names, nodes = self._japanese_names(sentence, pieces)
        return [Mention(normalize_name(s), s, t, start, end) for s, t in names] + [
            Mention(normalize_name(s), s, t, start, end, node_only=True) for s, t in nodes
        ]

    def japanese_rules(
        self, sentence: str, morphemes: Sequence[Morpheme] | None = None
    ) -> list[tuple[str, str]]:
        """Names in a Japanese sentence by the head-final rules (`ja_rules`), with their types
        (`morphemes`: the sentence's, when already read)."""
        if morphemes is None:
            morphemes = self._analyzer.japanese.morphemes(sentence)
        return japanese_rules(sentence, morphemes)


def _heads(words: list[str]) -> list[str]:
    """A name's head words, lower-cased: the last (less a sequel's number), then the one before "of" ("Bank
    of England", "Battle of Kosovo", "Carnegie Museum of Natural History")."""
    if not words:
        return []
    lowered = [w.lower().rstrip(".,") for w in words]
    heads = [_head(words)]
    if "of" in lowered[1:]:
        heads.append(lowered[lowered.index("of", 1) - 1])
    return heads


def _head(words: list[str]) -> str:
    """A name's head word, lower-cased: its last, or the one before a sequel's number ("World War II")."""
    lowered = [w.lower().rstrip(".,") for w in words[-2:]]
    return lowered[-2] if len(lowered) > 1 and _SEQUEL.match(lowered[-1]) else lowered[-1]


_HYPHENS = ("-", "\u2010", "\u2011", _EN_DASH)  # hyphen-minus, hyphen, non-breaking hyphen, en dash
_WORD_CHARS_BEFORE = re.compile(r"[^\W_]+$")
_WORD_CHARS_AFTER = re.compile(r"^[^\W_]+")
_DOTTED_OPEN = re.compile(r"(?<![^\W\d_])(?:[^\W\d_]\.)+[^\W\d_]$")  # "u.s" of "u.s.", its last stop cut off


def _whole(sentence: str, start: int, end: int) -> tuple[int, int]:
    """Where a tagged name is with the word it cuts at a hyphen made whole: the tagger's words end at every
    hyphen, so it tags "bcl-" of "bcl-2", "-gamma" of "ifn-gamma" and "-" of "x-y"; such a name takes the
    letters and digits beyond its hyphen (up to the next hyphen or other character). Its words end at full
    stops too, so a name ending in an initialism's last letter ("u.s" of "u.s.") takes the stop after it, as
    capitals would ("U.S.")."""
    if sentence[start:end].startswith(_HYPHENS) and (before := _WORD_CHARS_BEFORE.search(sentence[:start])):
        start = before.start()
    if sentence[start:end].endswith(_HYPHENS) and (after := _WORD_CHARS_AFTER.search(sentence[end:])):
        end += after.end()
    if sentence[end : end + 1] == "." and _DOTTED_OPEN.search(sentence, start, end):
        end += 1
    return start, end


def _apart_at_participles(sentence: str, matches: Iterable[re.Match[str]]) -> Iterator[re.Match[str]]:
    """The runs of capitalised words, each cut after a word a participle ends (`_PARTICIPLE_WORD`:
    "Opel-based Catera" is "Opel-based" and "Catera")."""
    for match in matches:
        start = match.start()
        for word in _SPACED.finditer(match.group()):
            end = match.start() + word.end()
            if end < match.end() and _PARTICIPLE_WORD.fullmatch(word.group()):
                # Searched, not matched: a piece between two such words may open with a joining word.
                piece = _CAP_SEQ.search(sentence, start, end)
                if piece is not None:
                    yield piece
                start = match.start() + word.end()
        if start == match.start():
            yield match
        else:
            # What follows may open with a joining word ("Paris-based de Gaulle Institute"): searched, not
            # matched, so the name after it is kept.
            rest = _CAP_SEQ.search(sentence, start, match.end())
            if rest is not None:
                yield rest


def _of_candidate(words: list[str]) -> bool:
    """Whether a name that starts its sentence with a word, "of" and more ("Activation of AMPK", "Results of
    Major League", "University of Amsterdam") is a first word's candidate (`_first_word_candidate`): not
    where the first word says what the name is ("Port of Spain", "Sea of Japan", which the tagger reads as no
    name's start as surely as "Activation")."""
    return len(words) > 2 and words[1] == "of" and words[0].lower() not in _HEAD_WORDS


def _apart(span: NameSpan) -> bool:
    """Whether some of the name's words may be left out of it (`NameSpan.left_out_at`)."""
    return span.left_out_at is not None


def _function_word(word: str) -> bool:
    """Whether a capitalised word is one of `_NOT_NAMES`, or words of them joined by en dashes
    ("November–December")."""
    return all(part in _NOT_NAMES for part in word.lower().split(_EN_DASH))


def _within(sentence: str, start: int) -> bool:
    """Whether the word at `start` stands within its sentence: after a lower-case word, a number, a comma or
    a semicolon, where a capital is no sentence's start."""
    before = sentence[:start].rstrip()[-1:]
    return bool(before) and (before.islower() or before.isdigit() or before in ",;")


def _with_legal_forms(sentence: str, found: list[NameSpan]) -> list[NameSpan]:
    """A company's legal form after a name and a comma is that name's ("Toyota Motor Co., Ltd.", "Ferris,
    Baker Watts, Inc.", as CoNLL-2003's gold writes them), not a name of its own."""
    out: list[NameSpan] = []
    merged = False
    for span in sorted(found, key=lambda span: span.start):
        previous = out[-1] if out else None
        if (
            previous is not None
            and not previous.parts
            and span.name.lower() in _LEGAL_FORMS
            and _LEGAL_FORM_GAP.fullmatch(sentence, previous.end, span.start)
        ):
            out[-1] = previous._replace(
                name=f"{previous.name}{sentence[previous.end : span.start]}{span.name}",
                end=span.end,
                rule_type=ORGANIZATION,
                known=True,
                initial=False,
            )
            merged = True
            continue
        out.append(span)
    return out if merged else found


def _eponym(sentence: str, end: int, word: str) -> bool:
    """Whether the one-word name `word`, ending at `end`, is a person's by the word after it ("Hilbert
    space", "Raoult's law": `_EPONYM_NOUNS`)."""
    after = _EPONYM_NEXT.match(sentence, end)
    if after is None:
        return False
    possessive = after.group(1) is not None or word.endswith(("'s", "’s", "'", "’"))
    first, second = after.group(2), after.group(3)

    def named(noun: str) -> bool:
        return noun in _EPONYM_NOUNS or (possessive and noun in _EPONYM_POSSESSIVE_NOUNS)

    # A word may stand between them ("Pauli exclusion principle", "Helmholtz free energy"), not a joining
    # one, and then the noun is no verb.
    return named(first) or (
        second is not None
        and first not in ENGLISH_STOPWORDS
        and second not in _EPONYM_VERBS
        and named(second)
    )


def _model_typed(span: NameSpan) -> bool:
    """Whether a model, not the rules, says what type this name is (`EntityExtractor._english`)."""
    return not span.titled and not span.known


def lexicon_name(surface: str) -> bool:
    """Whether a name is one of the lexicon's that text without letter case still shows (a country, a
    language, a nationality: `_case_free` takes the tagger's names where none of these is, or where one holds
    one and more), or one of its names that are ordinary words too, which such text shows where the tagger is
    sure of it ("china")."""
    words = tuple(m.group().lower() for m in TOKEN_PATTERN.finditer(surface))
    return words in case_free_names() or (len(words) == 1 and words[0] in ordinary_words())


def case_free_title(sentence: str, surface: str) -> bool:
    """Whether `surface` is one of the quoted phrases `_case_free` reads as titles in this sentence without
    letter case (`_case_free_titles`): it types its chunk, but only about half of such phrases are names,
    so it makes no node (`graph_build._graph_mentions`)."""
    return any(sentence[begin:end] == surface for begin, end in _case_free_titles(sentence))


def _quoted(sentence: str, pattern: re.Pattern[str]) -> Iterator[tuple[re.Match[str], int, int, list[str]]]:
    """Each phrase `pattern` finds in quotes, without the stops and commas a quote often closes over ('"Batman
    Begins,"'), if it has at most `_QUOTED_MAX_WORDS` words: the match, where the phrase begins and ends, its
    words."""
    for match in pattern.finditer(sentence):
        begin = match.start(1)
        end = begin + len(match.group(1).rstrip(".,;:!? "))
        words = sentence[begin:end].split()
        if words and len(words) <= _QUOTED_MAX_WORDS:
            yield match, begin, end, words


def _case_free_titles(sentence: str) -> list[tuple[int, int]]:
    """Quoted phrases of two words or more within a sentence without letter case (a letter before the
    quote, two letters in a row in it, no bracket): a work's title ('the film " the tunnel of love "', '"hunt
    for the wilderpeople"'), which capitals would have shown (`EntityExtractor._quoted_titles`). One quoted
    word is more often a word in scare quotes ('"eaten"', '"backward"'). In the English dev file's lower-cased
    copy, 222 of its 450 quoted phrases are one gold name (186 of them `other`)."""
    return [
        (begin, end)
        for match, begin, end, words in _quoted(sentence, _QUOTED_ANY)
        if len(words) >= 2 and _phrase_within(sentence, match, begin, end)
    ]


def _phrase_within(sentence: str, match: re.Match[str], begin: int, end: int) -> bool:
    """Whether a quoted phrase (`_quoted`) reads as a name within its sentence: a letter before the quote
    (not speech that opens it), two letters in a row (not 'the letter " A "'), no bracket ('" Beira ( 14.9
    "')."""
    text = sentence[begin:end]
    return (
        bool(_LETTER.search(sentence[: match.start()]))
        and bool(_WORD_RUN.search(text))
        and not any(c in text for c in "()[]")
    )


def _lexicon_spans(sentence: str) -> list[tuple[int, int, str]]:
    """Where the lexicon's names are in `sentence`, read without letter case: the longest at each word."""
    names, longest = case_free_names(), case_free_longest()
    words = [(m.start(), m.end(), m.group().lower()) for m in TOKEN_PATTERN.finditer(sentence)]
    found: list[tuple[int, int, str]] = []
    i = 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 0, -1):
            kind = names.get(tuple(w for _s, _e, w in words[i : i + n]))
            if kind is not None:
                found.append((words[i][0], words[i + n - 1][1], kind))
                i += n
                break
        else:
            i += 1
    return found


def _resolve_aliases(mentions: list[Mention]) -> list[Mention]:
    """A lone surname ("Curie") or given-name-less form refers to the full name met in the same text, and a
    species' name with its genus cut to an initial ("S. cerevisiae") to the whole one ("Saccharomyces
    cerevisiae")."""
    by_last: dict[str, Mention] = {}
    for m in mentions:
        if m.type == PERSON and " " in m.key:
            by_last.setdefault(m.key.rsplit(" ", 1)[1], m)
        elif m.type == OTHER and (whole := _WHOLE_SPECIES.fullmatch(m.surface)) is not None:
            by_last.setdefault(f"{whole.group(1)[0].lower()}. {whole.group(2)}", m)
    out = []
    for m in mentions:
        cut = m.type == OTHER and _SPECIES_INITIAL.fullmatch(m.surface) is not None
        full = by_last.get(m.key) if " " not in m.key or cut else None
        if full is not None and full.key != m.key:
            out.append(replace(m, key=full.key, type=full.type))
        else:
            out.append(m)
    return out
