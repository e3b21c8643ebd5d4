"""Fit the English name typer (`indexing/analysis/span_typer.py`) and write its weights.

Data: English WikiANN (Pan et al. 2017), training split, as in `../shared/data/ner/en-wikiann-train.conll`
(Babelscape/wikineural @d2e28c7 data/wikiann/en/train.conllu: 20,000 sentences, PER / ORG / LOC tags from
Wikipedia links). Examples: every tagged name, labelled person / organization / place; and every name the
capitalisation rules find that overlaps no tagged name, labelled other (WikiANN tags no MISC, and what the
rules find outside its tags is mostly nationalities, events, works and words that are not names). Features
as `span_features` gives them; an L2-regularised multinomial logistic regression (scikit-learn, lbfgs:
deterministic).

    python -m hybridrag.benchmarks.fit_entity_typer --train ../shared/data/ner/en-wikiann-train.conll

Measure with `hybridrag bench entities --dataset ../shared/data/ner/en-wikineural-dev.conll`.
"""

from __future__ import annotations

import argparse
import hashlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hybridrag.benchmarks.entities import Sentence, read_conll
from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import OTHER, EntityExtractor, casing_informative
from hybridrag.indexing.analysis.span_typer import FOLDER, SpanTyper, span_features

# Measured on the English dev file (typed F1): features seen once kept 0.533, seen twice 0.516 (a name's
# whole text seen once is what a gazetteer would know); C 0.5 / 1 / 2 / 4: 0.533 / 0.534 / 0.534 / 0.533.
MIN_COUNT = 1
C = 2.0


def examples(sentences: Sequence[Sentence]) -> tuple[list[list[str]], list[str]]:
    """Features and label of every tagged name and of every rule-found name outside the tags."""
    rules = EntityExtractor(Analyzer(), rules_only=True)
    features: list[list[str]] = []
    labels: list[str] = []
    for sentence in sentences:
        text = sentence.text
        casing = casing_informative(text)
        found = rules.english_spans(text) if casing else []
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
    parser.add_argument("--train", type=Path, required=True, help="English CoNLL file (BIO tags)")
    parser.add_argument("--out", type=Path, default=FOLDER, help="folder for the weights")
    args = parser.parse_args(argv)
    features, labels = examples(read_conll(args.train))
    typer = fit(features, labels)
    digest = hashlib.sha256(args.train.read_bytes()).hexdigest()
    typer.save(
        args.out,
        {
            "fittedBy": "python -m hybridrag.benchmarks.fit_entity_typer",
            "trainingData": "WikiANN English train split (Babelscape/wikineural @d2e28c7 data/wikiann/en/train.conllu)",
            "trainingFile": args.train.name,
            "trainingSha256": digest,
            "examples": dict(sorted(Counter(labels).items())),
            "features": len(typer.vocabulary),
            "C": C,
            "minCount": MIN_COUNT,
        },
    )
    print(f"{len(labels)} examples {dict(Counter(labels))}, {len(typer.vocabulary)} features -> {args.out}")


if __name__ == "__main__":
    main()
