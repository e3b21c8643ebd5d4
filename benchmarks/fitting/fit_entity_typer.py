"""Fit the English name typer (`indexing/analysis/span_typer.py`) and write its weights.

Data: English WikiANN (Pan et al. 2017), training split, as in `../shared/data/ner/en-wikiann-train.conll`
(Babelscape/wikineural @d2e28c7 data/wikiann/en/train.conllu: 20,000 sentences, PER / ORG / LOC tags from
Wikipedia links). Examples: every tagged name, labelled person / organization / place (MISC, where a file
has it: other); and every name the capitalisation rules find that overlaps no tagged name, labelled other
(WikiANN tags no MISC, and what the rules find outside its tags is mostly nationalities, events, works and
words that are not names). Several files are read in order: WikiANN then CoNLL-2003 (`en-conll2003-train.conll`)
gave 0.635 typed F1 on the English dev file against 0.606, but typed the bundled sample's "Sony" as a place,
so the shipped typer is WikiANN's (benchmarks/docs/entities.md). Features
as `span_features` gives them; an L2-regularised multinomial logistic regression (scikit-learn, lbfgs:
deterministic).

    python -m hybridrag.benchmarks.fitting.fit_entity_typer --train ../shared/data/ner/en-wikiann-train.conll

Before fitting, the script writes the rules' lexicon (`entity_typer/lexicon.json`, read by the rules, so the
typer is fitted on the rule types the index will give): the English names of countries and world regions and
of the languages with a two-letter ISO 639 code, from the Unicode CLDR as the `babel` package carries it
(territory and language display names, locale `en`), and the word lists below (nationalities, peoples,
religions and their adherents, political camps), which CLDR does not give.

Measure with `hybridrag bench entities --dataset ../shared/data/ner/en-wikineural-dev.conll`.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hybridrag.benchmarks.entities import Sentence, read_conll
from hybridrag.benchmarks.fitting import training_sources
from hybridrag.indexing.analysis.english_names import EnglishNames
from hybridrag.indexing.analysis.entities import casing_informative
from hybridrag.indexing.analysis.entity_types import OTHER
from hybridrag.indexing.analysis.span_typer import FOLDER, LEXICON, SpanTyper, reload_lexicon, span_features

# Measured on the English dev file (typed F1): features seen once kept 0.533, seen twice 0.516 (a name's
# whole text seen once is what a gazetteer would know); C 0.5 / 1 / 2 / 4: 0.533 / 0.534 / 0.534 / 0.533.
# With the lexicon and head words (rules revision 3): 0.606; classes weighted to balance "other" 0.604.
MIN_COUNT = 1
C = 2.0


# Nationalities and peoples (adjective and plural forms are added: "-s" where English forms a plural noun),
# religions and their adherents, political camps (`CASED_ONLY`): what CoNLL-style annotation calls MISC (the index's
# "other"), and what the typer, fitted on person / organization / place tags, would otherwise call a place.
NATIONALITIES = (
    "american british english scottish welsh irish french german italian spanish portuguese dutch belgian swiss "
    "austrian swedish norwegian danish finnish icelandic polish czech slovak hungarian romanian bulgarian greek "
    "turkish russian ukrainian belarusian serbian croatian bosnian slovenian albanian macedonian estonian "
    "latvian lithuanian georgian armenian azerbaijani kazakh uzbek chinese japanese korean vietnamese thai "
    "cambodian laotian burmese malaysian indonesian filipino singaporean indian pakistani bangladeshi nepalese "
    "afghan iranian persian iraqi syrian lebanese israeli jordanian palestinian saudi yemeni omani emirati "
    "qatari kuwaiti egyptian libyan tunisian algerian moroccan sudanese ethiopian eritrean somali kenyan "
    "ugandan tanzanian rwandan nigerian ghanaian senegalese malian cameroonian congolese angolan zambian "
    "zimbabwean mozambican namibian canadian mexican cuban jamaican haitian puerto-rican guatemalan honduran "
    "salvadoran nicaraguan panamanian colombian venezuelan ecuadorian peruvian bolivian chilean argentine "
    "argentinian uruguayan paraguayan brazilian australian fijian samoan tongan hawaiian european african "
    "asian arab arabian latino latina hispanic scandinavian nordic balkan slavic celtic anglo-saxon roman "
    "byzantine ottoman soviet prussian bavarian catalan basque flemish walloon maori māori inuit kurdish "
    "bengali punjabi gujarati tamil telugu sinhalese mongol mongolian tibetan manchu aboriginal cherokee "
    "sioux navajo apache zulu xhosa berber bedouin pashtun tajik uyghur hmong quebecois texan californian "
    "yankee dixie confederate"
).split()
RELIGIONS = (
    "christian christians christianity catholic catholics catholicism protestant protestants anglican "
    "anglicans lutheran lutherans calvinist calvinists methodist methodists presbyterian mormon mormons muslim "
    "muslims islam islamic sunni sunnis shia shiite shiites hindu hindus hinduism buddhist buddhists buddhism "
    "jewish jew jews judaism sikh sikhs sikhism jain jains jainism zoroastrian taoist taoism shinto bahá'í "
    "bahá'ís baháʼí baháʼís"
).split()
# Also written in lower case as ordinary words ("a republican form of government", "an orthodox view"):
# typed other when capitalised, never looked for in text without letter case.
CASED_ONLY = (
    "republican republicans democrat democrats communist communists socialist socialists nazi nazis marxist "
    "marxists fascist fascists bolshevik bolsheviks tory tories orthodox evangelical evangelicals baptist "
    "baptists"
).split()
# Countries and regions as English text names them where CLDR does not (other or earlier names, the
# nations of the United Kingdom, historical states) and the states and provinces of the largest
# English-speaking federations.
EXTRA_PLACES = (
    "turkey|czech republic|burma|ivory coast|swaziland|east timor|macedonia|holland|persia|england|scotland|"
    "wales|northern ireland|britain|great britain|america|soviet union|ussr|yugoslavia|czechoslovakia|"
    "east germany|west germany|prussia|ottoman empire|roman empire|byzantine empire|siberia|scandinavia|"
    "middle east|far east|mesopotamia|alabama|alaska|arizona|arkansas|california|colorado|connecticut|"
    "delaware|florida|hawaii|idaho|illinois|indiana|iowa|kansas|kentucky|louisiana|maine|maryland|"
    "massachusetts|michigan|minnesota|mississippi|missouri|montana|nebraska|nevada|new hampshire|new jersey|"
    "new mexico|new york|north carolina|north dakota|ohio|oklahoma|oregon|pennsylvania|rhode island|"
    "south carolina|south dakota|tennessee|texas|utah|vermont|virginia|washington|west virginia|wisconsin|"
    "wyoming|ontario|quebec|british columbia|alberta|manitoba|saskatchewan|nova scotia|new brunswick|"
    "newfoundland|queensland|new south wales|tasmania|western australia|south australia"
).split("|")
# Names that are also ordinary English words: not looked for in text without letter case.
COMMON_WORDS = "polish turkey china chad jersey guinea afar ewe ido roman latin".split()
_NOT_PLACES = {
    "world",
    "unknown region",
    "pseudo-accents",
    "pseudo-bidi",
    "european union",
    "eurozone",
    "united nations",
}


def build_lexicon() -> dict[str, object]:
    """The rules' lexicon, from CLDR's English display names and the lists above."""
    from babel import Locale, __version__

    english = Locale("en")
    places = {
        name
        for code, name in english.territories.items()
        if (code.isdigit() or len(code) == 2) and name.lower() not in _NOT_PLACES
    }
    # CLDR writes "Bosnia & Herzegovina", "St. Lucia", "Myanmar (Burma)": the names as text writes them too.
    for name in list(places):
        places.add(name.replace(" & ", " and ").replace("St. ", "Saint "))
        places.add(re.sub(r"\s*\(.*\)$", "", name))
    places |= set(EXTRA_PLACES)
    languages = {n for code, n in english.languages.items() if len(code) == 2 and n not in places}
    other = set(NATIONALITIES) | {w + "s" for w in NATIONALITIES if w.endswith(("an", "i", "ic"))}
    other |= set(RELIGIONS) | languages
    lowered_places = {p.lower() for p in places}
    return {
        "source": f"CLDR English territory and language names (babel {__version__}); word lists in "
        "benchmarks/fitting/fit_entity_typer.py",
        "place": sorted(lowered_places),
        "other": sorted({o.lower() for o in other} - lowered_places),
        "otherCased": sorted(set(CASED_ONLY)),
        "notCaseFree": sorted(set(COMMON_WORDS) | set(CASED_ONLY)),
    }


def examples(sentences: Sequence[Sentence]) -> tuple[list[list[str]], list[str]]:
    """Features and label of every tagged name and of every rule-found name outside the tags."""
    rules = EnglishNames(tagger=None)
    features: list[list[str]] = []
    labels: list[str] = []
    for sentence in sentences:
        text = sentence.text
        casing = casing_informative(text)
        found = rules.spans(text) if casing else []
        rule_types = {(span.start, span.end): span.rule_type for span in found}
        tagged = {i for start, end, _kind in sentence.spans for i in range(start, end)}
        for start, end, kind in sentence.spans:
            rule_type = rule_types.get((start, end)) or rules.rule_type(
                text[start:end].split(), text[:start], False
            )
            features.append(span_features(text, start, end, rule_type, casing))
            labels.append(kind)
        for span in found:
            if not tagged.intersection(range(span.start, span.end)):
                features.append(span_features(text, span.start, span.end, span.rule_type, casing))
                labels.append(OTHER)
    return features, labels


def fit(features: list[list[str]], labels: list[str], c: float = C) -> SpanTyper:
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    counts = Counter(f for row in features for f in set(row))
    vocabulary = {f: i for i, f in enumerate(sorted(f for f, n in counts.items() if n >= MIN_COUNT))}
    rows, cols = [], []
    for r, row in enumerate(features):
        for i in sorted({vocabulary[f] for f in row if f in vocabulary}):
            rows.append(r)
            cols.append(i)
    x = sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(features), len(vocabulary))
    )
    model = LogisticRegression(C=c, max_iter=5000)
    model.fit(x, labels)
    return SpanTyper(
        vocabulary, model.coef_.T.copy(), model.intercept_.copy(), [str(k) for k in model.classes_]
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--train", type=Path, nargs="+", required=True, help="English CoNLL file(s) (BIO tags), read in order"
    )
    parser.add_argument("--out", type=Path, default=FOLDER, help="folder for the weights")
    args = parser.parse_args(argv)
    LEXICON.write_text(json.dumps(build_lexicon(), indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    reload_lexicon()
    features, labels = examples([s for path in args.train for s in read_conll(path)])
    typer = fit(features, labels)
    typer.save(
        args.out,
        {
            "fittedBy": "python -m hybridrag.benchmarks.fitting.fit_entity_typer",
            **training_sources(args.train),
            "examples": dict(sorted(Counter(labels).items())),
            "features": len(typer.vocabulary),
            "C": C,
            "minCount": MIN_COUNT,
        },
    )
    print(f"{len(labels)} examples {dict(Counter(labels))}, {len(typer.vocabulary)} features -> {args.out}")


if __name__ == "__main__":
    main()
