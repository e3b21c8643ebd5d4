"""Entity extraction with no LLM and no model download.

* Japanese: Sudachi part-of-speech. Runs of nouns holding a proper noun, or ending in a name-forming head
  (省, 党, 航空…) after words of their own, become one entity; the type comes from the dictionary (人名
  person, 地名 place, 組織 organization) or from the head (大学, 銀行… an organisation; 市, 駅… a place).
* English: where letter case says something (`casing_informative`), the capitalisation rules
  (`english_names`) find names and the English name tagger types them with the fitted typer; where it says
  nothing (all capitals, all lower case), the case-less tagger finds and types them, beside the lexicon's
  names and quoted titles. The graph build also finds every document title's name in the text whatever its
  case (`graph_build.title_names`), so the graph works on `text like this` and `TEXT LIKE THIS` as on `Text
  Like This`.

Surface forms are normalised (NFKC, case, possessive 's, whitespace) so that variants merge.
"""

from __future__ import annotations

import copy
import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.english_names import (
    EN_DASH,
    HEAD_WORDS,
    LETTER,
    SPECIES_INITIAL,
    TAXON,
    WHOLE_SPECIES,
    WORD_RUN,
    EnglishNames,
    NameSpan,
    eponym,
    phrase_within,
    quoted_phrases,
)
from hybridrag.indexing.analysis.entity_types import OTHER, PERSON
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

DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")
# A plural initialism ("HSCs", "RCTs", "MPs", "RBIs") names a kind of thing, not one thing: a graph node that
# types nothing (`EntityExtractor._english_read`). Of the three English files' gold names only CoNLL-2003's
# "ADRs" (5 times, as MISC) and WikiANN's "VDCs" (once, a place) are; SciFact's corpus has 2,146 typed such,
# 1,050 of them as organisations by the tagger, fitted on news.
_PLURAL_INITIALISM = re.compile(r"[A-Z][A-Z0-9]*[A-Z]s")
# A year written between "the" (or a possessive) and a name typed `other`: the year is the name's ("the 2010
# FIFA World Cup", "Yugoslavia's 1990 World Cup", "the 2014 French Open", "his 1953 Indianapolis 500"), as
# Wikipedia names such events (`EntityExtractor._english_read`). Not before a person, an organisation or a
# place ("the 1991 Red Sox"), nor before a word the lexicon knows ("the 1941 German bombing").
_OWNED_YEAR = re.compile(r"(?:\b(?:[Tt]he|[Hh]is|[Hh]er|[Ii]ts|[Tt]heir)|['’]s)\s+((?:1\d|20)\d\d)\s+$")


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


TITLE_NAME_MAX_WORDS = 6  # a longer title in a casing that says nothing is a headline, not a name


# Bumped whenever the rules find or type names differently (an index extracted by older rules is then
# re-extracted by `bench`, and `index info` shows which extraction an index holds).
RULES_REVISION = 9
# The same for the English capitalisation rules alone, which the Japanese tagger (fitted on the rules'
# Japanese names: `RULES_REVISION`) does not read. 2 (2026-12-04): a capitalised "The" within a sentence and
# "&" belong to the name ("by The Rolling Stones", "Procter & Gamble"). 3 (2026-12-04): a quoted title is one
# name ("Sympathy for the Devil": `EnglishNames._quoted_titles`). 4 (2026-12-04): an event's year after
# "the" belongs to its name ("the 2010 FIFA World Cup"). 5 (2026-12-04): so does a capitalised "The" after an
# opening quote within a sentence ('the film " The Glass Bottom Boat "'). 6 (2026-12-04): a quoted phrase within
# a sentence whose every word is capitalised is one name, a work's ('the single " Melissa "'). 7 (2026-12-04):
# every capital letter starts a name ("Živojinović"); an initialism with full stops is one word ("U.S.",
# "Moreirense F.C."); an era beside a year is no name ("322 BC"); a name's own words settle more types: the word
# before "of", a number at its end (`other`), buildings open to visitors (places), clubs' initialisms; and one
# word before a word named after someone is a person ("Hilbert space", "Raoult's law": `eponym`). 8 (2026-12-05):
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
# family is `other` ("Kotlassiidae": `TAXON`), an era after a century is no name ("the first century BC"), and
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
# (`SPECIES_INITIAL`, `_resolve_aliases`).
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
# training files' first 3,000 sentences (benchmarks/docs/english-names.md, "A case-less name is found before
# it is typed"). Before names were bounded apart from their types, one threshold on the mean probability of
# each word's most probable label, 0.75, was best (0.7133). (Where letter case says something the
# capitalisation rules find the names and the tagger only types them.)
TAG_MIN_CONFIDENCE = 0.9
TAG_MIN_TYPE_CONFIDENCE = 0.7
# A name the lexicon knows that is an ordinary English word too ("china", "turkey", "roman", "republicans":
# `ordinary_words`) is one in text without letter case where the tagger is at least this sure it is a name: it
# reads "exports to china" and "the page is numbered with roman numerals", not "fine china plates" or "cleaned
# with polish", nor "guinea worm" (a name's mass 0.97 there, but a place at 0.69: `TAG_MIN_TYPE_CONFIDENCE`);
# it does read the bird in "we ate turkey" as the country, a miss this threshold keeps. Measured with the tags
# of each word's most probable label (their mean probability): lower- / upper-cased typed F1, never 0.6722 /
# 0.6796 on the English dev file, 0.8358 / 0.8704 on CoNLL-2003 train's first 3,000 sentences; 0.9: 0.6782 /
# 0.6856 and 0.8420 / 0.8764; 0.75 (as any name): 0.6780 / 0.6854 and 0.8420 / 0.8765
# (benchmarks/docs/english-names.md, "A case-less name that is an ordinary word too"). Of a name's mass
# (`TAG_MIN_CONFIDENCE`): 0.95, 0.7217 lower-cased; 0.9, no surer than any name, 0.7219.
ORDINARY_NAME_MIN_CONFIDENCE = 0.95
# What the English tagger does, recorded in the extraction version beside its weights' digest: since
# 2026-11-29 it also types the names the capitalisation rules find in sentences with letter case, with the
# typer (typed F1 0.606 -> 0.689 on the English dev file; benchmarks/docs/entities.md, "Cased names typed by
# the tagger and the typer together"); before, it read only sentences without letter case. Since 2026-12-04
# ("types-gated") a name the tagger reads as no name types nothing (`NOT_A_NAME`), and ("-initials") a lone
# capitalised first word is a name where the tagger reads one (`INITIAL_NAME_MAX_OUTSIDE`), and ("-links") a
# number after a name or a joining word between two names is the name's where the tagger reads it so
# (`LINK_MAX_OUTSIDE`).
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
# 0.705 / 0.861; 0.7: 0.705 / 0.861 (benchmarks/docs/english-names.md, "A name that starts its sentence").
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
        # The capitalisation rules: what finds English names where letter case says something.
        self.english = EnglishNames(self._tagger)
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
        every core in each shard's process makes the shards wait on one another (benchmarks/docs/scale.md,
        "Ten million"). The same version and mentions."""
        shared = copy.copy(self)
        shared._tagger = self._tagger.on_cores(cores) if self._tagger is not None else None
        shared.english = EnglishNames(shared._tagger)
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
                        if WORD_RUN.search(sentence):
                            caseless.append(sentence)
                    elif sentence not in cased:
                        cased[sentence] = self.english.spans(
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
        before a thing named after someone is a person's ("hilbert space": `eponym`), and a family of living
        things is `other` (`TAXON`), as with letter case."""
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
                and LETTER.search(name)
                and name.lower() not in HEAD_WORDS
            ):
                kind = tag.type
                # As with letter case: one word before a thing named after someone is a person's
                # ("hilbert space"), a family of living things is `other` ("kotlassiidae"); a word the
                # lexicon knows keeps its type ("roman numbers").
                if " " not in name.strip() and packaged_lexicon().get(name.lower()) is None:
                    if eponym(sentence.lower(), end, name.lower()):
                        kind = PERSON
                    elif TAXON.match(name[:1].upper() + name[1:].lower()):
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
            spans = [x for x in spans if x not in inside] + [
                (begin, end, EnglishNames.sure_type(words) or OTHER)
            ]
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
            for name, kind, _r, _n in self._english_read(sentence, self.english.spans(sentence, title_case))
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
        export; benchmarks/docs/entities.md).
        Without the tagger, the typer alone. `typed`: the typer's readings (`_typer_readings`) when the
        caller has them.

        The last of each tuple says the tagger reads the name as no name at all (its words' mean "O"
        probability at least `NOT_A_NAME`): capitalisation finds words that are not names (a heading's
        words, a term written with a capital), and the type a model would give them is a claim with nothing
        behind it. Such a name is a graph node only (`Mention.node_only`): it still links passages, but
        claims no type for its chunk (benchmarks/docs/english-names.md, "Names the tagger reads as no name").

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


_HYPHENS = ("-", "\u2010", "\u2011", EN_DASH)  # hyphen-minus, hyphen, non-breaking hyphen, en dash
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


def _apart(span: NameSpan) -> bool:
    """Whether some of the name's words may be left out of it (`NameSpan.left_out_at`)."""
    return span.left_out_at is not None


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


# Any quoted phrase, for text without letter case (`_case_free_titles`).
_QUOTED_ANY = re.compile(r"[\"“]\s*([^\"“”\s][^\"“”]{0,100}?)\s*[\"”]")


def case_free_title(sentence: str, surface: str) -> bool:
    """Whether `surface` is one of the quoted phrases `_case_free` reads as titles in this sentence without
    letter case (`_case_free_titles`): it types its chunk, but only about half of such phrases are names,
    so it makes no node (`graph_build._graph_mentions`)."""
    return any(sentence[begin:end] == surface for begin, end in _case_free_titles(sentence))


def _case_free_titles(sentence: str) -> list[tuple[int, int]]:
    """Quoted phrases of two words or more within a sentence without letter case (a letter before the
    quote, two letters in a row in it, no bracket): a work's title ('the film " the tunnel of love "', '"hunt
    for the wilderpeople"'), which capitals would have shown (`EnglishNames._quoted_titles`). One quoted
    word is more often a word in scare quotes ('"eaten"', '"backward"'). In the English dev file's lower-cased
    copy, 222 of its 450 quoted phrases are one gold name (186 of them `other`)."""
    return [
        (begin, end)
        for match, begin, end, words in quoted_phrases(sentence, _QUOTED_ANY)
        if len(words) >= 2 and phrase_within(sentence, match, begin, end)
    ]


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
        elif m.type == OTHER and (whole := WHOLE_SPECIES.fullmatch(m.surface)) is not None:
            by_last.setdefault(f"{whole.group(1)[0].lower()}. {whole.group(2)}", m)
    out = []
    for m in mentions:
        cut = m.type == OTHER and SPECIES_INITIAL.fullmatch(m.surface) is not None
        full = by_last.get(m.key) if " " not in m.key or cut else None
        if full is not None and full.key != m.key:
            out.append(replace(m, key=full.key, type=full.type))
        else:
            out.append(m)
    return out
