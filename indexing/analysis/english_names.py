"""English names found by letter case: the capitalisation rules and the types their words settle.

Capitalised word sequences (with "of"/"de"/"von" inside) and acronyms in a sentence where letter case says
something (`entities.casing_informative`), typed by rules: an organisation suffix or "University of", a
personal title, a preceding "in/at/from" for places, and two or three capitalised words otherwise read as a
person's name. What the words alone cannot settle (a sentence's first word, a heading's label, an office before
a name, a number after one, a joining word between two) becomes a candidate (`NameSpan.parts`, `.link`) for the
extractor's tagger to settle (`entities.EntityExtractor`); the tagger's vocabulary also tells common words from
names here (`NameTagger.common_word`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS
from hybridrag.indexing.analysis.entity_types import ORGANIZATION, OTHER, PERSON, PLACE
from hybridrag.indexing.analysis.name_tagger import NameTagger
from hybridrag.indexing.analysis.span_typer import packaged_lexicon

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
TAXON = re.compile(
    r"^[A-Z][a-z]{2,}(?:idae|inae|aceae|oideae|oidea|morpha|morphae|formes|phyta|mycota|opsida)$"
)
# A species' two-word Latin name ("Saccharomyces cerevisiae", "Plasmodium falciparum"): a capitalised genus
# with a Latin ending, then a lower-case epithet with one (`EnglishNames._binomial`). Neither word is
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
WHOLE_SPECIES = re.compile(rf"({_GENUS.pattern}){_EPITHET.pattern}")  # the name an initial's stands for
SPECIES_INITIAL = re.compile(rf"(?<![\w.])[A-Z]\.{_EPITHET.pattern}")
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
HEAD_WORDS = (_ORG_SUFFIX_EN | _EVENT_SUFFIX_EN | _PLACE_SUFFIX_EN | _PLACE_PREFIX_EN) - {"olympics"}
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
# "the" (its own rule: `EnglishNames.spans`), nor prepositions and sentence adverbs, which
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
EN_DASH = "\u2013"
_NAME_WORD = rf"(?:{_DOTTED.pattern}|[{_CAPITAL}][\w’'\-]*(?:[{EN_DASH}&][{_CAPITAL}][\w’'\-]*)*)"
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
LETTER = re.compile(r"[^\W\d_]")
_OPENERS = ('"', "(", "“")  # after one of these a capital starts a sentence, as at the sentence's start
# A quoted phrase in title case (`EnglishNames._quoted_titles`): the words a title leaves in lower case.
_QUOTED = re.compile(rf"[\"“]\s*([{_CAPITAL}][^\"“”]{{0,100}}?)\s*[\"”]")
_QUOTED_MAX_WORDS = 8
_TITLE_SMALL_WORDS = frozenset(
    "a an the of for with in on at to and or from by as into is be are my your our me you it not no but so".split()
)
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,6}s?\b")
# A heading's label in capitals (`EnglishNames._label_end`): its words, and the words that join them.
LABEL_MIN_LETTERS = 4
_LABEL_WORD = re.compile(rf"[A-Z]{{{LABEL_MIN_LETTERS},}}")
_LABEL_START = re.compile(rf"\s*[A-Z]{{{LABEL_MIN_LETTERS},}}\b")
_LABEL_JOINERS = frozenset({"AND", "OR", "OF", "&", ","})
_SPACED = re.compile(r"\S+")
# An office's words before a person's name (`EnglishNames._role_candidate`): not the name's in CoNLL-2003's
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
_OFFICE_WORDS = _ROLE_WORDS | _TITLES_EN  # what `EnglishNames._role_candidate` reads as an office's words
_CAPITALS_WORD = re.compile(r"\W*[A-Z][^a-z]*[A-Z][^a-z]*")  # two capitals or more and no small letter
# The words that may join two names into one ("Trinidad and Tobago", "Temple of the Dog"; "of" alone
# joins them in `_CAP_SEQ`), where the tagger reads them as a name's (`EnglishNames._joined`).
_JOINING = re.compile(r"[ \t]+(and|and the|for|for the|of the)[ \t]+")
# A number of up to four digits right after a name, then a lower-case word or the end of a clause
# ("Apollo 13 was", "UEFA Euro 2004 ,", "Windows 95 ."); not before a capital, a digit, a dash or a bracket,
# where it is a score, a date or a table's column ("Chelsea 2 Arsenal 1", "Kuopio 25 November", "Bahrain 6 – 0").
_TRAILING_NUMBER = re.compile(r"[ \t]+(\d{1,4})(?=\s*(?:[.,;:!?\"”]|$)|\s+[a-z])")


class NameSpan(NamedTuple):
    """A name found in an English sentence."""

    name: str  # its words joined by single spaces: the mention's surface
    start: int  # sentence[start:end] is where it is written
    end: int
    rule_type: str  # the word-list rules' type
    titled: bool  # a personal title precedes it ("Dr.", "Queen")
    known: bool = False  # its type is the rules' own: its words settle it (`sure_type`), or a quoted title
    initial: bool = False  # one capitalised word that starts its sentence: a name only if the tagger says so
    # A candidate the tagger settles (`entities.EntityExtractor._settle_links`): the words at `link` make one
    # name of it where the tagger reads them as inside one, else it is `parts`. A number after a name ("Apollo 13":
    # the part "Apollo"); a joining word between two ("Trinidad and Tobago": "Trinidad", "Tobago").
    parts: tuple[NameSpan, ...] = ()
    link: tuple[int, int] = (0, 0)
    # Set where the words at `link` may be capitalised for another reason than the name: the sentence's first
    # word (`EnglishNames._first_word_candidate`: `FIRST_WORD_MIN_OUTSIDE`), a heading's label in capitals
    # (`_label_end`: `LABEL_MIN_OUTSIDE`), an office before a person's name (`_role_candidate`:
    # `OFFICE_MIN_OUTSIDE`). The name is then `parts` where the tagger's mean "O" probability over those words
    # is at least this, else whole (a number or a joining word is settled by `LINK_MAX_OUTSIDE` instead).
    left_out_at: float | None = None


# A name's first word that starts its sentence is left out of it where the tagger's "O" probability for it
# is at least this ("Besides Amasia": 0.998, "Teammate Russell Ingall": 1.0), and kept where the tagger is
# less sure ("Guru Dutt": 0.58, "Worldwide Pants": 0.69, "National Register of Historic Places": 0.58-0.90).
FIRST_WORD_MIN_OUTSIDE = 0.95
# A heading's label in capitals is left out where the tagger's mean "O" probability over its words (in the
# name) is at least this: more likely no name's than a name's. Written in capitals and common words
# (`EnglishNames._label_end`), a label is seldom a name; the tagger keeps those that are ("NASCAR Kart
# Racing is ...": 0.03). SciFact's corpus, 4,033 labels: 3,871 at 0.95 or more, 139 from 0.5 ("CONTEXT", "TRIAL
# REGISTRATION", "DATA SOURCES"; "FISH" and "FLAIR" too), 23 below ("COSMIC", "STAR", "CONTEXT").
LABEL_MIN_OUTSIDE = 0.5
# An office's words before a person's name ("Prime Minister", "Lieutenant Colonel", "Baron") are left out of it
# where the tagger's mean "O" probability over them is at least this: more likely no name's than a name's, as in
# CoNLL-2003's and WikiNEuRal's gold labels; the tagger keeps those of a name ("Duke Energy", "Duke
# Ellington", "Cardinal Health"). Typed F1 on WikiNEuRal dev / CoNLL-2003 and WikiANN train's first 3,000 sentences:
# never 0.7752 / 0.8818 / 0.4974; at 0.95 0.7772 / 0.8896 / 0.4974; at 0.5 0.7778 / 0.8898 / 0.4972.
OFFICE_MIN_OUTSIDE = 0.5
WORD_RUN = re.compile(r"[^\W\d_]{2,}")  # two letters in a row


class EnglishNames:
    """The capitalisation rules over English sentences. `tagger`: the English name tagger, whose vocabulary
    tells a common word from a name (a species' genus and epithet, a heading's label); None: those rules are
    left out (what fitting the models starts from)."""

    def __init__(self, tagger: NameTagger | None) -> None:
        self._tagger = tagger

    def spans(
        self, sentence: str, title_case: bool = False, *, initials: bool = False, links: bool = False
    ) -> list[NameSpan]:
        """Capitalised names in an English sentence, with the rules' type. A lone capitalised word that
        starts the sentence is usually no name ("Researchers found ..."), so it is left out; with
        `initials`, it is kept as a candidate (`NameSpan.initial`) for the tagger to decide
        (`EntityExtractor._english_read`). With `links`, a number written after a name ("Apollo 13") and a
        joining word between two ("Trinidad and Tobago") make candidates of one name, the names without them as
        their `NameSpan.parts`, for the tagger to decide (`EntityExtractor._settle_links`)."""
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
            if sure is None and not title and len(words) == 1 and eponym(sentence, end, words[0]):
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
                if LETTER.search(opening) and not opening.endswith("("):
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
        (`EntityExtractor._settle_links`): the office's words (`_ROLE_WORDS` or personal titles, from the
        first to the last of them: "Prime Minister Sir") are its link, and its parts are the person's name
        after them (typed a person's, as after a personal title) and a name the lexicon knows before them
        ("Israeli", "Louisiana"). None where the name holds no such words, they end it, "of" follows them ("Governor of
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
        (`EntityExtractor._settle_links`): its first word may be capitalised only because the sentence
        starts there ("Besides Amasia", "Actors Barbra Streisand") or may be the name's ("New York"). Its part is the
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
        for match, begin, end, words in quoted_phrases(sentence, _QUOTED):
            small_inside = (
                words[-1] not in _TITLE_SMALL_WORDS
                and any(w in _TITLE_SMALL_WORDS for w in words)
                and all(w[0].isupper() or w in _TITLE_SMALL_WORDS or not w[0].isalpha() for w in words)
            )
            capitalised = all(w[0].isupper() or not w[0].isalpha() for w in words) and phrase_within(
                sentence, match, begin, end
            )
            if not (small_inside or capitalised):
                continue
            # A work's title ("other"), unless its own words say otherwise ("... University").
            sure = self.sure_type(words)
            found.append(NameSpan(" ".join(words), begin, end, sure or OTHER, False, True))
        return found

    def _species_initials(self, sentence: str) -> list[NameSpan]:
        """Species' names with the genus cut to its initial ("E. coli": `SPECIES_INITIAL`), `other`, one
        name each ("M. tuberculosis" too: no disease follows an initial); none without a tagger, as for the
        whole names (`_binomial`)."""
        if self._tagger is None:
            return []
        return [
            NameSpan(f"{match.group()[:2]} {match.group(1)}", match.start(), match.end(), OTHER, False, True)
            for match in SPECIES_INITIAL.finditer(sentence)
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
        dash = next((at for at, word in enumerate(words) if EN_DASH in word), None)
        first = [*words[:dash], words[dash].split(EN_DASH, 1)[0]] if dash is not None else []
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
        if len(words) == 1 and TAXON.match(words[0]):
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
    return len(words) > 2 and words[1] == "of" and words[0].lower() not in HEAD_WORDS


def _function_word(word: str) -> bool:
    """Whether a capitalised word is one of `_NOT_NAMES`, or words of them joined by en dashes
    ("November–December")."""
    return all(part in _NOT_NAMES for part in word.lower().split(EN_DASH))


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


def eponym(sentence: str, end: int, word: str) -> bool:
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


def quoted_phrases(
    sentence: str, pattern: re.Pattern[str]
) -> Iterator[tuple[re.Match[str], int, int, list[str]]]:
    """Each phrase `pattern` finds in quotes, without the stops and commas a quote often closes over ('"Batman
    Begins,"'), if it has at most `_QUOTED_MAX_WORDS` words: the match, where the phrase begins and ends, its
    words."""
    for match in pattern.finditer(sentence):
        begin = match.start(1)
        end = begin + len(match.group(1).rstrip(".,;:!? "))
        words = sentence[begin:end].split()
        if words and len(words) <= _QUOTED_MAX_WORDS:
            yield match, begin, end, words


def phrase_within(sentence: str, match: re.Match[str], begin: int, end: int) -> bool:
    """Whether a quoted phrase (`quoted_phrases`) reads as a name within its sentence: a letter before the quote
    (not speech that opens it), two letters in a row (not 'the letter " A "'), no bracket ('" Beira ( 14.9
    "')."""
    text = sentence[begin:end]
    return (
        bool(LETTER.search(sentence[: match.start()]))
        and bool(WORD_RUN.search(text))
        and not any(c in text for c in "()[]")
    )
